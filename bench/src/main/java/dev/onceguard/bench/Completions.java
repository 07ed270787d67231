package dev.onceguard.bench;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Records as they end: when (monotonic) and how long after their Kafka create timestamp; and the
 * CPU samples that bound the measured window, taken as the first record and the
 * {@linkplain #reset(int) expected} last one end. Any thread may add; {@link #await} and
 * {@link #stats} run on the bench thread. Synchronised: a few ten thousand calls a second do not
 * notice, and a count never runs ahead of its data.
 */
final class Completions {
  private static final int CAPACITY = 2_000_000;
  private final CpuMeter cpu;
  private final long[] endNanos = new long[CAPACITY];
  private final long[] latencyMicros = new long[CAPACITY];
  private final AtomicInteger count = new AtomicInteger();
  private final AtomicReference<String> failure = new AtomicReference<>();
  private int expected = Integer.MAX_VALUE;
  private CpuMeter.Sample first;
  private CpuMeter.Sample last;
  private final Map<String, Integer> layers = new TreeMap<>();
  /** Set by {@link #begin()}: the window starts when the work starts, not when the first record ends. */
  private long beganNanos = -1;

  Completions(CpuMeter cpu) {
    this.cpu = cpu;
  }

  /** A record ended; {@code createdAtMillis} is its Kafka timestamp (CreateTime, this machine's clock). */
  void add(long createdAtMillis) {
    add(createdAtMillis, null);
  }

  /** A guarded record ended, answered by {@code layer} (the verdict's). */
  synchronized void add(long createdAtMillis, String layer) {
    long now = System.nanoTime();
    long wall = System.currentTimeMillis();
    int i = count.get();
    if (i == 0 && beganNanos < 0) {
      first = cpu.sample();
    }
    if (i < CAPACITY) {
      endNanos[i] = now;
      latencyMicros[i] = Math.max(0, (wall - createdAtMillis) * 1000);
    }
    if (layer != null) {
      layers.merge(layer, 1, Integer::sum);
    }
    count.incrementAndGet();
    if (i + 1 == expected) {
      last = cpu.sample();
    }
  }

  /**
   * The consumer took its first records: the window starts here. For a consumer that ends records
   * a poll batch at a time, where counting from the first end would leave the first batch's work
   * out of the window. Only the first call counts.
   */
  synchronized void begin() {
    if (beganNanos < 0 && count.get() == 0) {
      beganNanos = System.nanoTime();
      first = cpu.sample();
    }
  }

  /** A record was escalated: in a benchmark of clean input that is a bug, and the run fails. */
  synchronized void failed(String why) {
    failure.compareAndSet(null, why);
    count.incrementAndGet();
  }

  /** Starts a new window that ends with the {@code expected}-th record. */
  synchronized void reset(int expected) {
    count.set(0);
    this.expected = expected;
    first = null;
    last = null;
    beganNanos = -1;
    layers.clear();
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

  /**
   * The window so far: from {@link #begin()}, or else from the first record's end (which then
   * does not count: rate and CPU per record are over the records after it).
   */
  synchronized Stats stats() {
    int n = Math.min(count.get(), CAPACITY);
    long[] ends = Arrays.copyOf(endNanos, n);
    long[] lat = Arrays.copyOf(latencyMicros, n);
    Arrays.sort(ends);
    Arrays.sort(lat);
    // from the first end, the first record is the window's start, not one of its records
    boolean began = beganNanos >= 0;
    int inWindow = began ? n : n - 1;
    double seconds = n < 2 ? Double.NaN : (ends[n - 1] - (began ? beganNanos : ends[0])) / 1e9;
    double[] latMs = new double[n];
    for (int i = 0; i < n; i++) {
      latMs[i] = lat[i] / 1000.0;
    }
    boolean window = first != null && last != null;
    return new Stats(n, inWindow / seconds, pct(latMs, 0.50), pct(latMs, 0.99),
        window ? cpu.jvmMsPerRecord(first, last, inWindow) : null, window ? cpu.jitMsPerRecord(first, last, inWindow) : null,
        window ? cpu.dbMsPerRecord(first, last, inWindow) : null, latMs,
        Map.copyOf(layers), null, null, null, null);
  }

  /** The {@code p} quantile of ascending values (nearest rank), NaN for none. */
  static double pct(double[] sorted, double p) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int i = (int) Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1);
    return sorted[Math.max(0, i)];
  }
}
