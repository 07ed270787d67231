package dev.onceguard.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Per thread of a process, its time on a CPU and its time runnable but waiting for one (Linux
 * {@code /proc/<pid>/task/<tid>/schedstat}), read before and after a measured window: how much of
 * the window each thread pool spent waiting on a run queue, against the time the records' steps
 * took. Threads are grouped by name without digits (the kernel keeps 15 characters of a name).
 */
final class ThreadTimes {
  /** Per thread id, {comm, on-CPU ns, run-queue ns}. */
  private final Map<String, Object[]> threads;

  private ThreadTimes(Map<String, Object[]> threads) {
    this.threads = threads;
  }

  /** The threads of {@code pid} ({@code "self"} for this JVM) now; empty where /proc cannot be read. */
  static ThreadTimes of(String pid) {
    Map<String, Object[]> out = new HashMap<>();
    try (Stream<Path> tasks = Files.list(Path.of("/proc", pid, "task"))) {
      for (Path t : (Iterable<Path>) tasks::iterator) {
        try {
          String comm = Files.readString(t.resolve("comm")).trim();
          String[] f = Files.readString(t.resolve("schedstat")).trim().split(" ");
          out.put(t.getFileName().toString(), new Object[] {comm, Long.parseLong(f[0]), Long.parseLong(f[1])});
        } catch (IOException | RuntimeException gone) {
          // the thread ended meanwhile
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux, or not ours to read
    }
    return new ThreadTimes(out);
  }

  /**
   * Per pool, {ms on a CPU, ms waiting on a run queue} between {@code before} and this snapshot,
   * the busiest pools first (threads started meanwhile count from zero).
   */
  Map<String, double[]> since(ThreadTimes before) {
    Map<String, double[]> pools = new HashMap<>();
    threads.forEach((tid, now) -> {
      Object[] was = before.threads.get(tid);
      long run = (long) now[1] - (was == null ? 0 : (long) was[1]);
      long wait = (long) now[2] - (was == null ? 0 : (long) was[2]);
      double[] p = pools.computeIfAbsent(((String) now[0]).replaceAll("[0-9]+", ""), k -> new double[2]);
      p[0] += run / 1e6;
      p[1] += wait / 1e6;
    });
    Map<String, double[]> out = new LinkedHashMap<>();
    pools.entrySet().stream().sorted((a, b) -> Double.compare(b.getValue()[0] + b.getValue()[1], a.getValue()[0] + a.getValue()[1]))
        .forEach(e -> out.put(e.getKey(), e.getValue()));
    return out;
  }

  /**
   * The machine's pressure stall totals ({@code /proc/pressure/cpu} and {@code io}, the "some"
   * lines): µs during which at least one runnable task waited for a CPU, and for I/O; -1 where
   * the kernel does not report them.
   */
  static long[] pressure() {
    return new long[] {someTotal("cpu"), someTotal("io")};
  }

  private static long someTotal(String resource) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/pressure", resource))) {
        if (line.startsWith("some ")) {
          return Long.parseLong(line.substring(line.indexOf("total=") + 6).trim());
        }
      }
    } catch (IOException | RuntimeException e) {
      // no PSI on this kernel
    }
    return -1;
  }

  /** The pools that ran or waited at least {@code minMs}, per record: "name cpu/wait ms per record". */
  static String perRecord(Map<String, double[]> pools, int records, double minMs) {
    StringBuilder sb = new StringBuilder();
    double[] total = new double[2];
    for (Map.Entry<String, double[]> e : pools.entrySet()) {
      total[0] += e.getValue()[0];
      total[1] += e.getValue()[1];
      if (e.getValue()[0] + e.getValue()[1] >= minMs) {
        sb.append(String.format(Locale.ROOT, "%n    %-18s CPU %6.3f  run-queue wait %6.3f ms/record", e.getKey(), e.getValue()[0] / records,
            e.getValue()[1] / records));
      }
    }
    return String.format(Locale.ROOT, "all threads: CPU %.3f, run-queue wait %.3f ms/record", total[0] / records, total[1] / records) + sb;
  }

  /** {@code pools} as JSON: per pool {cpu_ms_per_record, run_queue_ms_per_record}. */
  static Map<String, Object> json(Map<String, double[]> pools, int records) {
    Map<String, Object> out = new LinkedHashMap<>();
    pools.forEach((k, v) -> out.put(k, Map.of("cpu_ms_per_record", v[0] / records, "run_queue_ms_per_record", v[1] / records)));
    return out;
  }
}
