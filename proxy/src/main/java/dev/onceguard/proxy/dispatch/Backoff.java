package dev.onceguard.proxy.dispatch;

import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Exponential backoff with full jitter, floored at the initial backoff: the wait before retry
 * {@code n} (1 for the first retry) is uniform in {@code [initial, min(max, initial * 2^n)]}.
 * The jitter spreads the retries of many records that failed together (business restarted) so
 * that they do not come back as one burst; the floor keeps a failing business from being hit
 * in a tight loop.
 *
 * <p><b>The business's wait.</b> A business may ask for a longer wait before the next attempt
 * ({@code retry_after_ms}, up to 49 days on the wire); {@link #delay(int, Duration)} honours it up
 * to the max backoff and no further. A wait beyond it would hold the claim, the entity and the
 * partition's commits for as long as the business said, on one answer; the max backoff is the
 * operator's bound on any wait between two attempts. The first capped wait of each backoff (one
 * per route) is logged.
 *
 * <p>Thread-safe ({@link Random} is); the random source is injected for tests.
 */
public final class Backoff {
  private static final Logger log = LoggerFactory.getLogger(Backoff.class);

  private final long initialNanos;
  private final long maxNanos;
  private final Random random;
  /** Names the backoff's user in the cap's log line. */
  private final String owner;
  private final AtomicBoolean capLogged = new AtomicBoolean();

  public Backoff(Duration initial, Duration max, Random random) {
    this(initial, max, random, "retry");
  }

  /**
   * @param owner what waits, for the log line of a capped wait (e.g. {@code "route orders"})
   */
  public Backoff(Duration initial, Duration max, Random random, String owner) {
    if (initial.isNegative() || initial.isZero()) {
      throw new IllegalArgumentException("initial backoff must be positive: " + initial);
    }
    if (max.compareTo(initial) < 0) {
      throw new IllegalArgumentException("max backoff " + max + " is smaller than initial " + initial);
    }
    this.initialNanos = initial.toNanos();
    this.maxNanos = max.toNanos();
    this.random = random;
    this.owner = owner;
  }

  public static Backoff of(RetryConfig retry) {
    return new Backoff(retry.initialBackoff(), retry.maxBackoff(), new Random());
  }

  /** The backoff of route {@code route}'s retries. */
  public static Backoff of(String route, RetryConfig retry) {
    return new Backoff(retry.initialBackoff(), retry.maxBackoff(), new Random(), "route " + route);
  }

  /**
   * The wait before retry number {@code retry} (1-based) when the business asked for at least
   * {@code asked} ({@link Duration#ZERO}: nothing): the longer of {@link #delay(int)} and
   * {@code asked}, but never longer than the max backoff.
   */
  public Duration delay(int retry, Duration asked) {
    Duration d = delay(retry);
    if (asked.compareTo(d) <= 0) {
      return d;
    }
    Duration max = Duration.ofNanos(maxNanos);
    if (asked.compareTo(max) <= 0) {
      return asked;
    }
    if (capLogged.compareAndSet(false, true)) {
      log.warn("{}: the business asked to wait {} ms before the next attempt; waiting retry.max-backoff ({} ms) instead"
          + " (logged once)", owner, asked.toMillis(), max.toMillis());
    }
    return max;
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
