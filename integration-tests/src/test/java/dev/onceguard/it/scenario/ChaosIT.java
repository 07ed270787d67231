package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ClusterScript;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RedisProcess;
import dev.onceguard.it.RelayProcess;
import dev.onceguard.it.scenario.Chaos.Injection;
import dev.onceguard.it.scenario.Chaos.Kind;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The five-route order scenario with several sidecar processes while {@link Chaos} injects faults
 * at random from a printed seed; after each round the history (what was produced, every business
 * call, escalations, verdicts, the guard's tables, committed offsets) is judged by
 * {@link ScenarioChecker} with the crash strictness: no fact applied twice except flagged
 * redeliveries of unconfirmed claims, nothing lost, per-entity order, every partition committed
 * to its end, every escalation accounted for.
 *
 * <p>In {@code make test} one short round with a fixed seed on each stack: the single-node one and
 * the local cluster (a broker, a Galera node and a sidecar are among the planned faults).
 * {@code make chaos} runs rounds while another, as long as the last, fits in
 * {@code -Dchaos.seconds} (CHAOS_SECONDS, default 600; at least one), from {@code -Dchaos.seed}
 * (CHAOS_SEED, random by default), and writes {@code target/chaos/report.md}. The same seed
 * injects the same faults in the same order; their timing follows the run.
 */
class ChaosIT {
  static final long SECONDS = Long.getLong("chaos.seconds", 0);
  static final long SEED = Long.getLong("chaos.seed", 20261201L);
  static final int INSTANCES = Integer.getInteger("chaos.instances", 2);
  static final int LINES = Integer.getInteger("chaos.lines", 500);
  /**
   * 0 (make test): a round's records are produced as fast as they are acknowledged, so its
   * traffic is often worked off before the plan ends and no fault comes at random. Else
   * (CHAOS_ROUND_SECONDS, make chaos) they are spread over about this many seconds, and faults
   * keep coming at random under traffic once the plan is done.
   */
  static final long ROUND_SECONDS = Long.getLong("chaos.round-seconds", 0);
  /** Every route's early-arrival timeout when faults come under traffic ({@link #ROUND_SECONDS} > 0). */
  static final String EARLY_ARRIVAL_TIMEOUT_UNDER_TRAFFIC = "90s";
  /**
   * Injected first in every round, so that even the short run meets each kind of fault once: a
   * broker killed (the single one, or one of the cluster's three), a sidecar killed while a MySQL
   * link is cut, a Galera node killed while the business hangs, Redis lost while a sidecar is
   * stopped, a slow MySQL link and a slow business, the process in front of the business
   * SIGSTOPped, then every Galera node at once (a full MariaDB restart). Kinds the stack in use
   * cannot inject are left out.
   */
  static final List<List<Kind>> PLAN = List.of(List.of(Kind.KAFKA_RESTART), List.of(Kind.BROKER_RESTART),
      List.of(Kind.SIDECAR_KILL9, Kind.MYSQL_CUT), List.of(Kind.GALERA_RESTART, Kind.BUSINESS_HUNG),
      List.of(Kind.REDIS_RESTART, Kind.SIDECAR_SIGTERM), List.of(Kind.MYSQL_SLOW, Kind.BUSINESS_SLOW), List.of(Kind.BUSINESS_SIGSTOP),
      List.of(Kind.GALERA_FULL_RESTART));
  static final int PARTITIONS = 4;
  /**
   * Which stacks to run on: {@code -Dchaos.cluster=true} the local cluster stack only (3 brokers,
   * 3 Galera nodes, each sidecar writing through its own node: multi-primary), {@code false} the
   * single-node stack only (one broker, the machine's MariaDB: a broker kill is a whole Kafka
   * outage), {@code both} (the default, what {@code make test} runs) one after the other.
   */
  static final String STACKS = stacks(System.getProperty("chaos.cluster", "both"));

  private static String stacks(String v) {
    if (!List.of("true", "false", "both").contains(v)) {
      throw new IllegalArgumentException("-Dchaos.cluster (CHAOS_CLUSTER) must be true, false or both, was '" + v + "'");
    }
    return v;
  }

  /** One finished round. */
  record Round(int number, long seed, Result result, List<Injection> injections, double seconds) {}

  /** The reports of the stacks run in this JVM, in order: target/chaos/report.md holds them all. */
  static final List<String> REPORTS = new ArrayList<>();

  @Test
  void singleNodeStack_randomFaultsFromASeed_historyCheckedAfterEachRound() throws Exception {
    org.junit.jupiter.api.Assumptions.assumeTrue(!STACKS.equals("true"), "-Dchaos.cluster=true: the cluster stack only");
    run(false);
  }

  @Test
  void clusterStack_randomFaultsFromASeed_historyCheckedAfterEachRound() throws Exception {
    org.junit.jupiter.api.Assumptions.assumeTrue(!STACKS.equals("false"), "-Dchaos.cluster=false: the single-node stack only");
    run(true);
  }

  private static void run(boolean cluster) throws Exception {
    System.out.printf("ChaosIT: seed %d, %s, %d sidecar processes, %d lines per round%s, %s (re-run: make chaos CHAOS_SEED=%d CHAOS_CLUSTER=%s)%n",
        SEED, SECONDS <= 0 ? "one round" : SECONDS + " s", INSTANCES, LINES,
        ROUND_SECONDS > 0 ? " produced over " + ROUND_SECONDS + " s" : "", cluster ? "cluster stack" : "single-node stack", SEED, cluster);
    Random seeds = new Random(SEED);
    List<Round> rounds = new ArrayList<>();
    try (ClusterScript stack = cluster ? ClusterScript.up("kafka", "galera") : null) {
      // rounds while the next one, as long as the last, still fits in the time (at least one)
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
      long last;
      do {
        long t0 = System.nanoTime();
        rounds.add(round(rounds.size() + 1, seeds.nextLong(), stack));
        last = System.nanoTime() - t0;
      } while (System.nanoTime() + last < deadline);
    }
    String report = report(rounds, cluster);
    System.out.println(report);
    Path out = Path.of("target", "chaos", "report.md");
    Files.createDirectories(out.getParent());
    synchronized (REPORTS) {
      REPORTS.add(report);
      Files.writeString(out, String.join("\n", REPORTS));
    }

    List<Injection> all = rounds.stream().flatMap(r -> r.injections().stream()).toList();
    assertThat(all).as("faults injected").isNotEmpty();
    if (ROUND_SECONDS > 0) {
      assertThat(all).as("faults picked at random after the plan, with traffic spread over %d s per round", ROUND_SECONDS)
          .anyMatch(i -> !i.planned());
    }
  }

  private static Round round(int number, long seed, ClusterScript cluster) throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, seed));
    long t0 = System.nanoTime();
    List<Integer> mysqlPorts = cluster == null ? List.of(ItEnv.mysqlPort())
        : cluster.list("ONCEGUARD_CLUSTER_MYSQL_PORTS").stream().map(Integer::parseInt).toList();
    KafkaSupport kafka = cluster == null ? new KafkaSupport() : new KafkaSupport(cluster.env("ONCEGUARD_CLUSTER_KAFKA_BOOTSTRAP"), (short) 3);
    try (RedisProcess redis = RedisProcess.start();
        ScenarioEnv env = earlyArrivalTimeouts(new ScenarioEnv("ChaosIT-" + number, PARTITIONS, kafka, new Mysql(ItEnv.mysqlHost(), mysqlPorts.get(0)))
            .redisUri(redis.uri()));
        RecordingBusiness business = RecordingBusiness.start();
        RelayProcess front = RelayProcess.start("127.0.0.1", business.port());
        Chaos.Fleet fleet = new Chaos.Fleet(env, front.address(), "chaos-r" + number, INSTANCES, mysqlPorts)) {
      ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
      if (ROUND_SECONDS > 0) {
        driver.spreadOver(java.time.Duration.ofSeconds(ROUND_SECONDS));
      }
      System.out.printf("ChaosIT round %d: seed %d%n", number, seed);
      Chaos chaos = new Chaos(seed, PLAN, fleet, business, front, redis, env, cluster == null ? Chaos.stackScriptOwningTheBroker() : null, cluster,
          driver::log);
      chaos.start();
      try {
        driver.run();
        // the planned faults all happen, even if the waves were quicker (then on idle groups)
        assertThat(chaos.awaitPlan(java.time.Duration.ofMinutes(5))).as("the planned faults were injected within 5 minutes").isTrue();
      } finally {
        chaos.stop();
      }
      driver.awaitAllCommitted();
      Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.CRASH).check();
      Set<Kind> planned = PLAN.stream().flatMap(List::stream).filter(chaos.kinds()::contains).collect(java.util.stream.Collectors.toSet());
      assertThat(chaos.injections().stream().map(Injection::kind).collect(java.util.stream.Collectors.toSet()))
          .as("every planned fault was injected").containsAll(planned);
      driver.log("round %d passed the checker: %d faults, %d redeliveries (flagged)", number, chaos.injections().size(), r.redeliveries());
      return new Round(number, seed, r, chaos.injections(), (System.nanoTime() - t0) / 1e9);
    }
  }

  /**
   * An early arrival waits for its predecessor up to its route's early-arrival timeout, then is
   * escalated, by design. With traffic spread over the round ({@link #ROUND_SECONDS} > 0) faults
   * come while a stage's records are still being produced, and a full Galera restart stalls every
   * route for up to a minute (64 s seen): the scenario's "arrives early, applied once its
   * predecessor is" then needs a longer wait than the 10 s (deliver) and 60 s (the others) of make
   * test's round. Set before the fleet starts.
   */
  private static ScenarioEnv earlyArrivalTimeouts(ScenarioEnv env) {
    if (ROUND_SECONDS > 0) {
      for (String route : OrderScenario.ROUTES) {
        env.earlyArrivalTimeout(route, EARLY_ARRIVAL_TIMEOUT_UNDER_TRAFFIC);
      }
    }
    return env;
  }

  /** Markdown: per fault kind how often and the recovery after its heal, per round what the checker found. */
  static String report(List<Round> rounds, boolean cluster) {
    StringBuilder sb = new StringBuilder();
    List<Injection> all = rounds.stream().flatMap(r -> r.injections().stream()).toList();
    sb.append(String.format(Locale.ROOT, "Chaos run: seed %d, %d round(s), %.0f s, %d sidecar processes, %d lines per round%s, %s.%n%n", SEED,
        rounds.size(), rounds.stream().mapToDouble(Round::seconds).sum(), INSTANCES, LINES,
        ROUND_SECONDS > 0 ? " produced over about " + ROUND_SECONDS + " s" : "",
        cluster ? "local cluster stack (3 KRaft brokers, 3 Galera nodes)" : "single-node stack"));
    sb.append("| fault | injected | of which at random | held ms (median) | caught up after the heal, ms (median / max) | after the injection, ms (median / max) |\n"
        + "|---|---:|---:|---:|---:|---:|\n");
    Map<Kind, Integer> counts = Chaos.counts(all);
    for (Map.Entry<Kind, Integer> e : counts.entrySet()) {
      long[] held = all.stream().filter(i -> i.kind() == e.getKey()).mapToLong(Injection::heldMillis).sorted().toArray();
      long[] rec = all.stream().filter(i -> i.kind() == e.getKey()).mapToLong(Injection::recoveryMillis).sorted().toArray();
      long[] total = all.stream().filter(i -> i.kind() == e.getKey()).mapToLong(Injection::sinceInjectionMillis).sorted().toArray();
      long random = all.stream().filter(i -> i.kind() == e.getKey() && !i.planned()).count();
      sb.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %d / %d | %d / %d |%n", e.getKey(), e.getValue(), random, held[held.length / 2],
          rec[rec.length / 2], rec[rec.length - 1], total[total.length / 2], total[total.length - 1]));
    }
    sb.append("\n| round | seed | faults (at random) | records | deliveries | flagged redeliveries | escalated | checker |\n|---:|---:|---:|---:|---:|---:|---|---|\n");
    for (Round r : rounds) {
      sb.append(String.format(Locale.ROOT, "| %d | %d | %d (%d) | %d | %d | %d | %s | passed |%n", r.number(), r.seed(), r.injections().size(),
          r.injections().stream().filter(i -> !i.planned()).count(),
          r.result().produced(), r.result().delivered(), r.result().redeliveries(), r.result().escalated()));
    }
    return sb.toString();
  }
}
