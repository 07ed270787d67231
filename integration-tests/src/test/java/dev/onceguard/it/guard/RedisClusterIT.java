package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ClusterScript;
import dev.onceguard.it.RedisCli;
import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.RedisIdempotencyCache;
import dev.onceguard.proxy.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * L1 on a real three-node Redis Cluster ({@code redis.mode: cluster}), started by the test through
 * {@code scripts/cluster.sh up redis} (the machine's {@code redis-server} on free ports, a private
 * directory): keys spread over every node and are found again through the cluster client, and a
 * node that dies makes L1 fail open, never fail.
 */
class RedisClusterIT {
  @Test
  void clusterMode_keysSpreadOverEveryNode_foundAgain_andADeadNodeFailsOpen() throws Exception {
    try (ClusterScript cluster = ClusterScript.up("redis")) {
      List<Integer> ports = new ArrayList<>();
      cluster.list("ONCEGUARD_CLUSTER_REDIS_SEEDS").forEach(s -> ports.add(Integer.parseInt(s.substring(s.lastIndexOf(':') + 1))));
      assertThat(ports).hasSize(3);
      run(cluster, ports);
    }
  }

  private static void run(ClusterScript cluster, List<Integer> ports) throws Exception {
    String seeds = "redis://127.0.0.1:" + ports.get(0) + ",redis://127.0.0.1:" + ports.get(1);
    RedisIdempotencyCache cache = new RedisIdempotencyCache(
        new RedisConfig(seeds, Duration.ofMillis(500), "ogit-cluster:", Duration.ofMillis(200), true), "ledger-1", Clock.SYSTEM);
    try {
      awaitConnected(cache);
      int n = 300;
      for (int i = 0; i < n; i++) {
        cache.remember("orders", "key-" + i, "fp-" + i, 1_000L + i, Duration.ofMinutes(5)).toCompletableFuture().get(5, TimeUnit.SECONDS);
      }
      for (int i = 0; i < n; i++) {
        assertThat(cache.seen("orders", "key-" + i, "fp-" + i).toCompletableFuture().get(5, TimeUnit.SECONDS))
            .as("key-%d found with its fingerprint and confirmation time", i).isEqualTo(new IdempotencyCache.Hit(1_000L + i));
      }
      assertThat(cache.seen("orders", "key-7", "another-fingerprint").toCompletableFuture().get(5, TimeUnit.SECONDS))
          .as("same key, other content: not a hit").isNull();
      assertThat(cache.failures()).isZero();
      long total = 0;
      for (int port : ports) {
        long keys = Long.parseLong(cli(port, "DBSIZE").trim());
        assertThat(keys).as("keys on the node at port %d", port).isPositive();
        total += keys;
      }
      assertThat(total).isEqualTo(n);

      // one master dies with no replica left to take its slots (RedisFailoverIT covers a promotion):
      // lookups of its keys fail open (answer "not seen", counted), nothing throws
      for (String replica : List.of("redis-4", "redis-5", "redis-6")) {
        cluster.kill(replica);
      }
      cluster.kill("redis-3");
      int found = 0;
      for (int i = 0; i < n; i++) {
        if (cache.seen("orders", "key-" + i, "fp-" + i).toCompletableFuture().get(10, TimeUnit.SECONDS) != null) {
          found++;
        }
      }
      assertThat(found).as("keys of the live nodes may still be found, the dead node's are not").isLessThan(n);
      assertThat(cache.failures() + cache.skipped()).as("the misses on the dead node are counted").isPositive();
    } finally {
      cache.close();
    }
  }

  private static void awaitConnected(RedisIdempotencyCache cache) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (cache.hits() + cache.misses() == 0) {
      assertThat(System.nanoTime()).as("the cluster client answered within 20 s").isLessThan(deadline);
      cache.seen("orders", "probe", "probe").toCompletableFuture().get(5, TimeUnit.SECONDS);
      Thread.sleep(20);
    }
  }

  private static String cli(int port, String... args) {
    return RedisCli.run(port, args);
  }
}
