package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.RedisIdempotencyCache;
import dev.onceguard.proxy.time.Clock;
import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * L1 on a real three-node Redis Cluster ({@code redis.mode: cluster}), started by the test from the
 * machine's {@code redis-server} on free ports: keys spread over every node and are found again
 * through the cluster client, and a node that dies makes L1 fail open, never fail.
 */
class RedisClusterIT {
  private final List<Process> nodes = new ArrayList<>();
  private final List<Integer> ports = new ArrayList<>();

  @AfterEach
  void stopNodes() throws InterruptedException {
    for (Process p : nodes) {
      p.destroy();
    }
    for (Process p : nodes) {
      if (!p.waitFor(5, TimeUnit.SECONDS)) {
        p.destroyForcibly();
      }
    }
  }

  @Test
  void clusterMode_keysSpreadOverEveryNode_foundAgain_andADeadNodeFailsOpen(@TempDir Path dir) throws Exception {
    startCluster(dir, 3);
    String seeds = "redis://127.0.0.1:" + ports.get(0) + ",redis://127.0.0.1:" + ports.get(1);
    RedisIdempotencyCache cache = new RedisIdempotencyCache(
        new RedisConfig(seeds, Duration.ofMillis(500), "ogit-cluster:", Duration.ofMillis(200), true), Clock.SYSTEM);
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

      // one node dies: lookups of its keys fail open (answer "not seen", counted), nothing throws
      nodes.get(2).destroyForcibly().waitFor(5, TimeUnit.SECONDS);
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

  private void startCluster(Path dir, int size) throws Exception {
    String server = which("redis-server");
    String cli = which("redis-cli");
    for (int i = 0; i < size; i++) {
      int port = freePort();
      Path d = Files.createDirectories(dir.resolve("node-" + port));
      Process p = new ProcessBuilder(server, "--port", Integer.toString(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
          "--cluster-config-file", d.resolve("nodes.conf").toString(), "--dir", d.toString(), "--save", "", "--appendonly", "no")
          .redirectErrorStream(true).redirectOutput(d.resolve("redis.log").toFile()).start();
      nodes.add(p);
      ports.add(port);
    }
    for (int port : ports) {
      awaitPong(port);
    }
    List<String> create = new ArrayList<>(List.of(cli, "--cluster", "create"));
    ports.forEach(p -> create.add("127.0.0.1:" + p));
    create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
    Process c = new ProcessBuilder(create).redirectErrorStream(true).start();
    String out = new String(c.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(c.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(c.exitValue()).as("redis-cli --cluster create:%n%s", out).isZero();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (ports.stream().anyMatch(p -> !cli(p, "CLUSTER", "INFO").contains("cluster_state:ok"))) {
      assertThat(System.nanoTime()).as("cluster_state:ok on every node within 30 s").isLessThan(deadline);
      Thread.sleep(100);
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

  private static void awaitPong(int port) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!cli(port, "PING").contains("PONG")) {
      assertThat(System.nanoTime()).as("redis-server on port %d answered within 20 s", port).isLessThan(deadline);
      Thread.sleep(50);
    }
  }

  private static String cli(int port, String... args) {
    List<String> cmd = new ArrayList<>(List.of("redis-cli", "-h", "127.0.0.1", "-p", Integer.toString(port)));
    cmd.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      p.waitFor(10, TimeUnit.SECONDS);
      return out;
    } catch (IOException e) {
      return "";
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "";
    }
  }

  private static String which(String program) {
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(File.pathSeparator)) {
      File f = new File(dir, program);
      if (f.canExecute()) {
        return f.getPath();
      }
    }
    throw new IllegalStateException(program + " is not on the PATH: `make test` installs redis-server (scripts/stack.sh)");
  }

  private static int freePort() throws IOException {
    // a cluster node also listens on port + 10000 (its bus): keep both below 65536
    for (int i = 0; i < 50; i++) {
      try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
        int p = s.getLocalPort();
        if (p + 10_000 < 65_536) {
          try (ServerSocket bus = new ServerSocket(p + 10_000, 1, java.net.InetAddress.getLoopbackAddress())) {
            return p;
          } catch (IOException busy) {
            // try another
          }
        }
      }
    }
    throw new IOException("no free port pair (p, p + 10000) found");
  }
}
