package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Liveness and readiness of the sidecar, judged from {@link ProbeFacts}, each check with the reason
 * it gives.
 *
 * <p><b>Live</b> while the process runs and no route's poll loop is wedged (its last turn is older
 * than the stall bound, draining aside) or stopped by a failure. Start-up waits count as live: a
 * restart would not make MySQL come up sooner.
 *
 * <p><b>Ready</b> only when: start-up is over, the sidecar is not draining, MySQL answers a ping,
 * Kafka's metadata can be read, and for every route its consumer is in its group and its source,
 * escalation and verdict topics exist. A route is ready when the process-wide checks and its own
 * pass ({@link Report#routeOk}), which the gRPC health service reports per route name.
 *
 * <p>Threading: any thread, concurrently. {@link #readiness()} blocks up to the check timeout
 * (the MySQL ping and the metadata read run in parallel); {@link #liveness()} never blocks.
 */
public final class Probes {
  /** How long a route's poll loop may go without a turn before it counts as wedged. */
  public static final Duration DEFAULT_STALL_BOUND = Duration.ofSeconds(60);
  /** How long readiness waits for MySQL's ping and for Kafka's metadata. */
  public static final Duration DEFAULT_CHECK_TIMEOUT = Duration.ofSeconds(2);

  private final SidecarConfig config;
  private final ProbeFacts facts;
  private final Clock clock;
  private final Duration stallBound;
  private final Duration checkTimeout;

  public Probes(SidecarConfig config, ProbeFacts facts, Clock clock) {
    this(config, facts, clock, DEFAULT_STALL_BOUND, DEFAULT_CHECK_TIMEOUT);
  }

  public Probes(SidecarConfig config, ProbeFacts facts, Clock clock, Duration stallBound, Duration checkTimeout) {
    this.config = config;
    this.facts = facts;
    this.clock = clock;
    this.stallBound = stallBound;
    this.checkTimeout = checkTimeout;
  }

  /** The outcome of one check. */
  public enum Status { OK, FAIL, SKIPPED }

  /** One check: what was checked and what was found (a reason when it failed). */
  public record Check(String name, Status status, String detail) {
    static Check ok(String name, String detail) {
      return new Check(name, Status.OK, detail);
    }

    static Check fail(String name, String detail) {
      return new Check(name, Status.FAIL, detail);
    }
  }

  /**
   * The checks of one probe: process-wide ones, and per route (in configuration order).
   *
   * @param title {@code "live"} or {@code "ready"}, the first word of a passing {@link #text()}
   */
  public record Report(String title, List<Check> process, Map<String, List<Check>> routes) {
    public Report {
      process = List.copyOf(process);
      routes = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(routes));
    }

    /** No check failed. */
    public boolean ok() {
      return failures().isEmpty();
    }

    /** The process-wide checks and the route's own passed. */
    public boolean routeOk(String route) {
      return noFailure(process) && noFailure(routes.getOrDefault(route, List.of()));
    }

    /** The reason of every failed check, routes' prefixed with {@code route NAME: }. */
    public List<String> failures() {
      List<String> out = new ArrayList<>();
      process.stream().filter(c -> c.status() == Status.FAIL).forEach(c -> out.add(c.detail()));
      routes.forEach((route, checks) -> checks.stream().filter(c -> c.status() == Status.FAIL)
          .forEach(c -> out.add("route " + route + ": " + c.detail())));
      return out;
    }

    /**
     * Plain text: a first line that is the title, or {@code not <title>: } and every failed
     * reason; then a line per check ({@code ok}, {@code FAIL} or {@code skip}), routes indented.
     */
    public String text() {
      List<String> failures = failures();
      StringBuilder sb = new StringBuilder(failures.isEmpty() ? title : "not " + title + ": " + String.join("; ", failures)).append('\n');
      process.forEach(c -> line(sb, "", c));
      routes.forEach((route, checks) -> {
        sb.append("route ").append(route).append(":\n");
        checks.forEach(c -> line(sb, "  ", c));
      });
      return sb.toString();
    }

    private static void line(StringBuilder sb, String indent, Check c) {
      String mark = switch (c.status()) {
        case OK -> "ok  ";
        case FAIL -> "FAIL";
        case SKIPPED -> "skip";
      };
      sb.append(indent).append(mark).append("  ").append(c.name()).append(": ").append(c.detail()).append('\n');
    }

    private static boolean noFailure(List<Check> checks) {
      return checks.stream().noneMatch(c -> c.status() == Status.FAIL);
    }
  }

  /** Is the process alive and are its loops turning? Never blocks. */
  public Report liveness() {
    String wait = facts.startupWait();
    boolean draining = facts.draining();
    String phase = draining ? "draining" : wait != null ? "starting: " + wait : "consuming";
    long now = clock.nowMillis();
    Map<String, List<Check>> routes = new LinkedHashMap<>();
    for (RouteConfig rc : config.routes()) {
      ProbeFacts.RouteFacts r = facts.route(rc.name());
      Check loop;
      if (r == null) {
        loop = new Check("poll loop", Status.SKIPPED, "not running");
      } else if (r.failure() != null) {
        loop = Check.fail("poll loop", "consumer stopped after a failure: " + r.failure());
      } else if (draining) {
        // a draining loop stops turning on purpose; the drain has its own deadline
        loop = new Check("poll loop", Status.SKIPPED, "draining");
      } else {
        long idle = now - r.lastTurnAtMillis();
        loop = idle > stallBound.toMillis()
            ? Check.fail("poll loop", "poll loop has not turned for " + seconds(idle) + " (bound " + seconds(stallBound.toMillis()) + "): wedged")
            : Check.ok("poll loop", "last turn " + seconds(Math.max(0, idle)) + " ago");
      }
      routes.put(rc.name(), List.of(loop));
    }
    return new Report("live", List.of(Check.ok("process", phase)), routes);
  }

  /** Can the sidecar do its work now? Blocks up to the check timeout. */
  public Report readiness() {
    boolean draining = facts.draining();
    String wait = facts.startupWait();
    Set<String> topicNames = new LinkedHashSet<>();
    for (RouteConfig rc : config.routes()) {
      topicNames.addAll(topicsOf(rc).keySet());
    }
    // started together, so the probe waits for the slower of the two, not their sum; no MySQL
    // ping while draining: it is not ready anyway, and the store is being closed
    long deadline = System.nanoTime() + checkTimeout.toNanos();
    CompletableFuture<Void> ping = draining ? null : facts.pingMysql().toCompletableFuture();
    CompletableFuture<Map<String, Integer>> topics = facts.topics(topicNames).toCompletableFuture();

    List<Check> process = new ArrayList<>();
    process.add(wait == null ? Check.ok("startup", "done") : Check.fail("startup", "starting: " + wait));
    process.add(draining ? Check.fail("draining", "draining: stopping after a signal") : Check.ok("draining", "no"));
    if (ping == null) {
      process.add(new Check("mysql", Status.SKIPPED, "not pinged while draining"));
    } else {
      String error = await(ping, deadline);
      process.add(error == null ? Check.ok("mysql", "answered a ping") : Check.fail("mysql", "MySQL: " + error));
    }
    String kafkaError = await(topics, deadline);
    Map<String, Integer> existing = kafkaError == null ? topics.join() : Map.of();
    process.add(kafkaError == null
        ? Check.ok("kafka", "metadata read (" + topicNames.size() + " topics)")
        : Check.fail("kafka", "Kafka metadata (" + config.kafka().bootstrapServers() + "): " + kafkaError));

    Map<String, List<Check>> routes = new LinkedHashMap<>();
    for (RouteConfig rc : config.routes()) {
      List<Check> checks = new ArrayList<>();
      checks.add(consumer(rc));
      // a topic deleted while running is not created again: kafka.create-topics acts at start only
      checks.addAll(topicChecks(rc, existing, kafkaError, false));
      routes.put(rc.name(), checks);
    }
    return new Report("ready", process, routes);
  }

  private Check consumer(RouteConfig rc) {
    ProbeFacts.RouteFacts r = facts.route(rc.name());
    if (r == null) {
      return Check.fail("consumer", "consumer not running");
    }
    if (r.failure() != null) {
      return Check.fail("consumer", "consumer stopped after a failure: " + r.failure());
    }
    if (!r.inGroup()) {
      return Check.fail("consumer", "consumer has not joined group '" + rc.intake().group() + "' yet");
    }
    return Check.ok("consumer", "in group '" + rc.intake().group() + "', " + r.assignedPartitions() + " partition(s) assigned");
  }

  /**
   * One check per topic of the route: it exists (with its partition count), or it does not, or it
   * could not be checked.
   *
   * @param existing partition counts of the topics that exist
   * @param kafkaError why the metadata could not be read, or {@code null}
   * @param created missing escalation and verdict topics are created at start ({@code kafka.create-topics}):
   *     not a failure
   */
  static List<Check> topicChecks(RouteConfig rc, Map<String, Integer> existing, String kafkaError, boolean created) {
    List<Check> checks = new ArrayList<>();
    topicsOf(rc).forEach((topic, kind) -> {
      if (kafkaError != null) {
        checks.add(Check.fail("topic", kind + " topic '" + topic + "' not checked: Kafka metadata cannot be read"));
      } else if (existing.containsKey(topic)) {
        checks.add(Check.ok("topic", kind + " topic '" + topic + "' exists, " + existing.get(topic) + " partition(s)"));
      } else if (created && !kind.equals(SOURCE)) {
        checks.add(new Check("topic", Status.SKIPPED, kind + " topic '" + topic + "' does not exist; run creates it (kafka.create-topics)"));
      } else {
        checks.add(Check.fail("topic", kind + " topic '" + topic + "' does not exist ("
            + (kind.equals(SOURCE) ? "the sidecar never creates source topics" : "create it, or set kafka.create-topics: true") + ")"));
      }
    });
    return checks;
  }

  static final String SOURCE = "source";

  /** The route's topics and what each is for ({@link #SOURCE}, {@code escalation}, {@code verdict}), in a stable order. */
  static Map<String, String> topicsOf(RouteConfig rc) {
    Map<String, String> out = new LinkedHashMap<>();
    rc.intake().topics().forEach(t -> out.put(t, SOURCE));
    out.putIfAbsent(rc.outputs().escalationTopic(), "escalation");
    if (rc.outputs().verdictTopic() != null) {
      out.putIfAbsent(rc.outputs().verdictTopic(), "verdict");
    }
    return out;
  }

  /** Waits until {@code deadlineNanos}; {@code null} when {@code f} completed normally, else the reason. */
  private String await(CompletableFuture<?> f, long deadlineNanos) {
    try {
      f.get(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
      return null;
    } catch (TimeoutException e) {
      return "no answer within " + seconds(checkTimeout.toMillis());
    } catch (ExecutionException | CompletionException e) {
      Throwable cause = e.getCause() == null ? e : e.getCause();
      return cause.getMessage() == null ? cause.toString() : cause.getMessage();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "interrupted";
    }
  }

  private static String seconds(long millis) {
    return String.format(java.util.Locale.ROOT, "%.1f s", millis / 1000.0);
  }
}
