package dev.onceguard.proxy.dispatch;

import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import java.time.Duration;
import java.util.Random;

/**
 * Exponential backoff with full jitter, floored at the initial backoff: the wait before retry
 * {@code n} (1 for the first retry) is uniform in {@code [initial, min(max, initial * 2^n)]}.
 * The jitter spreads the retries of many records that failed together (business restarted) so
 * that they do not come back as one burst; the floor keeps a failing business from being hit
 * in a tight loop.
 *
 * <p>Immutable and thread-safe ({@link Random} is); the random source is injected for tests.
 */
public final class Backoff {
  private final long initialNanos;
  private final long maxNanos;
  private final Random random;

  public Backoff(Duration initial, Duration max, Random random) {
    if (initial.isNegative() || initial.isZero()) {
      throw new IllegalArgumentException("initial backoff must be positive: " + initial);
    }
    if (max.compareTo(initial) < 0) {
      throw new IllegalArgumentException("max backoff " + max + " is smaller than initial " + initial);
    }
    this.initialNanos = initial.toNanos();
    this.maxNanos = max.toNanos();
    this.random = random;
  }

  public static Backoff of(RetryConfig retry) {
    return new Backoff(retry.initialBackoff(), retry.maxBackoff(), new Random());
  }

  /**
   * The wait before retry number {@code retry} (1-based).
   *
   * @throws IllegalArgumentException if {@code retry < 1}
   */
  public Duration delay(int retry) {
    if (retry < 1) {
      throw new IllegalArgumentException("retry numbers start at 1: " + retry);
    }
    long ceiling = ceilingNanos(retry);
    long jitter = ceiling == initialNanos ? 0 : random.nextLong(ceiling - initialNanos + 1);
    return Duration.ofNanos(initialNanos + jitter);
  }

  /** {@code min(max, initial * 2^retry)} without overflow. */
  long ceilingNanos(int retry) {
    // 2^62 ns is 146 years: far beyond any max, and the shift stays in range.
    int shift = Math.min(retry, 62);
    long scaled = initialNanos > (maxNanos >> shift) ? maxNanos : initialNanos << shift;
    return Math.min(maxNanos, scaled);
  }

  @Override
  public String toString() {
    return "Backoff[" + Duration.ofNanos(initialNanos) + ".." + Duration.ofNanos(maxNanos) + "]";
  }
}
