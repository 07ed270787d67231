package dev.onceguard.demo;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The demo driver that {@code scripts/demo.sh} runs, in two steps around starting the sidecar:
 *
 * <pre>
 *   onceguard-demo setup --run-id ID --business-port PORT --config-out FILE [--database NAME] [--redis-prefix P]
 *       creates the run's topics, deletes the demo's Redis keys, writes the sidecar's YAML
 *   onceguard-demo run --run-id ID --business-log FILE [--database NAME] [--redis-prefix P]
 *       waits for the sidecar, plays the story, prints it; exit 0 if everything happened as expected
 * </pre>
 *
 * Services come from the environment of {@code .stack/env} ({@code ONCEGUARD_KAFKA_BOOTSTRAP},
 * {@code ONCEGUARD_MYSQL_*}, {@code ONCEGUARD_REDIS_URI}). Exit codes: 0 success, 1 the story did
 * not go as expected (the message says what), 2 usage.
 */
public final class Demo {
  private Demo() {}

  public static void main(String[] args) {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    try {
      if (args.length == 0) {
        throw new UsageException("missing command: setup or run");
      }
      Map<String, String> opts = options(args);
      Set<String> allowed = switch (args[0]) {
        case "setup" -> Set.of("run-id", "business-port", "config-out", "database", "redis-prefix");
        case "run" -> Set.of("run-id", "business-log", "database", "redis-prefix");
        default -> throw new UsageException("unknown command '" + args[0] + "': setup or run");
      };
      for (String k : opts.keySet()) {
        if (!allowed.contains(k)) {
          throw new UsageException(args[0] + ": unknown option --" + k + " (options: --" + String.join(", --", new TreeSet<>(allowed)) + ")");
        }
      }
      switch (args[0]) {
        case "setup" -> setup(opts, out);
        case "run" -> System.exit(run(opts, out));
        default -> throw new UsageException("unknown command '" + args[0] + "': setup or run");
      }
    } catch (UsageException e) {
      System.err.println("onceguard-demo: " + e.getMessage());
      System.exit(2);
    } catch (DemoFailure e) {
      out.println();
      out.println("DEMO FAILED: " + e.getMessage());
      System.exit(1);
    }
  }

  private static void setup(Map<String, String> opts, PrintStream out) {
    DemoLayout layout = new DemoLayout(required(opts, "run-id"));
    Settings settings = Settings.fromEnv(System.getenv(), opts);
    int port = Integer.parseInt(required(opts, "business-port"));
    Path config = Path.of(required(opts, "config-out"));
    try (Driver driver = new Driver(layout, settings)) {
      driver.createTopics();
      long deleted = driver.deleteRedisKeys();
      Files.writeString(config, layout.sidecarYaml(settings, port));
      out.printf("[demo] topics %s* created (%d source topics, %s, %s); %d stale Redis key(s) under '%s' deleted%n", layout.prefix,
          DemoLayout.SOURCE_TOPICS.size(), layout.verdictTopic(), layout.escalationTopic(), deleted, settings.redisPrefix());
      out.printf("[demo] sidecar configuration: %s%n", config);
    } catch (IOException e) {
      throw new DemoFailure("cannot write " + config + ": " + e.getMessage(), e);
    }
  }

  private static int run(Map<String, String> opts, PrintStream out) {
    DemoLayout layout = new DemoLayout(required(opts, "run-id"));
    Settings settings = Settings.fromEnv(System.getenv(), opts);
    Path businessLog = Path.of(required(opts, "business-log"));
    long t0 = System.nanoTime();
    try (Driver driver = new Driver(layout, settings)) {
      driver.open();
      driver.awaitSidecarConsuming(Duration.ofSeconds(60));
      out.printf("[demo] the sidecar consumes all %d routes; playing the story%n", layout.routes().size());
      Report report = new Report(out, layout, businessLog);
      new Story(driver, report, layout).run();
      List<ConsumerRecord<byte[], byte[]>> escalations = driver.readEscalations();
      report.summary(driver, escalations);
      out.println();
      out.printf("   Look around: what the business received: %s%n", businessLog);
      out.printf("                the ledger and the orders:  mysql -h %s -P %d -u %s %s -e \"SELECT route, business_key, status FROM og_ledger; "
          + "SELECT entity_id, state, version FROM og_entity\"%n", settings.mysqlHost(), settings.mysqlPort(), settings.mysqlUser(),
          settings.database());
      out.println();
      long secs = Duration.ofNanos(System.nanoTime() - t0).toSeconds();
      if (report.problems().isEmpty()) {
        out.printf("DEMO PASSED in %d s: every record ended exactly as the story expects.%n", secs);
        return 0;
      }
      out.printf("DEMO FAILED after %d s: %d thing(s) did not happen as expected:%n", secs, report.problems().size());
      report.problems().forEach(p -> out.println("  - " + p));
      return 1;
    }
  }

  private static final class UsageException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    UsageException(String m) {
      super(m);
    }
  }

  private static Map<String, String> options(String[] args) {
    Map<String, String> m = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) {
        throw new UsageException("expected --name value pairs after the command, got '" + args[i] + "'");
      }
      m.put(args[i].substring(2), args[++i]);
    }
    return m;
  }

  private static String required(Map<String, String> opts, String name) {
    String v = opts.get(name);
    if (v == null || v.isBlank()) {
      throw new UsageException("--" + name + " is required");
    }
    return v;
  }
}
