package dev.onceguard.bench;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Records as they end: when (monotonic) and how long after their Kafka create timestamp. Any
 * thread may add; {@link #await} and {@link #stats} run on the bench thread. Synchronised: a few
 * ten thousand calls a second do not notice, and a count never runs ahead of its data.
 */
final class Completions {
  private static final int CAPACITY = 2_000_000;
  private final long[] endNanos = new long[CAPACITY];
  private final long[] latencyMicros = new long[CAPACITY];
  private final AtomicInteger count = new AtomicInteger();
  private final AtomicReference<String> failure = new AtomicReference<>();

  /** A record ended; {@code createdAtMillis} is its Kafka timestamp (CreateTime, this machine's clock). */
  synchronized void add(long createdAtMillis) {
    long now = System.nanoTime();
    long wall = System.currentTimeMillis();
    int i = count.get();
    if (i < CAPACITY) {
      endNanos[i] = now;
      latencyMicros[i] = Math.max(0, (wall - createdAtMillis) * 1000);
    }
    count.incrementAndGet();
  }

  /** A record was escalated: in a benchmark of clean input that is a bug, and the run fails. */
  synchronized void failed(String why) {
    failure.compareAndSet(null, why);
    count.incrementAndGet();
  }

  synchronized void reset() {
    count.set(0);
  }

  void await(int n, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (count.get() < n) {
      if (failure.get() != null) {
        throw new IllegalStateException("a record was escalated: " + failure.get());
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("only " + count.get() + " of " + n + " records ended within " + timeout);
      }
      Thread.sleep(20);
    }
    if (failure.get() != null) {
      throw new IllegalStateException("a record was escalated: " + failure.get());
    }
    if (count.get() > n) {
      throw new IllegalStateException(count.get() + " records ended, expected " + n + ": something was processed twice");
    }
  }

  synchronized Stats stats() {
    int n = Math.min(count.get(), CAPACITY);
    long[] ends = Arrays.copyOf(endNanos, n);
    long[] lat = Arrays.copyOf(latencyMicros, n);
    Arrays.sort(ends);
    Arrays.sort(lat);
    double seconds = n < 2 ? Double.NaN : (ends[n - 1] - ends[0]) / 1e9;
    return new Stats(n, (n - 1) / seconds, pct(lat, 0.50), pct(lat, 0.99));
  }

  private static double pct(long[] sortedMicros, double p) {
    if (sortedMicros.length == 0) {
      return Double.NaN;
    }
    int i = (int) Math.min(sortedMicros.length - 1, Math.ceil(p * sortedMicros.length) - 1);
    return sortedMicros[Math.max(0, i)] / 1000.0;
  }
}
