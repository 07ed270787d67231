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
 * admin client reach the brokers directly. A proxy's delay applies to the connections it accepts
 * after it was set, so each cell sets it before its processes start.
 *
 * <p>Each cell gets a topic, database and consumer group of its own, starts its processes, waits
 * until all of them own partitions, sends a warm-up of {@link #WARM_UP_SECONDS} at the pace, then
 * {@link #RATE} records per second for {@link #SECONDS}, each a new fact. Measured over that
 * window: delivered records per second (first create timestamp to the business's last receipt),
 * each record's age at the business, the processes' {@code onceguard_mysql_round_trips_total} and
 * CPU time. The processes are stopped (SIGTERM) before the next cell.
 *
 * <p>Fails if the business received any fact of any cell other than exactly once, or if anything
 * was escalated.
 */
class ScaleAnswer {
  /**
   * The pace, the same in every cell: one process with 10 ms of RTT sustains it (its claim and
   * confirm go to MySQL a poll batch at a time, so the RTT costs latency, not a per-record wait),
   * while the machine, shared by three brokers, four sidecar JVMs and the test, keeps headroom.
   */
  static final int RATE = Integer.getInteger("scale.rate", 250);
  static final int SECONDS = Integer.getInteger("scale.seconds", 12);
  static final int WARM_UP_SECONDS = 3;
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
    String loadAtStart = UpstreamOnly.loadAverage();
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
        delays.add(new DelayProxy("127.0.0.1", port(relayed.get(i)), port(relays.get(i))));
      }
      DelayProxy mysql = delays.add(new DelayProxy(ItEnv.mysqlHost(), ItEnv.mysqlPort()));
      log("cluster up in %d s: %s; relays %s", clusterSeconds, broker35, relays);
      for (int n : PROCESSES) {
        for (int rtt : RTTS_MS) {
          delays.setRtt(rtt);
          cells.add(cell(broker35, n, rtt, new KafkaSupport(cluster.env("ONCEGUARD_CLUSTER_KAFKA_BOOTSTRAP"), (short) 3),
              cluster.env("ONCEGUARD_CLUSTER_KAFKA_RELAY_BOOTSTRAP"), mysql.port(), stream));
        }
      }
      if (CONTRAST) {
        delays.setRtt(0);
        KafkaSupport stack = new KafkaSupport();
        cells.add(cell("1 × Kafka " + stackBrokerVersion() + " (the stack's)", 1, 0, stack, stack.bootstrap(), mysql.port(), stream));
      }
    }
    long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
    String md = ScaleReport.markdown(cells) + "\n" + ScaleReport.summary(cells, broker35) + "\n\n"
        + setup(broker35, clusterSeconds, seconds, loadAtStart, UpstreamOnly.loadAverage());
    System.out.println("[scale]\n" + md);
    String out = System.getProperty("answers.scale-out");
    if (out != null) {
      Path p = Path.of(out).toAbsolutePath();
      Files.createDirectories(p.getParent());
      Files.writeString(p, md);
    }
  }

  /** One cell: {@code processes} sidecars reaching Kafka at {@code sidecarBootstrap} and MySQL at the proxy's port. */
  private Cell cell(String broker, int processes, int rttMs, KafkaSupport kafka, String sidecarBootstrap, int mysqlPort,
      FactStream stream) throws Exception {
    String name = "scale-" + processes + "p-" + rttMs + "ms" + (broker.contains("stack") ? "-stack" : "");
    long t = System.nanoTime();
    List<SidecarProcess> sidecars = new ArrayList<>();
    List<String> admins = new ArrayList<>();
    try (UpstreamEnv env = new UpstreamEnv(name, PARTITIONS, kafka).reachedThrough(sidecarBootstrap, "127.0.0.1", mysqlPort);
        RecordingBusiness business = RecordingBusiness.start()) {
      String group = env.guardedGroup;
      try {
        for (int i = 0; i < processes; i++) {
          int grpc = RecordingBusiness.freePort();
          String admin = "127.0.0.1:" + RecordingBusiness.freePort();
          admins.add(admin);
          sidecars.add(SidecarProcess.start(name + "-" + i, env.yaml(group, name + "-" + i, grpc, business.target(),
              ", admin-listen: " + admin), grpc));
        }
        for (SidecarProcess p : sidecars) {
          p.awaitServing(START);
        }
        env.awaitMembers(group, processes, START);
        Batch warmUp = stream.fresh(name + "-warm", RATE * WARM_UP_SECONDS, Duration.ZERO);
        produce(env, warmUp);
        awaitReceived(business, warmUp.facts());
        env.awaitCommitted(group, CATCH_UP);

        long roundTrips0 = roundTrips(admins);
        double cpu0 = cpuMs(sidecars);
        Batch measured = stream.fresh(name, RATE * SECONDS, Duration.ZERO);
        Map<String, Long> ackedAt = produce(env, measured);
        awaitReceived(business, measured.facts());
        env.awaitCommitted(group, CATCH_UP);
        long roundTrips = roundTrips(admins) - roundTrips0;
        double cpu = cpuMs(sidecars) - cpu0;

        for (SidecarProcess p : sidecars) {
          p.signalStop();
        }
        for (SidecarProcess p : sidecars) {
          p.awaitExit(Duration.ofSeconds(40));
        }
        List<String> facts = new ArrayList<>(warmUp.facts());
        facts.addAll(measured.facts());
        ScaleReport.requireExactlyOnce(name, facts, received(business));
        if (env.escalated() != 0) {
          throw new IllegalStateException(name + ": " + env.escalated() + " records escalated");
        }

        Set<String> window = new HashSet<>(measured.facts());
        // receipts are System.nanoTime() of this JVM; create timestamps its wall clock, as the producer set them
        long wallMs = System.currentTimeMillis();
        long nanos = System.nanoTime();
        List<Long> ages = new ArrayList<>();
        List<Long> ackedAges = new ArrayList<>();
        long firstCreated = Long.MAX_VALUE;
        long lastReceived = Long.MIN_VALUE;
        for (RecordingBusiness.Call call : business.calls()) {
          Delivery d = call.delivery();
          String fact = OneRouteEnv.field(d.getRecord().getValue().toByteArray(), FactStream.FACT_FIELD);
          if (window.contains(fact)) {
            long receivedMs = wallMs - (nanos - call.receivedAtNanos()) / 1_000_000;
            ages.add(receivedMs - d.getRecord().getTimestampMs());
            ackedAges.add(wallMs - (nanos - ackedAt.get(fact)) / 1_000_000 - d.getRecord().getTimestampMs());
            firstCreated = Math.min(firstCreated, d.getRecord().getTimestampMs());
            lastReceived = Math.max(lastReceived, receivedMs);
          }
        }
        Cell c = new Cell(broker, processes, rttMs, RATE, measured.records().size(), (lastReceived - firstCreated) / 1000.0, ages,
            ackedAges, roundTrips, cpu);
        log("%s: %.0f rec/s, age p50 %d p99 %d ms, %.2f round trips and %.2f CPU ms per record; cell took %.0f s", name,
            c.perSecond(), c.p50(), c.p99(), c.roundTripsPerRecord(), cpu / c.records(), (System.nanoTime() - t) / 1e9);
        return c;
      } finally {
        sidecars.forEach(SidecarProcess::close);
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
      boolean found = false;
      for (String line : r.body().split("\n")) {
        if (line.startsWith("onceguard_mysql_round_trips_total")) {
          sum += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
          found = true;
        }
      }
      if (!found) {
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
    return String.format(Locale.ROOT, "Each cell: %,d records at %,d records/s (after a warm-up of %,d), each a new fact, into a topic of"
        + " %d partitions; one consumer group of sidecar processes (`java -Xmx384m -jar onceguard.jar run`, each a JVM of its own; L1 +"
        + " ledger + state machine, MySQL pool 8, commit every 200 ms); the business (gRPC, in the test JVM) answers OK at once. Brokers:"
        + " %s, replication factor 3, `min.insync.replicas` 2, the producer `acks=all`. Added RTT: user-space delaying TCP proxies"
        + " (half the RTT each way) in front of every broker's relayed listener and of MariaDB; 0 ms still goes through them. Redis"
        + " (L1) and the business are not delayed; the test's producer reaches the brokers directly. Record age: the business's"
        + " receipt minus the record's Kafka create timestamp (set when the producer is handed the record); until the brokers"
        + " acked: from the same timestamp to the producer's acknowledgement, the part of the age before any sidecar could read it."
        + " Delivered rec/s: the window's records over the time from its first create timestamp to its last receipt. MySQL round"
        + " trips: statements (BEGIN and COMMIT included) the processes sent in the window, from their"
        + " `onceguard_mysql_round_trips_total`. CPU: the processes' utime + stime in the window. Every fact of every cell reached the"
        + " business exactly once, none escalated. The experiment took %d s (the cluster's start %d s); load average %s at its"
        + " start, %s at its end.",
        RATE * SECONDS, RATE, RATE * WARM_UP_SECONDS, PARTITIONS, broker, seconds, clusterSeconds, loadAtStart, loadAtEnd);
  }

  /** The delaying proxies of the experiment, all at one RTT. */
  private static final class Delays implements AutoCloseable {
    private final List<DelayProxy> proxies = new ArrayList<>();

    DelayProxy add(DelayProxy p) {
      proxies.add(p);
      return p;
    }

    /** For the connections accepted from now on. */
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
