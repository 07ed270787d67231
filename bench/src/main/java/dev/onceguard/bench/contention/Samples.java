package dev.onceguard.bench.contention;

import java.util.Arrays;

/**
 * What one instance measured in one cell: per transition, its whole latency and its wait (the time
 * in {@code SELECT … FOR UPDATE}, or from the first claim attempt until the claim was accepted),
 * in microseconds, and how many transitions found their entity busy at least once. Only
 * transitions that began inside the measured window are kept.
 */
record Samples(long[] totalMicros, long[] waitMicros, int metBusy, double seconds) {

  int count() {
    return totalMicros.length;
  }

  /** Several instances' samples of the same window as one. */
  static Samples merge(Iterable<Samples> parts) {
    long[] total = new long[0];
    long[] wait = new long[0];
    int busy = 0;
    double seconds = 0;
    for (Samples s : parts) {
      total = concat(total, s.totalMicros);
      wait = concat(wait, s.waitMicros);
      busy += s.metBusy;
      seconds = Math.max(seconds, s.seconds);
    }
    return new Samples(total, wait, busy, seconds);
  }

  private static long[] concat(long[] a, long[] b) {
    long[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  /** The figures of the table: nearest-rank percentiles in milliseconds. */
  Figures figures() {
    long[] t = totalMicros.clone();
    long[] w = waitMicros.clone();
    Arrays.sort(t);
    Arrays.sort(w);
    int n = t.length;
    return new Figures(n, seconds > 0 ? n / seconds : 0, percentileMs(t, 0.50), percentileMs(t, 0.99), percentileMs(w, 0.50),
        percentileMs(w, 0.99), n == 0 ? 0 : (double) metBusy / n);
  }

  /** Nearest rank: the smallest value with at least {@code q} of the values at or below it; NaN if none. */
  static double percentileMs(long[] sortedMicros, double q) {
    if (sortedMicros.length == 0) {
      return Double.NaN;
    }
    int i = (int) Math.ceil(q * sortedMicros.length) - 1;
    return sortedMicros[Math.max(0, Math.min(sortedMicros.length - 1, i))] / 1000.0;
  }
}
