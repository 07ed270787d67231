package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import dev.onceguard.proxy.time.Clock;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * L1 on Redis through lettuce's async API. Fail-open by construction: every call has a short
 * timeout, every failure answers "not seen" and is counted, and a circuit breaker stops calling
 * Redis for {@code breaker-open-for} after a failure so that an outage costs one timeout per
 * interval, not one per record. An outage is logged once when it starts and once when it ends.
 *
 * <p>Keys are {@code <key-prefix><route>:<dedup key>}; the value is the record's fingerprint, so
 * that a hit is only a hit for the same content. The client and its
 * one connection are created here and closed by {@link #close()} (lettuce: a RedisClient is
 * expensive, reuse it). Thread-safe.
 */
public final class RedisIdempotencyCache implements IdempotencyCache {
  private static final Logger log = LoggerFactory.getLogger(RedisIdempotencyCache.class);

  private final RedisConfig cfg;
  private final Clock clock;
  private final RedisClient client;
  private final RedisURI uri;
  private final AtomicReference<StatefulRedisConnection<String, String>> conn = new AtomicReference<>();
  private final AtomicBoolean connecting = new AtomicBoolean();
  private final AtomicLong openUntil = new AtomicLong();
  private final AtomicBoolean down = new AtomicBoolean();
  private final AtomicLong failures = new AtomicLong();
  private final AtomicLong skipped = new AtomicLong();
  private final AtomicLong hits = new AtomicLong();
  private final AtomicLong misses = new AtomicLong();
  private volatile boolean closed;

  public RedisIdempotencyCache(RedisConfig cfg, Clock clock) {
    this.cfg = cfg;
    this.clock = clock;
    this.uri = RedisURI.create(cfg.uri());
    uri.setTimeout(cfg.timeout());
    this.client = RedisClient.create(uri);
    client.setOptions(ClientOptions.builder()
        .autoReconnect(true)
        // while disconnected, fail commands at once instead of queueing them: L1 must never wait
        .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
        .socketOptions(SocketOptions.builder().connectTimeout(Duration.ofSeconds(1)).build())
        .timeoutOptions(TimeoutOptions.enabled(cfg.timeout()))
        .build());
    connectAsync();
  }

  private void connectAsync() {
    if (closed || !connecting.compareAndSet(false, true)) {
      return;
    }
    client.connectAsync(StringCodec.UTF8, uri).whenComplete((c, e) -> {
      connecting.set(false);
      if (e != null) {
        failed("connect", e);
      } else if (closed) {
        c.closeAsync();
      } else {
        StatefulRedisConnection<String, String> old = conn.getAndSet(c);
        if (old != null) {
          old.closeAsync(); // a reconnect of our own replaced it: don't leak the old one
        }
      }
    });
  }

  private String key(String route, String dedupKey) {
    return cfg.keyPrefix() + route + ":" + dedupKey;
  }

  /** The connection to use now, or {@code null} when the breaker is open or Redis is unreachable. */
  private StatefulRedisConnection<String, String> usable() {
    if (clock.nowMillis() < openUntil.get()) {
      skipped.incrementAndGet();
      return null;
    }
    StatefulRedisConnection<String, String> c = conn.get();
    if (c == null || !c.isOpen()) {
      skipped.incrementAndGet();
      connectAsync();
      return null;
    }
    return c;
  }

  @Override
  public CompletionStage<Boolean> seen(String route, String dedupKey, String fingerprint) {
    StatefulRedisConnection<String, String> c = usable();
    if (c == null) {
      return CompletableFuture.completedFuture(false);
    }
    try {
      return c.async().get(key(route, dedupKey)).toCompletableFuture()
          .orTimeout(cfg.timeout().toMillis(), TimeUnit.MILLISECONDS)
          .handle((v, e) -> {
            if (e != null) {
              failed("GET", e);
              return false;
            }
            healthy();
            if (fingerprint.equals(v)) {
              hits.incrementAndGet();
              return true;
            }
            misses.incrementAndGet();
            return false;
          });
    } catch (RuntimeException e) {
      failed("GET", e);
      return CompletableFuture.completedFuture(false);
    }
  }

  @Override
  public CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, Duration ttl) {
    StatefulRedisConnection<String, String> c = usable();
    if (c == null) {
      return CompletableFuture.completedFuture(null);
    }
    try {
      return c.async().set(key(route, dedupKey), fingerprint, SetArgs.Builder.px(ttl.toMillis())).toCompletableFuture()
          .orTimeout(cfg.timeout().toMillis(), TimeUnit.MILLISECONDS)
          .handle((v, e) -> {
            if (e != null) {
              failed("SET", e);
            } else {
              healthy();
            }
            return null;
          });
    } catch (RuntimeException e) {
      failed("SET", e);
      return CompletableFuture.completedFuture(null);
    }
  }

  private void failed(String op, Throwable e) {
    failures.incrementAndGet();
    openUntil.set(clock.nowMillis() + cfg.breakerOpenFor().toMillis());
    if (down.compareAndSet(false, true) && !closed) {
      log.warn("Redis L1 cache unavailable ({} failed: {}); skipping L1 (results stay correct, only slower) and retrying every {} ms",
          op, e.toString(), cfg.breakerOpenFor().toMillis());
    }
  }

  private void healthy() {
    if (down.compareAndSet(true, false)) {
      log.info("Redis L1 cache available again after {} failed or skipped calls", failures.get() + skipped.get());
    }
  }

  /** Calls that failed (timeout, error). */
  public long failures() {
    return failures.get();
  }

  /** Calls not attempted because the breaker was open or no connection was up. */
  public long skipped() {
    return skipped.get();
  }

  public long hits() {
    return hits.get();
  }

  public long misses() {
    return misses.get();
  }

  @Override
  public void close() {
    closed = true;
    StatefulRedisConnection<String, String> c = conn.getAndSet(null);
    if (c != null) {
      c.close();
    }
    client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
  }
}
