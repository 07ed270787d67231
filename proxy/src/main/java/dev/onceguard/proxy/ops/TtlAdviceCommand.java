package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.store.Db;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.List;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code onceguard ttl-advice --config FILE --from-db [--route NAME]}: reads the decision log
 * (every duplicate that missed L1 is logged with its age since the original was confirmed) and
 * prints, per route, how late duplicates arrive and which L1 TTL would have answered them from
 * Redis (see {@link TtlAdvice}). Read-only.
 */
@Command(name = "ttl-advice", mixinStandardHelpOptions = true,
    description = "How late do duplicates arrive, and which Redis TTL would have answered them? Reads the decision log (--from-db).")
final class TtlAdviceCommand extends Main.ConfigCommand {
  @Option(names = "--from-db", required = true,
      description = "Read the ages from the decision log in MySQL (it keeps mysql.decision-retention of history).")
  boolean fromDb;

  @Option(names = "--route", paramLabel = "NAME", description = "Only this route (default: every route).")
  String route;

  @Override
  int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) {
    List<RouteConfig> routes = cfg.routes().stream().filter(r -> route == null || r.name().equals(route)).toList();
    if (routes.isEmpty()) {
      err.println("config error: --route: no route named '" + route + "' in the configuration");
      err.flush();
      return Main.EXIT_CONFIG;
    }
    Duration window = cfg.mysql().decisionRetention();
    String decisions = cfg.mysql().tablePrefix() + "decision";
    try (Db db = new Db(cfg.mysql())) {
      long since = System.currentTimeMillis() - window.toMillis();
      for (RouteConfig r : routes) {
        List<List<Object>> ages = db.select("SELECT original_age_ms FROM " + decisions
            + " WHERE route = ? AND disposition = 'DUPLICATE_IGNORE' AND reason = 'LEDGER_HIT' AND at_ms >= ?", r.name(), since);
        long[] known = ages.stream().filter(row -> row.get(0) != null).mapToLong(row -> ((Number) row.get(0)).longValue()).toArray();
        long others = ((Number) db.select("SELECT COUNT(*) FROM " + decisions
            + " WHERE route = ? AND disposition = 'DUPLICATE_IGNORE' AND reason <> 'LEDGER_HIT' AND at_ms >= ?", r.name(), since)
            .get(0).get(0)).longValue();
        out.print(TtlAdvice.report(r.name(), known, ages.size() - known.length, others, r.redisTtl(), window));
      }
      out.flush();
      return Main.EXIT_OK;
    } catch (RuntimeException e) {
      err.println("error: could not read the decision log (" + cfg.mysql() + "): " + e.getMessage());
      err.flush();
      return Main.EXIT_FAILURE;
    }
  }
}
