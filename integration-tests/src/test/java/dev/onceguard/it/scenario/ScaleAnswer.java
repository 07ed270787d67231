package dev.onceguard.it.scenario;

import dev.onceguard.bench.CpuMeter;
import dev.onceguard.bench.seed.DelayProxy;
import dev.onceguard.it.ClusterScript;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.FactStream.Batch;
import dev.onceguard.it.scenario.ScaleReport.Cell;
import dev.onceguard.v1.Delivery;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Scale in docs/answers.md: throughput, record age and MySQL round trips per record with 1 and 4
 * sidecar processes (the packaged jar, each a JVM of its own, one consumer group) on a Kafka 3.5
 * cluster of three KRaft brokers, with 0, 2 and 10 ms of round-trip time added to MySQL and to
 * Kafka. Not an {@code *IT}: {@code make test} does not run it; {@code make answers} does
 * ({@code -Dit.test=ScaleAnswer}), writing its table to {@code answers.scale-out}.
 *
 * <p>The cluster ({@code ONCEGUARD_CLUSTER_KAFKA=3.5 scripts/cluster.sh up kafka}) is started once.
 * The sidecars reach its brokers only through delaying TCP proxies ({@link DelayProxy}), one per
 * broker on the port its RELAYED listener advertises, so that every connection of theirs (bootstrap,
 * partition leaders, group coordinator) is delayed; MySQL through one more. Redis (L1) and the
 * business stay near, as they would be in the sidecar's own data centre. The test's producer and
 * admin client reach the brokers directly. The proxies are {@link DelayProxy#live live}: a new RTT
 * reaches the connections already open, so the processes stay up across the RTT cells.
 *
 * <p>One topic, database and consumer group: one process starts (meanwhile the fresh brokers get a
 * warm-up of their own on another topic), waits until it owns partitions
 * and gets a warm-up of {@link #WARM_UP_SECONDS} at the pace; then, per RTT, a settling second at
 * the pace and the cell's window: {@link #RATE} records per second for {@link #SECONDS}, each a new
 * fact. Then three more processes join, get a warm-up, and the three RTTs again, in the opposite
 * order (10, 2, 0 ms): whatever drifts over time (brokers and JVMs warming up, the shared machine's
 * load) then runs against the RTT's order in one of the two passes. Measured over
 * each window: delivered records per second (the business's first receipt to its last), each record's age at the business, the processes' {@code onceguard_mysql_round_trips_total}
 * and CPU time. Starting JVMs once, not per cell, keeps the experiment within a few minutes.
 *
 * <p>Fails if the business received any fact other than exactly once (checked after each batch,
 * and over all of them once the processes drained and stopped), or if anything was escalated.
 */
class ScaleAnswer {
  /**
   * The pace, the same in every cell: one process sustains it at 10 ms of RTT (claims ready
   * together share one transaction, and so do confirms, so the RTT costs latency, not a wait per
   * record), and so does the machine. At 500 records/s one process still kept pace at 10 ms, but on two
   * shared cores with three brokers and four sidecar JVMs the records aged by seconds in some
   * cells: the CPU, not the RTT, set the age.
   */
  static final int RATE = Integer.getInteger("scale.rate", 250);
  static final int SECONDS = Integer.getInteger("scale.seconds", 12);
  static final int WARM_UP_SECONDS = Integer.getInteger("scale.warm-up-seconds", 20);
  /** Records at the pace after each RTT change, before the window: no chunk of the last cell's RTT is still queued. */
  static final int SETTLE_SECONDS = 1;
  static final int PARTITIONS = 12;
  static final int[] PROCESSES = {1, 4};
  static final int[] RTTS_MS = {0, 2, 10};
  /** One more cell: one process at 0 ms on the stack's Kafka 4.4 broker, for contrast. */
  static final boolean CONTRAST = Boolean.parseBoolean(System.getProperty("scale.contrast", "true"));
  static final long SEED = 20261203L;
  static final Duration START = Duration.ofSeconds(120);
  static final Duration CATCH_UP = Duration.ofSeconds(90);

  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  @Test
  void oneAndFourProcesses_onKafka35_atThreeRtts_deliverEveryFactOnce() throws Exception {
    String loadAtStart = AnswerFiles.loadAverage();
    long t0 = System.nanoTime();
    FactStream stream = new FactStream(SEED, Instant.now());
    List<Cell> cells = new ArrayList<>();
    String broker35;
    long clusterSeconds;
    try (ClusterScript cluster = ClusterScript.up(Map.of("ONCEGUARD_CLUSTER_KAFKA", "3.5"), "kafka");
        Delays delays = new Delays()) {
      clusterSeconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
      broker35 = "3 × Kafka " + Kafka35IT.brokerVersion(cluster.dir()) + " (KRaft)";
      List<String> relayed = cluster.list("ONCEGUARD_CLUSTER_KAFKA_RELAYED");
      List<String> relays = cluster.list("ONCEGUARD_CLUSTER_KAFKA_RELAY_BOOTSTRAP");
      for (int i = 0; i < relayed.size(); i++) {
        delays.add(new DelayProxy("127.0.0.1", port(relayed.get(i)), port(relays.get(i))).live());
      }
      DelayProxy mysql = delays.add(new DelayProxy(ItEnv.mysqlHost(), ItEnv.mysqlPort()).live());
      log("cluster up in %d s: %s; relays %s", clusterSeconds, broker35, relays);
      try (Run run = new Run("scale", broker35, new KafkaSupport(cluster.env("ONCEGUARD_CLUSTER_KAFKA_BOOTSTRAP"), (short) 3),
          cluster.env("ONCEGUARD_CLUSTER_KAFKA_RELAY_BOOTSTRAP"), mysql.port(), stream)) {
        // the fresh brokers' own warm-up, on a topic no sidecar reads, while the first process starts
        try (PacedProducer brokers = new PacedProducer(run.env.kafka.bootstrap(), run.env.kafka.createTopic("scale-brokers", PARTITIONS),
            stream.fresh("scale-brokers", RATE * 2 * WARM_UP_SECONDS, Duration.ZERO).records(), RATE)) {
          run.scaleTo(PROCESSES[0]);
          brokers.finish(CATCH_UP);
        }
        for (int i = 0; i < PROCESSES.length; i++) {
          run.scaleTo(PROCESSES[i]);
          for (int j = 0; j < RTTS_MS.length; j++) {
            // every other pass backwards: a drift over time shows as a reversed trend, an effect of the RTT does not
            int rtt = RTTS_MS[i % 2 == 0 ? j : RTTS_MS.length - 1 - j];
            delays.setRtt(rtt);
            cells.add(run.window(rtt));
          }
        }
        run.finish();
      }
      if (CONTRAST) {
        delays.setRtt(0);
        KafkaSupport stack = new KafkaSupport();
        try (Run run = new Run("scale-stack", "1 × Kafka " + stackBrokerVersion() + " (the stack's)", stack, stack.bootstrap(),
            mysql.port(), stream)) {
          run.scaleTo(1);
          cells.add(run.window(0));
          run.finish();
        }
      }
    }
    long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
    List<Cell> table = new ArrayList<>(cells);
    // the 3.5 cells by processes and RTT, the contrast last
    table.sort(Comparator.comparing((Cell c) -> !c.broker().equals(broker35)).thenComparingInt(Cell::processes)
        .thenComparingInt(Cell::rttMs));
    String md = ScaleReport.markdown(table) + "\n" + ScaleReport.summary(cells, broker35) + "\n\n"
        + setup(broker35, clusterSeconds, seconds, loadAtStart, AnswerFiles.loadAverage()) + "\n";
    System.out.println("[scale]\n" + md);
    AnswerFiles.write("answers.scale-out", md);
  }

  /**
   * The sidecar processes of one consumer group on one topic, reaching Kafka at
   * {@code sidecarBootstrap} and MySQL at the proxy's port; their business; every fact sent to
   * them. {@link #close()} kills what still runs and drops the database.
   */
  private final class Run implements AutoCloseable {
    private final String name;
    private final String broker;
    private final UpstreamEnv env;
    private final RecordingBusiness business = RecordingBusiness.start();
    private final FactStream stream;
    private final List<SidecarProcess> sidecars = new ArrayList<>();
    private final List<String> admins = new ArrayList<>();
    private final List<String> facts = new ArrayList<>();

    Run(String name, String broker, KafkaSupport kafka, String sidecarBootstrap, int mysqlPort, FactStream stream) {
      this.name = name;
      this.broker = broker;
      this.stream = stream;
      this.env = new UpstreamEnv(name, PARTITIONS, kafka).reachedThrough(sidecarBootstrap, "127.0.0.1", mysqlPort);
    }

    /** Starts processes until there are {@code n}, waits until each owns partitions, then sends the warm-up; nothing if there are. */
    void scaleTo(int n) throws Exception {
      if (sidecars.size() >= n) {
        return;
      }
      long t = System.nanoTime();
      List<SidecarProcess> started = new ArrayList<>();
      while (sidecars.size() < n) {
        String id = name + "-" + sidecars.size();
        int grpc = RecordingBusiness.freePort();
        String admin = "127.0.0.1:" + RecordingBusiness.freePort();
        admins.add(admin);
        SidecarProcess p = SidecarProcess.start(id, env.yaml(env.guardedGroup, id, grpc, business.target(), ", admin-listen: " + admin), grpc);
        sidecars.add(p);
        started.add(p);
      }
      for (SidecarProcess p : started) {
        p.awaitServing(START);
      }
      env.awaitMembers(env.guardedGroup, n, START);
      send(stream.fresh(name + "-" + n + "p-warm", RATE * WARM_UP_SECONDS, Duration.ZERO), name + " warm-up");
      log("%s: %d process(es) serving and warm, %.0f s", name, n, (System.nanoTime() - t) / 1e9);
    }

    /** A cell at the RTT just set: a settling second at the pace, then the measured window. */
    Cell window(int rttMs) throws Exception {
      String cell = name + "-" + sidecars.size() + "p-" + rttMs + "ms";
      long t = System.nanoTime();
      send(stream.fresh(cell + "-settle", RATE * SETTLE_SECONDS, Duration.ZERO), cell + " settling");
      long roundTrips0 = roundTrips(admins);
      double cpu0 = cpuMs(sidecars);
      Batch measured = stream.fresh(cell, RATE * SECONDS, Duration.ZERO);
      Map<String, Long> ackedAt = send(measured, cell);
      long roundTrips = roundTrips(admins) - roundTrips0;
      double cpu = cpuMs(sidecars) - cpu0;

      Set<String> window = new HashSet<>(measured.facts());
      // receipts are System.nanoTime() of this JVM; create timestamps its wall clock, as the producer set them
      long wallMs = System.currentTimeMillis();
      long nanos = System.nanoTime();
      List<Long> ages = new ArrayList<>();
      List<Long> ackedAges = new ArrayList<>();
      long firstReceived = Long.MAX_VALUE;
      long lastReceived = Long.MIN_VALUE;
      for (RecordingBusiness.Call call : business.calls()) {
        Delivery d = call.delivery();
        String fact = OneRouteEnv.field(d.getRecord().getValue().toByteArray(), FactStream.FACT_FIELD);
        if (window.contains(fact)) {
          long created = d.getRecord().getTimestampMs();
          long receivedMs = wallMs - (nanos - call.receivedAtNanos()) / 1_000_000;
          ages.add(receivedMs - created);
          ackedAges.add(wallMs - (nanos - ackedAt.get(fact)) / 1_000_000 - created);
          firstReceived = Math.min(firstReceived, receivedMs);
          lastReceived = Math.max(lastReceived, receivedMs);
        }
      }
      Cell c = new Cell(broker, sidecars.size(), rttMs, RATE, measured.records().size(), (lastReceived - firstReceived) / 1000.0, ages,
          ackedAges, roundTrips, cpu);
      log("%s: %.0f rec/s, age p50 %d p99 %d ms, %.2f round trips and %.2f CPU ms per record; cell took %.0f s", cell,
          c.perSecond(), c.p50(), c.p99(), c.roundTripsPerRecord(), cpu / c.records(), (System.nanoTime() - t) / 1e9);
      return c;
    }

    /**
     * Produces {@code batch} at the pace, waits until the business received each of its facts and the
     * group committed it; fails unless each arrived exactly once. Returns when the brokers
     * acknowledged each fact ({@link System#nanoTime()}).
     */
    private Map<String, Long> send(Batch batch, String what) throws InterruptedException {
      Map<String, Long> acked = produce(env, batch);
      facts.addAll(batch.facts());
      awaitReceived(business, batch.facts());
      env.awaitCommitted(env.guardedGroup, CATCH_UP);
      Set<String> mine = new HashSet<>(batch.facts());
      Map<String, Long> received = new HashMap<>(received(business));
      received.keySet().retainAll(mine);
      ScaleReport.requireExactlyOnce(what, batch.facts(), received);
      return acked;
    }

    /** Stops every process (SIGTERM, drained); fails unless every fact sent reached the business exactly once and none was escalated. */
    void finish() throws InterruptedException {
      sidecars.forEach(SidecarProcess::signalStop);
      for (SidecarProcess p : sidecars) {
        p.awaitExit(Duration.ofSeconds(40));
      }
      ScaleReport.requireExactlyOnce(name, facts, received(business));
      if (env.escalated() != 0) {
        throw new IllegalStateException(name + ": " + env.escalated() + " records escalated");
      }
    }

    @Override
    public void close() {
      try {
        sidecars.forEach(SidecarProcess::close);
        business.close();
      } finally {
        env.close();
      }
    }
  }

  /** Sends {@code batch} at the pace, directly to the brokers; returns when the brokers acknowledged each fact ({@link System#nanoTime()}). */
  private static Map<String, Long> produce(UpstreamEnv env, Batch batch) throws InterruptedException {
    try (PacedProducer producer = new PacedProducer(env.kafka.bootstrap(), env.topic, batch.records(), RATE)) {
      producer.finish(CATCH_UP);
      Map<String, Long> acked = new HashMap<>();
      for (int i = 0; i < batch.records().size(); i++) {
        acked.put(batch.records().get(i).fact(), producer.ackedAtNanos(i));
      }
      return acked;
    }
  }

  /** Until the business received every one of {@code facts}; returns at the timeout too (the exactly-once check names what is lost). */
  private static void awaitReceived(RecordingBusiness business, List<String> facts) throws InterruptedException {
    long deadline = System.nanoTime() + CATCH_UP.toNanos();
    while (System.nanoTime() < deadline && !received(business).keySet().containsAll(facts)) {
      TimeUnit.MILLISECONDS.sleep(100);
    }
  }

  /** Calls per fact the business received. */
  private static Map<String, Long> received(RecordingBusiness business) {
    Map<String, Long> out = new HashMap<>();
    for (RecordingBusiness.Call call : business.calls()) {
      out.merge(OneRouteEnv.field(call.delivery().getRecord().getValue().toByteArray(), FactStream.FACT_FIELD), 1L, Long::sum);
    }
    return out;
  }

  /** The sum of {@code onceguard_mysql_round_trips_total} over the processes' admin {@code /metrics}. */
  private long roundTrips(List<String> admins) throws IOException, InterruptedException {
    long sum = 0;
    for (String admin : admins) {
      HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://" + admin + "/metrics"))
          .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString());
      long n = AnswerFiles.sum(r.body(), "onceguard_mysql_round_trips_total");
      sum += n;
      if (n < 0) {
        throw new IllegalStateException("no onceguard_mysql_round_trips_total in " + admin + "/metrics (status " + r.statusCode() + ")");
      }
    }
    return sum;
  }

  /** CPU time the processes used so far; -1 if one of them cannot be read. */
  private static double cpuMs(List<SidecarProcess> sidecars) {
    double sum = 0;
    for (SidecarProcess p : sidecars) {
      double ms = CpuMeter.cpuMsOf(p.pid());
      if (ms < 0) {
        return -1;
      }
      sum += ms;
    }
    return sum;
  }

  private static int port(String hostPort) {
    return Integer.parseInt(hostPort.substring(hostPort.lastIndexOf(':') + 1));
  }

  /** The stack's broker release, from its kafka-clients jar name in KAFKA_LIB (e.g. 4.4.0). */
  private static String stackBrokerVersion() {
    String lib = System.getenv("KAFKA_LIB");
    if (lib != null) {
      try (var files = Files.list(Path.of(lib))) {
        return files.map(f -> f.getFileName().toString()).filter(f -> f.matches("kafka-clients-[0-9.]+\\.jar"))
            .map(f -> f.replaceAll("kafka-clients-([0-9.]+)\\.jar", "$1")).findFirst().orElse("4.4");
      } catch (IOException e) {
        return "4.4";
      }
    }
    return "4.4";
  }

  private static String setup(String broker, long clusterSeconds, long seconds, String loadAtStart, String loadAtEnd) {
    return String.format(Locale.ROOT, "Each cell: %,d records at %,d records/s, each a new fact, into a topic of %d partitions, after"
        + " a second at the pace at the cell's RTT. One consumer group of sidecar processes (`java -Xmx384m -jar onceguard.jar run`,"
        + " each a JVM of its own; L1 + ledger + state machine, MySQL pool 8, commit every 200 ms): one process, warmed up with %,d"
        + " records, through 0, 2 and 10 ms; then three more join, a warm-up again, and 10, 2 and 0 ms (the opposite order, so that"
        + " a drift over time and the RTT's effect can be told apart). The fresh brokers get a warm-up of their own on another topic"
        + " while the first process starts. The business (gRPC, in the"
        + " test JVM) answers OK at once. Brokers:"
        + " %s, replication factor 3, `min.insync.replicas` 2, the producer `acks=all`. Added RTT: user-space delaying TCP proxies"
        + " (half the RTT each way, changed between cells on the open connections) in front of every broker's relayed listener and"
        + " of MariaDB; 0 ms still goes through them. Redis"
        + " (L1) and the business are not delayed; the test's producer reaches the brokers directly. Record age: the business's"
        + " receipt minus the record's Kafka create timestamp (set when the producer is handed the record); until the brokers"
        + " acked: from the same timestamp to the producer's acknowledgement, the part of the age before any sidecar could read it."
        + " Delivered rec/s: the window's records over the time from the business's first receipt of them to its last. MySQL round"
        + " trips: statements (BEGIN and COMMIT included) the processes sent in the window, from their"
        + " `onceguard_mysql_round_trips_total`. CPU: the processes' utime + stime in the window. Every fact of every cell reached the"
        + " business exactly once, none escalated. The experiment took %d s (the cluster's start %d s); load average %s at its"
        + " start, %s at its end.",
        RATE * SECONDS, RATE, PARTITIONS, RATE * WARM_UP_SECONDS, broker, seconds, clusterSeconds, loadAtStart, loadAtEnd);
  }

  /** The delaying proxies of the experiment, all at one RTT. */
  private static final class Delays implements AutoCloseable {
    private final List<DelayProxy> proxies = new ArrayList<>();

    DelayProxy add(DelayProxy p) {
      proxies.add(p);
      return p;
    }

    /** On every connection, open ones too (the proxies are live). */
    void setRtt(int ms) {
      proxies.forEach(p -> p.setRtt(ms));
    }

    @Override
    public void close() throws IOException {
      for (DelayProxy p : proxies) {
        p.close();
      }
    }
  }

  private static final long T0 = System.nanoTime();

  private static void log(String format, Object... args) {
    System.out.printf(Locale.ROOT, "[scale %5.1fs] %s%n", (System.nanoTime() - T0) / 1e9, String.format(Locale.ROOT, format, args));
  }
}
