package dev.onceguard.bench;

import dev.onceguard.proxy.guard.VerdictListener.Step;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The durations the guarded pipeline reports for its steps ({@link Step}: claim, business call,
 * confirm), kept while armed: a paced run arms it once its warm-up backlog is through, so the
 * figures belong to the same records as the run's ages. Thread-safe.
 */
final class StepTimes {
  /** The steps' names as reported, in {@link Step} order. */
  static final java.util.List<String> NAMES =
      Arrays.stream(Step.values()).map(s -> s.name().toLowerCase(java.util.Locale.ROOT)).toList();
  private final Map<Step, long[]> nanos = new EnumMap<>(Step.class);
  private final Map<Step, Integer> counts = new EnumMap<>(Step.class);
  private boolean armed;

  synchronized void arm() {
    nanos.clear();
    counts.clear();
    armed = true;
  }

  synchronized void add(Step step, long n) {
    if (!armed) {
      return;
    }
    long[] a = nanos.computeIfAbsent(step, s -> new long[1024]);
    int c = counts.getOrDefault(step, 0);
    if (c == a.length) {
      a = Arrays.copyOf(a, a.length * 2);
      nanos.put(step, a);
    }
    a[c] = n;
    counts.put(step, c + 1);
  }

  /** Stops keeping; per step in {@link Step} order, {p50, p99} in ms (steps never reported are left out). */
  synchronized Map<String, double[]> disarm() {
    armed = false;
    Map<String, double[]> out = new LinkedHashMap<>();
    for (Step s : Step.values()) {
      int c = counts.getOrDefault(s, 0);
      if (c == 0) {
        continue;
      }
      long[] a = Arrays.copyOf(nanos.get(s), c);
      Arrays.sort(a);
      out.put(NAMES.get(s.ordinal()), new double[] {pct(a, 0.50) / 1e6, pct(a, 0.99) / 1e6});
    }
    return out;
  }

  /** Nearest rank. */
  private static double pct(long[] sorted, double q) {
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
  }
}
