package dev.onceguard.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;

/**
 * Waits, before a paced window, until the machine is quiet: the work a previous run left behind
 * (MariaDB flushing and purging a dropped database, the broker deleting topics, the JIT) would
 * otherwise land in the window and be counted as the next scenario's latency. Without the wait,
 * a full run's first paced run after the throughput runs is slower for every scenario, the
 * unguarded baseline included (its p99 measured at 91-311 ms there, against 6-21 ms in the next
 * two).
 *
 * <p>Quiet means: over {@link #QUIET_WINDOWS} consecutive windows of {@link #WINDOW}, the
 * machine's CPUs were busy (user, system, I/O wait, interrupts, steal: everything but idle) less
 * than {@link #QUIET_BUSY} of the time, read from {@code /proc/stat}. The wait ends there or at
 * its limit, whichever comes first; a shared machine whose neighbours never quiet down costs the
 * limit and no more.
 */
final class Settle {
  static final Duration WINDOW = Duration.ofMillis(500);
  static final int QUIET_WINDOWS = 2;
  static final double QUIET_BUSY = 0.25;

  private Settle() {}

  /**
   * Waits at most {@code limit} for the machine to be quiet.
   *
   * @return how it ended, for the run's output: "settled in 1.5 s" or "not settled after 30 s
   *     (busy 61%)"; "" where {@code /proc/stat} cannot be read (no wait then)
   */
  static String untilQuiet(Duration limit) throws InterruptedException {
    long[] before = cpuTicks();
    if (before == null) {
      return "";
    }
    long start = System.nanoTime();
    int quiet = 0;
    double busy = 1;
    while (System.nanoTime() - start < limit.toNanos()) {
      Thread.sleep(WINDOW.toMillis());
      long[] now = cpuTicks();
      if (now == null) {
        return "";
      }
      busy = busyShare(before, now);
      before = now;
      quiet = busy < QUIET_BUSY ? quiet + 1 : 0;
      if (quiet >= QUIET_WINDOWS) {
        return String.format(Locale.ROOT, "settled in %.1f s", (System.nanoTime() - start) / 1e9);
      }
    }
    return String.format(Locale.ROOT, "not settled after %d s (busy %.0f%%)", limit.toSeconds(), busy * 100);
  }

  /** The aggregate {@code cpu} line of {@code /proc/stat}: {total ticks, idle ticks}; null if unreadable. */
  static long[] cpuTicks() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/stat"))) {
        if (line.startsWith("cpu ")) {
          return ticks(line);
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux, or no procfs
    }
    return null;
  }

  /**
   * {total, idle} of a {@code cpu} line: user nice system idle iowait irq softirq steal (guest
   * time is inside user and is not added twice). I/O wait counts as busy: a flush is what the wait
   * is for.
   */
  static long[] ticks(String cpuLine) {
    String[] f = cpuLine.trim().split("\\s+");
    long total = 0;
    for (int i = 1; i <= Math.min(8, f.length - 1); i++) {
      total += Long.parseLong(f[i]);
    }
    return new long[] {total, Long.parseLong(f[4])};
  }

  /** The share of the ticks between two readings that were not idle; 1 if none passed. */
  static double busyShare(long[] before, long[] after) {
    long total = after[0] - before[0];
    return total <= 0 ? 1 : 1 - (double) (after[1] - before[1]) / total;
  }
}
