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
  private final Map<Scenario, List<Trace>> traces = new EnumMap<>(Scenario.class);
  private final Map<Scenario, List<double[]>> runs = new EnumMap<>(Scenario.class);
  private final Map<Scenario, Map<String, double[]>> jvmPools = new EnumMap<>(Scenario.class);
  private final Map<Scenario, Map<String, double[]>> dbPools = new EnumMap<>(Scenario.class);
  private ThreadTimes jvmBefore;
  private ThreadTimes dbBefore;

  Timelines(int rate, long dbPid) {
    this.rate = rate;
    this.dbPid = dbPid;
  }

  /** The measured window begins: records polled from now on are followed. */
  void start() {
    jvmBefore = ThreadTimes.of("self");
    dbBefore = dbPid > 0 ? ThreadTimes.of(Long.toString(dbPid)) : null;
    RecordTimeline.start(CAPACITY, true);
  }

  /** The window ends (or failed: {@code s} null keeps nothing); prints the run's breakdown. */
  void stop(Scenario s, int records) {
    List<Trace> got = RecordTimeline.stop();
    if (s == null) {
      return;
    }
    Map<String, double[]> jvm = ThreadTimes.of("self").since(jvmBefore);
    Map<String, double[]> db = dbBefore == null ? Map.of() : ThreadTimes.of(Long.toString(dbPid)).since(dbBefore);
    traces.computeIfAbsent(s, k -> new ArrayList<>()).addAll(got);
    merge(jvmPools.computeIfAbsent(s, k -> new LinkedHashMap<>()), jvm);
    merge(dbPools.computeIfAbsent(s, k -> new LinkedHashMap<>()), db);
    TimeBreakdown.Result r = TimeBreakdown.of(got);
    if (r == null) {
      System.out.printf(Locale.ROOT, "  timeline %s: no record ended while followed%n", s.id);
      return;
    }
    runs.computeIfAbsent(s, k -> new ArrayList<>()).add(new double[] {r.p50AgeMs(), r.p99AgeMs(), records});
    System.out.printf(Locale.ROOT, "  timeline %s: %d records, age p50 %.1f / p99 %.1f ms; this JVM %s%n", s.id, r.records(), r.p50AgeMs(),
        r.p99AgeMs(), ThreadTimes.perRecord(jvm, Math.max(1, records), 0.02 * records));
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
    pooled().forEach((s, r) -> sb.append(TimeBreakdown.markdown("**" + s.id + "** at " + rate + " rec/s, " + runs.getOrDefault(s, List.of()).size()
        + " run(s) pooled", r)).append('\n'));
    return sb.toString();
  }
}
