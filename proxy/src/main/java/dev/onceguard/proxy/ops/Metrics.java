package dev.onceguard.proxy.ops;

import com.sun.net.httpserver.HttpServer;
import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.v1.Verdict;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.prometheus.metrics.core.metrics.Info;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * The sidecar's metrics: every final verdict counted as
 * {@code onceguard_verdicts_total{route,disposition,layer,reason}}, the record's age at its
 * verdict as the histogram {@code onceguard_record_age_seconds{route,disposition}} (the fixed
 * buckets {@link #RECORD_AGE_BUCKETS}), how long each step of a guarded record took as the
 * histogram {@code onceguard_step_seconds{route,step}} ({@link #STEP_BUCKETS}), cumulative counts
 * registered with {@link #counter} (Prometheus names end in {@code _total}), current values with
 * {@link #gauge} and, per
 * partition, {@link #partitionGauge}, {@code onceguard_build_info{version,commit}} ({@link #buildInfo}),
 * and the JVM's memory and threads. {@link #snapshot()} renders the verdict counts for the
 * periodic log line; {@link #serve} exposes everything as Prometheus text on {@code GET /metrics}
 * through the JDK's HTTP server. Thread-safe; owns the server it starts.
 *
 * <p>Cost: a scrape renders every series; the number of series is bounded by the routes, their
 * partitions and the verdict reasons, not by traffic.
 */
public final class Metrics implements VerdictListener, AutoCloseable {
  /**
   * The upper bounds of the record-age histogram: from a cache hit (milliseconds) to a record
   * that waited for an early arrival, a business retry series or an outage (minutes to an hour).
   * Fixed, so that each (route, disposition) costs 16 series (13 buckets, count, sum, max) and the
   * buckets of every pod aggregate.
   */
  public static final List<Duration> RECORD_AGE_BUCKETS = List.of(Duration.ofMillis(5), Duration.ofMillis(10),
      Duration.ofMillis(25), Duration.ofMillis(50), Duration.ofMillis(100), Duration.ofMillis(250), Duration.ofMillis(500),
      Duration.ofSeconds(1), Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofMinutes(5), Duration.ofHours(1));

  /**
   * The upper bounds of the duplicate-age histogram (time from the original's confirmation to a
   * duplicate of it): from a retry seconds later to a compensation weeks later, so that the share a
   * given L1 TTL would answer can be read off the buckets (7 d, 14 d and 30 d are TTLs people pick).
   */
  public static final List<Duration> DUPLICATE_AGE_BUCKETS = List.of(Duration.ofSeconds(1), Duration.ofSeconds(10),
      Duration.ofMinutes(1), Duration.ofMinutes(10), Duration.ofHours(1), Duration.ofHours(6), Duration.ofDays(1), Duration.ofDays(3),
      Duration.ofDays(7), Duration.ofDays(14), Duration.ofDays(30), Duration.ofDays(90));

  /**
   * The upper bounds of the step histogram: from a store step on an idle store to an outage or a
   * timeout (a business call takes what the business makes it). Fixed, like
   * {@link #RECORD_AGE_BUCKETS}: 14 series per route and step.
   */
  public static final List<Duration> STEP_BUCKETS = List.of(Duration.ofMillis(1), Duration.ofMillis(2), Duration.ofMillis(5),
      Duration.ofMillis(10), Duration.ofMillis(25), Duration.ofMillis(50), Duration.ofMillis(100), Duration.ofMillis(250),
      Duration.ofSeconds(1), Duration.ofSeconds(5));

  private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  /** {@code "route DISPOSITION/LAYER/REASON"} -> its counter. */
  private final Map<String, Counter> verdicts = new ConcurrentHashMap<>();
  /** Replayed ACCEPTED verdicts by route (the record applied its key earlier and was consumed again). */
  private final Map<String, Counter> replayed = new ConcurrentHashMap<>();
  /** {@code "route DISPOSITION"} -> record age at its verdict. */
  private final Map<String, Timer> ages = new ConcurrentHashMap<>();
  /** {@code "route LAYER/REASON"} -> duplicates' time since their original was confirmed (or claimed). */
  private final Map<String, Timer> duplicateAges = new ConcurrentHashMap<>();
  /** route -> its steps' durations, by {@link Step#ordinal()} (no key built per record). */
  private final Map<String, Timer[]> steps = new ConcurrentHashMap<>();
  /** Re-read the partition gauges' rows; run before each scrape, since partitions come and go. */
  private final List<Runnable> partitionRows = new CopyOnWriteArrayList<>();
  /** What the counters read: a FunctionCounter holds its object weakly, and nothing else holds these. */
  private final List<Supplier<Number>> counterSources = new CopyOnWriteArrayList<>();
  private HttpServer server;

  public Metrics() {
    new JvmMemoryMetrics().bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
  }

  /** Serves {@code GET /metrics} on {@code host:port} (port 0 picks a free one); returns the port. */
  public synchronized int serve(String hostPort) throws IOException {
    int colon = hostPort.lastIndexOf(':');
    server = HttpServer.create(new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1))), 0);
    server.createContext("/metrics", ex -> {
      byte[] body = scrape().getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      ex.sendResponseHeaders(200, body.length);
      try (OutputStream out = ex.getResponseBody()) {
        out.write(body);
      }
    });
    server.start();
    return server.getAddress().getPort();
  }

  /**
   * Registers a cumulative count read at scrape time (it must never decrease), e.g. MySQL round
   * trips; exposed as a Prometheus counter, {@code name} with dots as underscores plus
   * {@code _total}.
   *
   * @param tags label names and values, alternating, e.g. {@code "route", "orders"}
   */
  public void counter(String name, String description, Supplier<Number> value, String... tags) {
    counterSources.add(value);
    FunctionCounter.builder(name, value, v -> v.get().doubleValue()).description(description).tags(tags).register(registry);
  }

  /** Registers a current value read at scrape time, e.g. whether L1 is available. */
  public void gauge(String name, String description, Supplier<Number> value) {
    Gauge.builder(name, value).description(description).register(registry);
  }

  /** Registers a gauge of one route, tagged {@code route}. */
  public void gauge(String name, String description, String route, Supplier<Number> value) {
    Gauge.builder(name, value).description(description).tag("route", route).register(registry);
  }

  /**
   * Registers a gauge of one route with a row per partition, tagged {@code route}, {@code topic} and
   * {@code partition}. {@code values} is read at each scrape and gives the partitions the route has
   * now; rows of partitions no longer given disappear.
   *
   * @param baseUnit e.g. {@code "seconds"} (appended to the Prometheus name), or {@code null}
   */
  public void partitionGauge(String name, String description, String baseUnit, String route,
      Supplier<Map<TopicPartition, ? extends Number>> values) {
    MultiGauge g = MultiGauge.builder(name).description(description).baseUnit(baseUnit).tag("route", route).register(registry);
    partitionRows.add(() -> g.register(values.get().entrySet().stream()
        .map(e -> MultiGauge.Row.of(Tags.of("topic", e.getKey().topic(), "partition", Integer.toString(e.getKey().partition())), e.getValue()))
        .toList(), true));
  }

  /**
   * Registers {@code onceguard_build_info{version,commit} 1}: joined onto other series, it shows
   * which build each pod runs.
   */
  public void buildInfo(String version, String commit) {
    // an Info metric (exposed with the suffix "_info"): Micrometer would strip that reserved
    // suffix from a gauge's name
    Info info = Info.builder().name("onceguard_build").help("the running build: version and git commit")
        .labelNames("version", "commit").register(registry.getPrometheusRegistry());
    info.setLabelValues(version, commit);
  }

  @Override
  public void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict v, boolean forwarded) {
    String k = v.getRoute() + " " + v.getDisposition().name() + "/" + v.getLayer().name() + "/" + v.getReason().name();
    verdicts.computeIfAbsent(k, x -> Counter.builder("onceguard.verdicts")
            .description("final verdicts on consumed records")
            .tag("route", v.getRoute())
            .tag("disposition", v.getDisposition().name())
            .tag("layer", v.getLayer().name())
            .tag("reason", v.getReason().name())
            .register(registry))
        .increment();
    if (v.getReplayed()) {
      replayed.computeIfAbsent(v.getRoute(), x -> Counter.builder("onceguard.verdicts.replayed")
              .description("ACCEPTED verdicts said again for a record that applied its key and was consumed again after a crash"
                  + " or rebalance (the business was not called again); also counted in onceguard_verdicts_total")
              .tag("route", v.getRoute())
              .register(registry))
          .increment();
    }
    if (record != null && record.timestamp() > 0) {
      long age = System.currentTimeMillis() - record.timestamp();
      ages.computeIfAbsent(v.getRoute() + " " + v.getDisposition().name(), x -> Timer.builder("onceguard.record.age")
              .description("from the record's Kafka timestamp to its final verdict: consumer lag plus processing")
              .tag("route", v.getRoute())
              .tag("disposition", v.getDisposition().name())
              .serviceLevelObjectives(RECORD_AGE_BUCKETS.toArray(Duration[]::new))
              .register(registry))
          .record(Math.max(0, age), TimeUnit.MILLISECONDS);
    }
    if (v.hasOriginalAgeMs()) {
      duplicateAges.computeIfAbsent(v.getRoute() + " " + v.getLayer().name() + "/" + v.getReason().name(),
              x -> Timer.builder("onceguard.duplicate.age")
              .description("for each duplicate, the time since its original was confirmed (claimed, for IN_FLIGHT), by layer and"
                  + " reason: the share of LEDGER_HIT under a TTL is what an L1 of that TTL would have answered (onceguard ttl-advice)")
              .tag("route", v.getRoute())
              .tag("layer", v.getLayer().name())
              .tag("reason", v.getReason().name())
              .serviceLevelObjectives(DUPLICATE_AGE_BUCKETS.toArray(Duration[]::new))
              .register(registry))
          .record(v.getOriginalAgeMs(), TimeUnit.MILLISECONDS);
    }
  }

  /**
   * {@code onceguard_step_seconds{route,step}}: how long a guarded record's claim, business call
   * and confirm took (see {@link VerdictListener.Step}), so that a record age that grows can be
   * told apart: the store (claim, confirm), the business (handle), or neither (then the record
   * waited before it was consumed, or between steps).
   */
  @Override
  public void onStep(String route, Step step, long nanos) {
    steps.computeIfAbsent(route, r -> {
      Timer[] t = new Timer[Step.values().length];
      for (Step s : Step.values()) {
        t[s.ordinal()] = Timer.builder("onceguard.step")
            .description("one step of a guarded record: claim (L1 and the store, its group wait included), handle (one"
                + " business call), confirm (the store, its group wait included)")
            .tag("route", r)
            .tag("step", s.name().toLowerCase(java.util.Locale.ROOT))
            .serviceLevelObjectives(STEP_BUCKETS.toArray(Duration[]::new))
            .register(registry);
      }
      return t;
    })[step.ordinal()].record(nanos, TimeUnit.NANOSECONDS);
  }

  /** {@code route DISPOSITION/LAYER/REASON=count}, sorted; empty if nothing was decided yet. */
  public String snapshot() {
    Map<String, Long> sorted = new TreeMap<>();
    verdicts.forEach((k, c) -> sorted.put(k, (long) c.count()));
    StringBuilder sb = new StringBuilder();
    sorted.forEach((k, n) -> sb.append(sb.length() == 0 ? "" : ", ").append(k).append('=').append(n));
    return sb.toString();
  }

  /** The Prometheus text, as served. */
  public synchronized String scrape() {
    partitionRows.forEach(Runnable::run);
    return registry.scrape();
  }

  @Override
  public synchronized void close() {
    if (server != null) {
      server.stop(0);
    }
    registry.close();
  }
}
