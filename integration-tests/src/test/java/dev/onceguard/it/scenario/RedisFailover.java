package dev.onceguard.it.scenario;

import dev.onceguard.it.ClusterScript;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RedisCli;
import dev.onceguard.v1.Delivery;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * A real Redis Cluster failover under a guarded sidecar (in-process, L1 on the cluster through
 * lettuce's cluster client): the experiment behind Q2 of docs/answers.md, run short by
 * {@code RedisFailoverIT} in {@code make test} and longer by {@code make answers}.
 *
 * <p>Six redis-server processes ({@code scripts/cluster.sh up redis}: 3 masters, 3 replicas). The
 * run, in phases, each waited for to its last verdict:
 * <ol>
 *   <li><b>before</b>: {@code facts} new facts, then each re-sent under a new message id;
 *   <li>the victim master's replica is frozen (SIGSTOP) and its replication link cut (CLIENT KILL
 *       on the master), so that what the master acknowledges from then on is not replicated; {@code facts} more new facts; their L1 keys on the victim are
 *       listed (acknowledged by Redis: the sidecar wrote them after each confirmation);
 *   <li>the victim is killed (SIGKILL) and its replica thawed: the cluster marks the master
 *       failed and promotes the replica, which never received the last writes;
 *   <li><b>during</b>: every fact re-sent at once, while the promotion runs;
 *   <li>a few re-sends of facts whose keys the masters hold, every half second, until L1 answers
 *       every one (the sidecar's client follows the new topology, its breaker stays closed);
 *   <li><b>after</b>: every fact re-sent again.
 * </ol>
 * Measured: acknowledged L1 keys lost (on the victim before, not on its promoted replica after),
 * the L1 hit rate of the re-sends per phase (the rest reached the ledger), time from the kill to
 * the promotion, to {@code cluster_state:ok} and to the sidecar's first L1 hit, and what the business received: every fact once.
 */
final class RedisFailover {
  /** The master that is killed. */
  static final String VICTIM = "redis-1";

  static final String CACHE_HIT = "DUPLICATE_IGNORE/CACHE/CACHE_HIT";

  /** Re-sends per probe while waiting for L1 to answer again. */
  static final int PROBES = 10;

  /** Facts before the measured ones, so that every node's connection is open. */
  static final int WARM_UP = 30;

  /** One phase's re-sends: how many, and how many L1 answered (the others the ledger). */
  record Phase(String name, long resent, long cacheHits, long ledgerHits, long otherVerdicts) {
    double hitRate() {
      return resent == 0 ? 0 : (double) cacheHits / resent;
    }
  }

  /** What one run measured; {@code facts}: distinct facts produced in all. */
  record Result(long seed, int facts, long victimKeys, long lostKeys, String promoted, long promotedMs, long clusterOkMs,
      long l1BackMs, List<Phase> phases, int distinctFacts, int factsLost, int factsDoubled, int escalated, long wallMs) {

    /** The table of docs/answers.md, Q2. */
    String markdown() {
      StringBuilder md = new StringBuilder();
      md.append(String.format(Locale.ROOT, "| Acknowledged L1 keys on the killed master | lost in the failover | replica promoted after | "
          + "cluster_state:ok after | L1 answers every probe after | facts lost | facts doubled | escalated |%n"
          + "|---:|---:|---:|---:|---:|---:|---:|---:|%n"
          + "| %d | %d | %.1f s | %.1f s | %.1f s | %d | %d | %d |%n%n", victimKeys, lostKeys, promotedMs / 1000.0,
          clusterOkMs / 1000.0, l1BackMs / 1000.0, factsLost, factsDoubled, escalated));
      md.append("| Phase | re-sent duplicates | L1 hits | ledger hits | L1 hit rate |\n|---|---:|---:|---:|---:|\n");
      for (Phase p : phases) {
        md.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %.1f%% |%n", p.name, p.resent, p.cacheHits, p.ledgerHits,
            100 * p.hitRate()));
      }
      return md.toString();
    }
  }

  private final long seed;
  private final int facts;

  RedisFailover(long seed, int facts) {
    this.seed = seed;
    this.facts = facts;
  }

  Result run() throws Exception {
    long t0 = System.nanoTime();
    try (ClusterScript cluster = ClusterScript.up("redis");
        OneRouteEnv env = new OneRouteEnv("failover", 3).redisCluster(cluster.env("ONCEGUARD_CLUSTER_REDIS_SEEDS")
            + "," + cluster.env("ONCEGUARD_CLUSTER_REDIS_REPLICAS"), "1s");
        RecordingBusiness business = RecordingBusiness.start();
        InProcessSidecar sidecar = InProcessSidecar.start(env.config(business.target()))) {
      Redis redis = new Redis(cluster);
      String prefix = "ogit:" + env.database + ":";
      String victimId = redis.nodeId(VICTIM);
      String replica = redis.replicaOf(victimId);
      Random random = new Random(seed);
      List<String> lines = new ArrayList<>();
      List<Phase> phases = new ArrayList<>();

      // warm-up: the cluster client opens each node's connection at its first key; a first call
      // that times out opens the breaker, and writes skipped then never reach L1
      produceNew(env, business, lines, random, WARM_UP);
      awaitL1Settled(redis, prefix);
      produceNew(env, business, lines, random, facts);
      awaitL1Settled(redis, prefix);
      phases.add(resend("before", env, sidecar, lines, random));

      // the replica frozen and its link cut: what the master acknowledges from here on is never
      // replicated (frozen, the replica cannot reconnect and resync)
      cluster.pause(replica);
      redis.cli(VICTIM, "CLIENT", "KILL", "TYPE", "replica");
      produceNew(env, business, lines, random, facts);
      awaitL1Settled(redis, prefix);
      Set<String> onVictim = redis.keys(VICTIM, prefix);

      cluster.kill(VICTIM);
      long killedAt = System.nanoTime();
      cluster.resume(replica);
      phases.add(resend("during", env, sidecar, lines, random));
      long promotedMs = awaitMs(killedAt, () -> redis.isMaster(replica));
      long okMs = awaitMs(killedAt, () -> redis.clusterOk(replica));
      Set<String> lost = new HashSet<>(onVictim);
      lost.removeAll(redis.keys(replica, prefix));
      long l1BackMs = awaitL1Back(env, business, sidecar, redis, prefix, random, killedAt);
      phases.add(resend("after", env, sidecar, lines, random));

      Map<String, Long> perFact = business.okDeliveries().stream()
          .collect(Collectors.groupingBy(Delivery::getEntityId, Collectors.counting()));
      int factsLost = (int) lines.stream().filter(l -> !perFact.containsKey(l)).count();
      int doubled = (int) perFact.values().stream().filter(n -> n > 1).count();
      int escalated = env.kafka.readAll(env.escalations).size();
      return new Result(seed, lines.size(), onVictim.size(), lost.size(), replica, promotedMs, okMs, l1BackMs, phases, perFact.size(), factsLost,
          doubled, escalated, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    }
  }

  /** {@code n} new facts (a create of a new line each), waited for until the business has them all. */
  private static void produceNew(OneRouteEnv env, RecordingBusiness business, List<String> lines, Random random, int n)
      throws InterruptedException {
    List<ProducerRecord<byte[], byte[]>> batch = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String line = "fo-" + lines.size();
      lines.add(line);
      batch.add(env.record(line, "create", "m-" + Long.toHexString(random.nextLong())));
    }
    env.kafka.produce(batch);
    Set<String> wanted = new HashSet<>(lines);
    await(Duration.ofSeconds(120), "the business received " + wanted.size() + " facts",
        () -> business.okDeliveries().stream().map(Delivery::getEntityId).collect(Collectors.toSet()).containsAll(wanted));
  }

  /** Every line re-sent once under a new message id (same content: a duplicate); waits for their verdicts. */
  private static Phase resend(String name, OneRouteEnv env, InProcessSidecar sidecar, List<String> lines, Random random)
      throws InterruptedException {
    Map<String, Long> before = sidecar.verdicts();
    List<String> shuffled = new ArrayList<>(lines);
    java.util.Collections.shuffle(shuffled, random);
    List<ProducerRecord<byte[], byte[]>> batch = new ArrayList<>();
    for (String line : shuffled) {
      batch.add(env.record(line, "create", "m-" + Long.toHexString(random.nextLong())));
    }
    env.kafka.produce(batch);
    await(Duration.ofSeconds(120), name + ": a verdict for each of " + lines.size() + " re-sends",
        () -> total(diff(sidecar.verdicts(), before)) >= lines.size());
    Map<String, Long> d = diff(sidecar.verdicts(), before);
    long cache = d.getOrDefault(CACHE_HIT, 0L);
    long ledger = d.getOrDefault("DUPLICATE_IGNORE/LEDGER/LEDGER_HIT", 0L);
    return new Phase(name, lines.size(), cache, ledger, total(d) - cache - ledger);
  }

  /**
   * Re-sends, every half second, a few facts whose L1 keys the masters hold, until L1 answers all
   * of them (the sidecar's client follows the new topology, its breaker stays closed); returns
   * the time since the kill.
   */
  private static long awaitL1Back(OneRouteEnv env, RecordingBusiness business, InProcessSidecar sidecar, Redis redis, String prefix,
      Random random, long killedAt) throws InterruptedException {
    Set<String> present = new HashSet<>();
    for (String k : redis.masterKeySet(prefix)) {
      present.add(k.substring(k.lastIndexOf(':') + 1));
    }
    List<String> cached = business.okDeliveries().stream().filter(d -> present.contains(d.getDedupKey()))
        .map(Delivery::getEntityId).distinct().sorted().toList();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (true) {
      Map<String, Long> before = sidecar.verdicts();
      List<ProducerRecord<byte[], byte[]>> batch = new ArrayList<>();
      for (int i = 0; i < PROBES; i++) {
        batch.add(env.record(cached.get(random.nextInt(cached.size())), "create", "m-" + Long.toHexString(random.nextLong())));
      }
      env.kafka.produce(batch);
      await(Duration.ofSeconds(60), "verdicts of the probes", () -> total(diff(sidecar.verdicts(), before)) >= PROBES);
      if (diff(sidecar.verdicts(), before).getOrDefault(CACHE_HIT, 0L) == PROBES) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("L1 did not answer every probe within 90 s of the promotion");
      }
      TimeUnit.MILLISECONDS.sleep(500);
    }
  }

  private static Map<String, Long> diff(Map<String, Long> now, Map<String, Long> before) {
    Map<String, Long> d = new HashMap<>();
    now.forEach((k, n) -> d.put(k, n - before.getOrDefault(k, 0L)));
    return d;
  }

  private static long total(Map<String, Long> m) {
    return m.values().stream().mapToLong(Long::longValue).sum();
  }

  /**
   * The sidecar writes a fact's L1 key after its confirmation, best effort (a write that times out
   * is skipped): waits until the number of keys on the masters stops growing.
   */
  private static void awaitL1Settled(Redis redis, String prefix) throws InterruptedException {
    long[] last = {-1};
    await(Duration.ofSeconds(30), "L1 keys settled", () -> {
      long n = redis.masterKeys(prefix);
      boolean settled = n == last[0];
      last[0] = n;
      if (!settled) {
        sleep(500);
      }
      return settled;
    });
  }

  private static void sleep(long ms) {
    try {
      TimeUnit.MILLISECONDS.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static long awaitMs(long sinceNanos, BooleanSupplier done) throws InterruptedException {
    await(Duration.ofSeconds(60), "the failover", done);
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sinceNanos);
  }

  private static void await(Duration timeout, String what, BooleanSupplier done) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!done.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("not within " + timeout.toSeconds() + " s: " + what);
      }
      TimeUnit.MILLISECONDS.sleep(50);
    }
  }

  /** The cluster's nodes through redis-cli, by their cluster.sh names (redis-1 .. redis-6). */
  static final class Redis {
    private final Map<String, Integer> ports = new HashMap<>();

    Redis(ClusterScript cluster) {
      List<String> all = new ArrayList<>(cluster.list("ONCEGUARD_CLUSTER_REDIS_SEEDS"));
      all.addAll(cluster.list("ONCEGUARD_CLUSTER_REDIS_REPLICAS"));
      for (int i = 0; i < all.size(); i++) {
        String s = all.get(i);
        ports.put("redis-" + (i + 1), Integer.parseInt(s.substring(s.lastIndexOf(':') + 1)));
      }
    }

    String nodeId(String node) {
      return cli(node, "CLUSTER", "MYID").trim();
    }

    /** The node (redis-N) whose CLUSTER NODES line names {@code masterId} as its master. */
    String replicaOf(String masterId) {
      for (String node : ports.keySet()) {
        for (String line : cli(node, "CLUSTER", "NODES").split("\n")) {
          String[] f = line.split(" ");
          if (f.length > 3 && f[2].contains("myself") && f[3].equals(masterId)) {
            return node;
          }
        }
      }
      throw new IllegalStateException("no replica of " + masterId);
    }

    boolean isMaster(String node) {
      return cli(node, "ROLE").startsWith("master");
    }

    boolean clusterOk(String node) {
      return cli(node, "CLUSTER", "INFO").contains("cluster_state:ok");
    }

    /** Keys with {@code prefix} on the node itself. */
    Set<String> keys(String node, String prefix) {
      Set<String> keys = new HashSet<>();
      for (String k : cli(node, "--scan", "--pattern", prefix + "*").split("\n")) {
        if (!k.isBlank()) {
          keys.add(k.trim());
        }
      }
      return keys;
    }

    /** Keys with {@code prefix} on every node that is a master and answers. */
    Set<String> masterKeySet(String prefix) {
      Set<String> keys = new HashSet<>();
      for (String node : ports.keySet()) {
        if (isMaster(node)) {
          keys.addAll(keys(node, prefix));
        }
      }
      return keys;
    }

    long masterKeys(String prefix) {
      return masterKeySet(prefix).size();
    }

    String cli(String node, String... args) {
      return RedisCli.run(ports.get(node), args);
    }
  }
}
