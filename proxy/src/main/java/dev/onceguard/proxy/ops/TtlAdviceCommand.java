package dev.onceguard.proxy.ops;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.store.Db;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code onceguard ttl-advice --config FILE (--from-db | --prometheus URL) [--route NAME]}: how late
 * duplicates arrive and which L1 TTL would have answered them from Redis (see {@link TtlAdvice}).
 * From the decision log (every duplicate that missed L1 is logged with its age), or from
 * Prometheus (the histogram {@code onceguard_duplicate_age_seconds}, which also counts L1 hits).
 * Read-only.
 */
@Command(name = "ttl-advice", mixinStandardHelpOptions = true,
    description = "How late do duplicates arrive, and which Redis TTL would have answered them? Reads the decision log (--from-db)"
        + " or Prometheus (--prometheus URL).")
final class TtlAdviceCommand extends Main.ConfigCommand {
  @ArgGroup(exclusive = true, multiplicity = "1")
  Source source;

  static final class Source {
    @Option(names = "--from-db", required = true,
        description = "Read the ages from the decision log in MySQL (it keeps mysql.decision-retention of history).")
    boolean fromDb;

    @Option(names = "--prometheus", required = true, paramLabel = "URL",
        description = "Read the histogram onceguard_duplicate_age_seconds from this Prometheus (e.g. http://prometheus:9090).")
    URI prometheus;
  }

  @Option(names = "--window", paramLabel = "DAYS", defaultValue = "30",
      description = "With --prometheus: how many days back to look (default ${DEFAULT-VALUE}).")
  int windowDays;

  @Option(names = "--route", paramLabel = "NAME", description = "Only this route (default: every route).")
  String route;

  @Override
  int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) throws InterruptedException {
    List<RouteConfig> routes = cfg.routes().stream().filter(r -> route == null || r.name().equals(route)).toList();
    if (routes.isEmpty()) {
      err.println("config error: --route: no route named '" + route + "' in the configuration");
      err.flush();
      return Main.EXIT_CONFIG;
    }
    return source.prometheus != null ? fromPrometheus(routes, out, err) : fromDb(cfg, routes, out, err);
  }

  private int fromDb(SidecarConfig cfg, List<RouteConfig> routes, PrintWriter out, PrintWriter err) {
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
        out.print(TtlAdvice.report(r.name(), known, ages.size() - known.length, others, r.timings().redisTtl(), window));
      }
      out.flush();
      return Main.EXIT_OK;
    } catch (RuntimeException e) {
      err.println("error: could not read the decision log (" + cfg.mysql() + "): " + e.getMessage());
      err.flush();
      return Main.EXIT_FAILURE;
    }
  }

  private int fromPrometheus(List<RouteConfig> routes, PrintWriter out, PrintWriter err) throws InterruptedException {
    Duration window = Duration.ofDays(windowDays);
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    try {
      for (RouteConfig r : routes) {
        String sel = "route=\"" + r.name().replace("\"", "\\\"") + "\"";
        JsonNode buckets = query(http, "sum by (le) (increase(onceguard_duplicate_age_seconds_bucket{" + sel
            + ",reason=\"LEDGER_HIT\"}[" + windowDays + "d]))");
        Map<Double, Double> cumulative = new TreeMap<>();
        for (JsonNode row : buckets) {
          String le = row.path("metric").path("le").asText();
          cumulative.put(le.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(le), row.path("value").path(1).asDouble());
        }
        double cacheHits = scalar(query(http, "sum(increase(onceguard_duplicate_age_seconds_count{" + sel
            + ",reason=\"CACHE_HIT\"}[" + windowDays + "d]))"));
        double others = scalar(query(http, "sum(increase(onceguard_duplicate_age_seconds_count{" + sel
            + ",reason!~\"CACHE_HIT|LEDGER_HIT\"}[" + windowDays + "d]))"));
        out.print(TtlAdvice.reportFromBuckets(r.name(), cumulative, cacheHits, others, r.timings().redisTtl(), window));
      }
      out.flush();
      return Main.EXIT_OK;
    } catch (IOException | RuntimeException e) {
      err.println("error: could not query Prometheus at " + source.prometheus + ": " + e.getMessage());
      err.flush();
      return Main.EXIT_FAILURE;
    }
  }

  /** The result vector of an instant query. */
  private JsonNode query(HttpClient http, String promql) throws IOException, InterruptedException {
    URI uri = source.prometheus.resolve("/api/v1/query?query=" + URLEncoder.encode(promql, StandardCharsets.UTF_8));
    HttpResponse<String> res = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    JsonNode body = new ObjectMapper().readTree(res.body());
    if (res.statusCode() != 200 || !"success".equals(body.path("status").asText())) {
      throw new IOException("HTTP " + res.statusCode() + ": " + body.path("error").asText(res.body()));
    }
    return body.path("data").path("result");
  }

  private static double scalar(JsonNode result) {
    return result.isEmpty() ? 0 : result.get(0).path("value").path(1).asDouble();
  }
}
