package dev.onceguard.bench.contention;

import java.util.Arrays;

/**
 * Collects the transitions of one instance that began inside the measured window
 * {@code [measureStart, end)} ({@link System#nanoTime()}); earlier ones are warm-up. Transitions
 * that began before {@code end} are run to their end, so a slow one is never cut off. One thread.
 */
final class Recorder {
  private final long measureStart;
  private final long end;
  private long[] total = new long[1024];
  private long[] wait = new long[1024];
  private int n;
  private int metBusy;

  Recorder(long measureStartNanos, long endNanos) {
    this.measureStart = measureStartNanos;
    this.end = endNanos;
  }

  /** True while new transitions may begin. */
  boolean open(long nowNanos) {
    return nowNanos < end;
  }

  /**
   * @param startNanos when the transition began (its first attempt)
   * @param waitNanos its wait: in {@code SELECT … FOR UPDATE}, or until its claim was accepted
   */
  void add(long startNanos, long totalNanos, long waitNanos, boolean busy) {
    if (startNanos < measureStart || startNanos >= end) {
      return;
    }
    if (n == total.length) {
      total = Arrays.copyOf(total, n * 2);
      wait = Arrays.copyOf(wait, n * 2);
    }
    total[n] = totalNanos / 1000;
    wait[n] = waitNanos / 1000;
    n++;
    if (busy) {
      metBusy++;
    }
  }

  Samples samples() {
    return new Samples(Arrays.copyOf(total, n), Arrays.copyOf(wait, n), metBusy, (end - measureStart) / 1e9);
  }
}
