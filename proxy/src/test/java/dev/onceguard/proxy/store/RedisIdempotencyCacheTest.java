package dev.onceguard.proxy.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import dev.onceguard.proxy.time.Clock;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** L1 with Redis unreachable: no server needed. With Redis up, see the integration tests. */
class RedisIdempotencyCacheTest {

  /** A local port nobody listens on (bound, then released). */
  private static int closedPort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @Test
  void redisUnreachable_countsSkippedCallsPerRoute_andReportsL1Unavailable() throws Exception {
    RedisConfig cfg = new RedisConfig("redis://127.0.0.1:" + closedPort(), Duration.ofMillis(200), "og:", Duration.ofSeconds(30));
    try (RedisIdempotencyCache cache = new RedisIdempotencyCache(cfg, "ledger-1", Clock.SYSTEM)) {
      await().atMost(Duration.ofSeconds(10)).until(() -> !cache.available());
      assertThat(cache.seen("orders", "k1", "f").toCompletableFuture().get()).isNull();
      assertThat(cache.seen("orders", "k2", "f").toCompletableFuture().get()).isNull();
      cache.remember("payments", "k3", "f", 1L, Duration.ofMinutes(1)).toCompletableFuture().get();

      assertThat(cache.counts("orders").skipped()).isEqualTo(2);
      assertThat(cache.counts("payments").skipped()).isEqualTo(1);
      assertThat(cache.counts("orders").hits() + cache.counts("orders").misses()).isZero();
      assertThat(cache.skipped()).isEqualTo(3);
      assertThat(cache.failures()).as("the failed connect").isPositive();
    }
  }

  @Test
  void keysAreScopedToALedgerId_whichIsRequired_andFollowsAChange() throws Exception {
    RedisConfig cfg = new RedisConfig("redis://127.0.0.1:" + closedPort(), Duration.ofMillis(200), "og:", Duration.ofSeconds(30));
    assertThatThrownBy(() -> new RedisIdempotencyCache(cfg, "", Clock.SYSTEM)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ledger id");
    try (RedisIdempotencyCache cache = new RedisIdempotencyCache(cfg, "0123456789abcdef", Clock.SYSTEM)) {
      assertThat(cache.ledgerId()).isEqualTo("0123456789abcdef");
      cache.ledgerId("fedcba9876543210");
      assertThat(cache.ledgerId()).isEqualTo("fedcba9876543210");
    }
  }
}
