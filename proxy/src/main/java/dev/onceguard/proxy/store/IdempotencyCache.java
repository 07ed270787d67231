package dev.onceguard.proxy.store;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * L1: remembers confirmed dedup keys to answer replays without the database. Performance only:
 * implementations fail open — an outage, a timeout or a lost key makes {@link #seen} answer
 * {@code false} and {@link #remember} do nothing; neither ever completes exceptionally.
 */
public interface IdempotencyCache extends AutoCloseable {

  /**
   * A key found confirmed in the cache.
   *
   * @param confirmedAtMillis when it was confirmed (the confirming sidecar's clock), or
   *     {@link #UNKNOWN_TIME} if the entry does not say
   * @param source the source record that was confirmed ({@code topic/partition@offset}), or
   *     {@code null} if the entry does not say
   */
  record Hit(long confirmedAtMillis, String source) {
    public static final long UNKNOWN_TIME = -1;

    /** A hit whose entry does not name its source record. */
    public Hit(long confirmedAtMillis) {
      this(confirmedAtMillis, null);
    }
  }

  /**
   * The hit if the key was confirmed before with this same content fingerprint (and the cache
   * still has it), else {@code null}. A key cached with another fingerprint is not a hit: the
   * ledger must see that record to escalate the collision (an under-specified key, incident 2),
   * never the cache swallow it.
   */
  CompletionStage<Hit> seen(String route, String dedupKey, String fingerprint);

  /**
   * Records a key confirmed at {@code confirmedAtMillis}, for {@code ttl}. Call only after the
   * ledger confirm committed.
   */
  default CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, long confirmedAtMillis, Duration ttl) {
    return remember(route, dedupKey, fingerprint, confirmedAtMillis, ttl, null);
  }

  /**
   * As {@link #remember(String, String, String, long, Duration)}, naming the source record that was
   * confirmed ({@code null}: none), so that this very record consumed again is told from a replay.
   */
  CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, long confirmedAtMillis, Duration ttl,
      String source);

  @Override
  void close();

  /** A cache that never hits: L1 disabled. */
  IdempotencyCache DISABLED = new IdempotencyCache() {
    @Override
    public CompletionStage<Hit> seen(String route, String dedupKey, String fingerprint) {
      return CompletableFuture.completedFuture(null);
    }

    @Override
    public CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, long confirmedAtMillis, Duration ttl,
        String source) {
      return CompletableFuture.completedFuture(null);
    }

    @Override
    public void close() {}
  };
}
