package dev.onceguard.bench;

import dev.onceguard.proxy.trace.RecordTimeline;
import dev.onceguard.proxy.trace.RecordTimeline.Trace;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The record timelines of the traced paced runs ({@code --trace}), per scenario: each run's
 * breakdown printed as it ends, and the runs of a scenario pooled for {@code results.json}'s
 * {@code "timeline"} and the page. Beside them, the run-queue wait of this JVM's and MariaDB's
 * thread pools over the same windows ({@link ThreadTimes}). Not thread-safe: the benchmark's main
 * thread only.
 */
final class Timelines {
  /** Records followed per run at most (a paced run's records plus margin). */
  static final int CAPACITY = 200_000;

  final int rate;
  private final long dbPid;
  /** Where each run's raw timelines go as CSV ({@link #csv}); null: nowhere. */
  private final java.nio.file.Path dump;
  private final Map<Scenario, List<Trace>> traces = new EnumMap<>(Scenario.class);
  private final Map<Scenario, List<double[]>> runs = new EnumMap<>(Scenario.class);
  private final Map<Scenario, Map<String, double[]>> jvmPools = new EnumMap<>(Scenario.class);
  private final Map<Scenario, Map<String, double[]>> dbPools = new EnumMap<>(Scenario.class);
  /** Per scenario, its runs' {CPU, I/O} pressure: the share of the window some task waited (%). */
  private final Map<Scenario, List<double[]>> pressure = new EnumMap<>(Scenario.class);
  private long[] pressureBefore;
  private long startedNanos;
  private ThreadTimes jvmBefore;
  private ThreadTimes dbBefore;

  /** @param dump the directory for each run's raw timelines, {@code <scenario>-<run>.csv}; null for none */
  Timelines(int rate, long dbPid, java.nio.file.Path dump) {
    this.rate = rate;
    this.dbPid = dbPid;
    this.dump = dump;
  }

  /** The measured window begins: records polled from now on are followed. */
  void start() {
    jvmBefore = ThreadTimes.of("self");
    pressureBefore = ThreadTimes.pressure();
    startedNanos = System.nanoTime();
    dbBefore = dbPid > 0 ? ThreadTimes.of(Long.toString(dbPid)) : null;
    RecordTimeline.start(CAPACITY, true);
  }

  /** The window ends (or failed: {@code s} null keeps nothing); prints the run's breakdown. */
  void stop(Scenario s, int records) {
    List<Trace> got = RecordTimeline.stop();
    if (s == null) {
      return;
    }
    long windowMicros = Math.max(1, (System.nanoTime() - startedNanos) / 1000);
    long[] p = ThreadTimes.pressure();
    double[] pct = {p[0] < 0 ? Double.NaN : 100.0 * (p[0] - pressureBefore[0]) / windowMicros,
        p[1] < 0 ? Double.NaN : 100.0 * (p[1] - pressureBefore[1]) / windowMicros};
    pressure.computeIfAbsent(s, k -> new ArrayList<>()).add(pct);
    Map<String, double[]> jvm = ThreadTimes.of("self").since(jvmBefore);
    Map<String, double[]> db = dbBefore == null ? Map.of() : ThreadTimes.of(Long.toString(dbPid)).since(dbBefore);
    traces.computeIfAbsent(s, k -> new ArrayList<>()).addAll(got);
    merge(jvmPools.computeIfAbsent(s, k -> new LinkedHashMap<>()), jvm);
    merge(dbPools.computeIfAbsent(s, k -> new LinkedHashMap<>()), db);
    if (dump != null) {
      java.nio.file.Path file = dump.resolve(s.id + "-" + (runs.getOrDefault(s, List.of()).size() + 1) + ".csv");
      try {
        java.nio.file.Files.createDirectories(dump);
        java.nio.file.Files.writeString(file, csv(got));
      } catch (java.io.IOException e) {
        System.err.println("timelines not written to " + file + ": " + e);
      }
    }
    TimeBreakdown.Result r = TimeBreakdown.of(got);
    if (r == null) {
      System.out.printf(Locale.ROOT, "  timeline %s: no record ended while followed%n", s.id);
      return;
    }
    runs.computeIfAbsent(s, k -> new ArrayList<>()).add(new double[] {r.p50AgeMs(), r.p99AgeMs(), records});
    System.out.printf(Locale.ROOT, "  timeline %s: %d records, age p50 %.1f / p99 %.1f ms; some task waited for a CPU %.0f%% and for I/O %.0f%%"
        + " of the window (PSI); this JVM %s%n", s.id, r.records(), r.p50AgeMs(), r.p99AgeMs(), pct[0], pct[1],
        ThreadTimes.perRecord(jvm, Math.max(1, records), 0.02 * records));
    if (!db.isEmpty()) {
      System.out.printf(Locale.ROOT, "    MariaDB %s%n", ThreadTimes.perRecord(db, Math.max(1, records), 0.02 * records));
    }
  }

  private static void merge(Map<String, double[]> into, Map<String, double[]> add) {
    add.forEach((k, v) -> {
      double[] t = into.computeIfAbsent(k, x -> new double[2]);
      t[0] += v[0];
      t[1] += v[1];
    });
  }

  /**
   * One line per record: its offset, created and polled (epoch ms), repeats; per {@link RecordTimeline.Mark}
   * its time in µs after the record's POLLED mark (empty: not passed) and its thread; per
   * {@link RecordTimeline.Count} the count (-1: not seen).
   */
  static String csv(List<Trace> traces) {
    StringBuilder sb = new StringBuilder("partition,offset,created_ms,polled_ms,repeats");
    for (RecordTimeline.Mark m : RecordTimeline.Mark.values()) {
      sb.append(',').append(TimeBreakdown.name(m)).append("_us,").append(TimeBreakdown.name(m)).append("_thread");
    }
    for (RecordTimeline.Count c : RecordTimeline.Count.values()) {
      sb.append(',').append(c.name().toLowerCase(Locale.ROOT));
    }
    sb.append('\n');
    for (Trace t : traces) {
      sb.append(t.key().partition()).append(',').append(t.key().offset()).append(',').append(t.createdMillis()).append(',')
          .append(t.polledMillis()).append(',').append(t.repeats());
      long base = t.at(RecordTimeline.Mark.POLLED);
      for (RecordTimeline.Mark m : RecordTimeline.Mark.values()) {
        sb.append(',').append(t.has(m) ? Long.toString((t.at(m) - base) / 1000) : "").append(',')
            .append(t.has(m) ? t.thread(m) : "");
      }
      for (int c : t.counts()) {
        sb.append(',').append(c);
      }
      sb.append('\n');
    }
    return sb.toString();
  }

  boolean isEmpty() {
    return traces.isEmpty();
  }

  /** Per scenario, its runs pooled. */
  Map<Scenario, TimeBreakdown.Result> pooled() {
    Map<Scenario, TimeBreakdown.Result> out = new EnumMap<>(Scenario.class);
    traces.forEach((s, t) -> {
      TimeBreakdown.Result r = TimeBreakdown.of(t);
      if (r != null) {
        out.put(s, r);
      }
    });
    return out;
  }

  /**
   * {@code "timeline"}: {@code {rate, scenarios: {NAME: {breakdown of the pooled runs, runs: [{p50_age_ms, p99_age_ms}],
   * threads: {jvm, mariadb}}}}}.
   */
  Map<String, Object> json() {
    Map<String, Object> scenarios = new LinkedHashMap<>();
    pooled().forEach((s, r) -> {
      Map<String, Object> m = r.json();
      List<Map<String, Object>> rs = new ArrayList<>();
      int records = 0;
      for (double[] run : runs.getOrDefault(s, List.of())) {
        rs.add(Map.of("p50_age_ms", run[0], "p99_age_ms", run[1]));
        records += (int) run[2];
      }
      m.put("runs", rs);
      List<double[]> ps = pressure.getOrDefault(s, List.of());
      m.put("pressure_pct", Map.of("cpu_some", Bench.median(ps.stream().mapToDouble(x -> x[0])), "io_some",
          Bench.median(ps.stream().mapToDouble(x -> x[1]))));
      int n = Math.max(1, records);
      m.put("threads", Map.of("jvm", ThreadTimes.json(jvmPools.getOrDefault(s, Map.of()), n), "mariadb",
          ThreadTimes.json(dbPools.getOrDefault(s, Map.of()), n)));
      scenarios.put(s.id, m);
    });
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("rate", rate);
    out.put("scenarios", scenarios);
    return out;
  }

  /** Each scenario's pooled breakdown as Markdown. */
  String markdown() {
    StringBuilder sb = new StringBuilder();
    pooled().forEach((s, r) -> {
      List<double[]> ps = pressure.getOrDefault(s, List.of());
      sb.append(TimeBreakdown.markdown(String.format(Locale.ROOT, "**%s** at %d rec/s, %d run(s) pooled (some task waited for a CPU %.0f%% and"
          + " for I/O %.0f%% of the time, PSI medians)", s.id, rate, runs.getOrDefault(s, List.of()).size(),
          Bench.median(ps.stream().mapToDouble(x -> x[0])), Bench.median(ps.stream().mapToDouble(x -> x[1]))), r)).append('\n');
    });
    return sb.toString();
  }
}
