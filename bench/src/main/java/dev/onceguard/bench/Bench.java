package dev.onceguard.bench;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.v1.Disposition;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;

/**
 * {@code make bench}: the sidecar's Kafka-to-gRPC pipeline with and without the guard, measured in
 * one run on the real broker, MariaDB and Redis, so that the ratios compare like with like on this
 * (shared, noisy) machine. Every scenario runs {@code --repeats} times, interleaved; the medians
 * are reported.
 *
 * <ul>
 *   <li><b>baseline</b> — the same pipeline forwarding every record without a guard;
 *   <li><b>guard, no machine</b> — L1 + L2 (an append-only route);
 *   <li><b>guard, machine</b> — L1 + L2 + L3, every record a creating event of a new entity;
 *   <li><b>guard, replay</b> — the machine run's records again, from another topic: all duplicates,
 *       answered by L1 (Redis) without MySQL.
 * </ul>
 *
 * Throughput: a backlog of {@code --records} is produced first, then the sidecar starts; records
 * finished per second between the first and the last one (group join excluded). Latency: after the
 * backlog, records are produced at {@code --rate} per second for {@code --paced-seconds}; from the
 * record's create timestamp to its end (business answered and, when guarded, confirmed).
 */
public final class Bench {
  private Bench() {}

  enum Scenario {
    BASELINE("baseline (no guard)"),
    GUARD_APPEND("guard, no machine (L1+L2)"),
    GUARD_MACHINE("guard, machine (L1+L2+L3)"),
    GUARD_REPLAY("guard, replay (all L1 hits)");

    final String label;

    Scenario(String label) {
      this.label = label;
    }
  }

  record Options(int records, int repeats, int partitions, int rate, int pacedSeconds, int poolSize) {
    static Options parse(String[] args) {
      int records = 20_000;
      int repeats = 3;
      int partitions = 6;
      int rate = 300;
      int paced = 10;
      int pool = 8;
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(a + ": needs a value");
        }
        int v = Integer.parseInt(args[++i]);
        switch (a) {
          case "--records" -> records = v;
          case "--repeats" -> repeats = v;
          case "--partitions" -> partitions = v;
          case "--rate" -> rate = v;
          case "--paced-seconds" -> paced = v;
          case "--pool" -> pool = v;
          default -> throw new IllegalArgumentException("unknown option " + a
              + " (known: --records, --repeats, --partitions, --rate, --paced-seconds, --pool)");
        }
      }
      return new Options(records, repeats, partitions, rate, paced, pool);
    }
  }

  public static void main(String[] args) throws Exception {
    // before the first logger exists: the sidecar's logback.xml reads it (its INFO lines would bury the figures)
    System.setProperty("ONCEGUARD_LOG_LEVEL", System.getProperty("ONCEGUARD_LOG_LEVEL", "WARN"));
    Options o = Options.parse(args);
    Env env = Env.fromEnvironment();
    System.out.printf(Locale.ROOT,
        "OnceGuard benchmark: %d records per run, %d partitions, %d repeats; paced phase %d rec/s for %d s; MySQL pool %d%n",
        o.records(), o.partitions(), o.repeats(), o.rate(), o.pacedSeconds(), o.poolSize());
    System.out.printf(Locale.ROOT, "machine: %d cores, Kafka %s, MySQL %s:%d, Redis %s%n%n", Runtime.getRuntime().availableProcessors(),
        env.kafkaBootstrap(), env.mysqlHost(), env.mysqlPort(), env.redisUri());
    Map<Scenario, List<RunResult>> results = new EnumMap<>(Scenario.class);
    try (BenchKafka kafka = new BenchKafka(env.kafkaBootstrap()); Business business = Business.start()) {
      for (int rep = 1; rep <= o.repeats(); rep++) {
        for (Scenario s : List.of(Scenario.BASELINE, Scenario.GUARD_APPEND, Scenario.GUARD_MACHINE)) {
          String db = s == Scenario.BASELINE ? null : "og_bench_" + UUID.randomUUID().toString().replace("-", "").substring(0, 10);
          try {
            RunResult r = run(s, o, env, kafka, business, db, null);
            results.computeIfAbsent(s, k -> new ArrayList<>()).add(r);
            print(rep, s, r);
            if (s == Scenario.GUARD_MACHINE) {
              RunResult replay = run(Scenario.GUARD_REPLAY, o, env, kafka, business, db, r.workload());
              results.computeIfAbsent(Scenario.GUARD_REPLAY, k -> new ArrayList<>()).add(replay);
              print(rep, Scenario.GUARD_REPLAY, replay);
            }
          } finally {
            if (db != null) {
              env.dropDatabase(db);
            }
          }
        }
      }
    }
    report(results);
  }

  /**
   * One run: topic, backlog, sidecar, wait, paced phase, close.
   *
   * @param replayOf for the replay scenario, the machine run's workload to send again
   */
  private static RunResult run(Scenario s, Options o, Env env, BenchKafka kafka, Business business, String database,
      Workload replayOf) throws Exception {
    String topic = kafka.createTopic("bench-" + s.name().toLowerCase(Locale.ROOT).replace('_', '-'), o.partitions());
    Workload w = replayOf == null ? Workload.fresh(o.records()) : replayOf;
    kafka.produce(topic, w.backlog());
    Completions done = new Completions();
    business.onReceive(topic, s == Scenario.BASELINE ? done : null);
    SidecarConfig cfg = new ConfigReader(Map.of()).parse(env.yaml(s, topic, database, business.target(), o.poolSize()), "bench-" + s);
    long roundTrips0 = Db.roundTrips();
    GuardRuntime runtime = s == Scenario.BASELINE ? null : new GuardRuntime(cfg, Clock.SYSTEM);
    ProcessorFactory processors = runtime == null ? ProcessorFactory.forwarding()
        : runtime.processors((record, verdict, forwarded) -> {
          if (verdict.getDisposition() != Disposition.ILLEGAL_TRANSITION_ESCALATE) {
            done.add(record.timestamp());
          } else {
            done.failed(verdict.getReason() + ": " + verdict.getDetail());
          }
        });
    Sidecar sidecar = new Sidecar(cfg, processors, runtime == null ? List.of() : runtime.services());
    try {
      sidecar.start();
      done.await(o.records(), Duration.ofMinutes(3));
      Stats backlog = done.stats();
      Stats paced = null;
      if (s != Scenario.GUARD_REPLAY && o.pacedSeconds() > 0) {
        done.reset();
        int n = o.rate() * o.pacedSeconds();
        kafka.producePaced(topic, w.paced(n), o.rate());
        done.await(n, Duration.ofMinutes(2));
        paced = done.stats();
      }
      long roundTrips = Db.roundTrips() - roundTrips0;
      return new RunResult(backlog.throughput(), paced, roundTrips / (double) (o.records() + (paced == null ? 0 : paced.count())), w);
    } finally {
      sidecar.close();
      if (runtime != null) {
        runtime.close();
      }
      business.onReceive(topic, null);
    }
  }

  record RunResult(double throughput, Stats paced, double roundTripsPerRecord, Workload workload) {}

  private static void print(int rep, Scenario s, RunResult r) {
    System.out.printf(Locale.ROOT, "run %d  %-30s %8.0f rec/s%s  %.1f MySQL round trips/record%n", rep, s.label, r.throughput(),
        r.paced() == null ? "" : String.format(Locale.ROOT, "   paced: p50 %5.1f ms  p99 %6.1f ms", r.paced().p50(), r.paced().p99()),
        r.roundTripsPerRecord());
  }

  private static void report(Map<Scenario, List<RunResult>> results) {
    double base = median(results.get(Scenario.BASELINE).stream().mapToDouble(RunResult::throughput).toArray());
    System.out.printf(Locale.ROOT, "%nMedians over %d runs%n", results.get(Scenario.BASELINE).size());
    System.out.printf(Locale.ROOT, "%-30s %12s %10s %12s %12s %14s%n", "scenario", "rec/s", "vs base", "paced p50", "paced p99",
        "MySQL RT/rec");
    for (Map.Entry<Scenario, List<RunResult>> e : results.entrySet()) {
      List<RunResult> rs = e.getValue();
      double tp = median(rs.stream().mapToDouble(RunResult::throughput).toArray());
      boolean paced = rs.get(0).paced() != null;
      System.out.printf(Locale.ROOT, "%-30s %12.0f %9.2fx %12s %12s %14.1f%n", e.getKey().label, tp, tp / base,
          paced ? String.format(Locale.ROOT, "%.1f ms", median(rs.stream().mapToDouble(r -> r.paced().p50()).toArray())) : "-",
          paced ? String.format(Locale.ROOT, "%.1f ms", median(rs.stream().mapToDouble(r -> r.paced().p99()).toArray())) : "-",
          median(rs.stream().mapToDouble(RunResult::roundTripsPerRecord).toArray()));
    }
  }

  static double median(double[] xs) {
    double[] s = xs.clone();
    java.util.Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }
}
