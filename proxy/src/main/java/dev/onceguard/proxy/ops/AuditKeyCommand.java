package dev.onceguard.proxy.ops;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.onceguard.proxy.config.ConfigException;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import java.io.PrintWriter;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code onceguard audit-key --route R [--business-key /a,/b] [--fingerprint-exclude /x]
 * [--from TIME | --last N] [--limit N] [--json]}: proves a business key on a topic's existing
 * records before it is deployed (see {@link KeyAudit}). Reads the route's topics with a consumer
 * that has no group, so nothing is committed and no group is touched; never writes to MySQL.
 *
 * <p>Exit codes: 0 the key is sound on the records read; 2 it is not (collisions, missing key
 * fields or conflicting facts), or bad usage; 3 a topic does not exist; 1 Kafka could not be read.
 */
@Command(name = "audit-key", mixinStandardHelpOptions = true,
    description = {"Prove a business key on a route's existing records before deploying it: collisions (same key, different content),"
        + " exact duplicates and their ages, missing key fields, and for a machine route out-of-order and refused transitions.",
        "Read-only: no consumer group, nothing committed. Exits 0 when the key is sound, 2 when it is not."})
final class AuditKeyCommand extends Main.ConfigCommand {
  /** Exit code when the key is not sound; the same as a usage error, as the contract asks. */
  static final int EXIT_UNSOUND = 2;

  @Option(names = "--route", required = true, paramLabel = "NAME", description = "The route whose topics and extraction to audit.")
  String route;

  @Option(names = "--business-key", paramLabel = "FIELDS", split = ",",
      description = "A candidate business key instead of the route's (field sources as in the configuration: /order_id,header:h,key).")
  List<String> businessKey;

  @Option(names = "--fingerprint-exclude", paramLabel = "POINTERS", split = ",",
      description = "Candidate fingerprint-exclude pointers instead of the route's.")
  List<String> fingerprintExclude;

  @ArgGroup(exclusive = true)
  Range range;

  static final class Range {
    @Option(names = "--from", paramLabel = "TIME", description = "Start at the records written at or after this instant (ISO-8601).")
    Instant from;

    @Option(names = "--last", paramLabel = "N", description = "Only the last N records of each partition.")
    Long last;
  }

  @Option(names = "--limit", paramLabel = "N", defaultValue = "5", description = "Example coordinates per finding (default ${DEFAULT-VALUE}).")
  int limit;

  @Option(names = "--json", description = "Print the report as JSON.")
  boolean json;

  @Override
  int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) {
    RouteConfig candidate;
    try {
      if (range != null && range.last != null && range.last < 1) {
        throw new ConfigException("--last: give at least 1");
      }
      if (limit < 0) {
        throw new ConfigException("--limit: give 0 or more");
      }
      candidate = CandidateKey.apply(AdminCommands.route(cfg, route), businessKey, fingerprintExclude);
    } catch (IllegalArgumentException | ConfigException e) {
      err.println("config error: " + e.getMessage());
      err.flush();
      return Main.EXIT_CONFIG;
    }
    KeyAudit audit = new KeyAudit(candidate, candidate.hasMachine() ? cfg.machines().get(candidate.machine()) : null, limit);
    TopicScan.Start start = range == null ? new TopicScan.Start(null, null) : new TopicScan.Start(range.from, range.last);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(AdminCommands.clientProps(cfg, true))) {
      new TopicScan(consumer, err).scan(candidate.intake().topics(), start, Duration.ofSeconds(60), audit::add);
    } catch (IllegalArgumentException e) {
      err.println("error: route '" + candidate.name() + "': " + e.getMessage());
      err.flush();
      return AdminCommands.EXIT_REFUSED;
    } catch (RuntimeException e) {
      err.println("error: could not read the topics " + candidate.intake().topics() + ": " + AdminCommands.rootMessage(e));
      err.flush();
      return Main.EXIT_FAILURE;
    }
    KeyAudit.Report report = audit.report();
    if (json) {
      ObjectMapper mapper = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
      ObjectNode tree = mapper.valueToTree(report);
      tree.put("sound", report.sound());
      out.println(tree.toPrettyString());
    } else {
      out.print(report.text());
    }
    out.flush();
    return report.sound() ? Main.EXIT_OK : EXIT_UNSOUND;
  }
}
