package dev.onceguard.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * The run's figures: per scenario the medians over its repeats, the FOR UPDATE vs CAS microbenchmark's rows
 * (as it wrote them) and the sidecar's RSS. {@link #writeJson} writes:
 * {@code {"scenarios": {NAME: {rec_per_s, ratio_vs_baseline, jvm_cpu_ms_per_record,
 * db_cpu_ms_per_record, p50_ms, p99_ms, paced_windows: [{p99_ms, slowest_ack_ms,
 * jvm_cpu_ms_per_record, jit_cpu_ms_per_record, and for the packaged sidecar
 * sidecar_process_cpu_ms_per_record, sidecar_process_jit_ms_per_record}]}}, "seed": [...],
 * "rss_mb": {idle, load}}}, plus
 * {@code "scale": [{instances, rtt_ms, rec_per_s, p50_ms, p99_ms}]}, and with {@code --trace}
 * {@code "timeline"} ({@link Timelines#json}); values that were not measured are null.
 */
final class Results {
  private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  /**
   * One scenario's medians; {@code runs} keeps the per-repeat figures for the page.
   * {@code p50Business}/{@code p99Business}: a guarded in-process scenario's paced ages when the
   * business received the records (null for the others).
   */
  record Row(Scenario scenario, Double recPerS, Double ratio, Double jvmCpu, Double jitCpu, Double dbCpu, Double p50, Double p99,
      Double p50Business, Double p99Business, List<Stats> runs, List<Stats> pacedRuns) {
    /**
     * Per step the guarded pipeline reports (claim, handle, confirm), the medians over the paced
     * runs of its {p50, p99} in ms; empty for a scenario without them.
     */
    Map<String, double[]> steps() {
      Map<String, double[]> out = new LinkedHashMap<>();
      for (String step : StepTimes.NAMES) {
        if (pacedRuns.stream().anyMatch(st -> st.steps() != null && st.steps().containsKey(step))) {
          out.put(step, new double[] {stepMedian(step, 0), stepMedian(step, 1)});
        }
      }
      return out;
    }

    private double stepMedian(String step, int i) {
      return Bench.median(pacedRuns.stream().filter(st -> st.steps() != null && st.steps().containsKey(step))
          .mapToDouble(st -> st.steps().get(step)[i]));
    }
  }

  final Bench.RunInfo info;
  final Map<Scenario, Row> rows;
  final int pacedRate;
  final SidecarRss.Result rss;
  final JsonNode seed;
  final boolean seedPresent;
  final List<Bench.ScaleCell> scale;
  final Paced low;
  /** The traced runs' breakdown ({@code --trace}): as JSON, and as Markdown for the page; null when not traced. */
  Map<String, Object> timeline;
  String timelineMarkdown;

  /** Sets the traced runs' breakdown ({@link Timelines}). */
  void timeline(Map<String, Object> json, String markdown) {
    this.timeline = json;
    this.timelineMarkdown = markdown;
  }

  /** A partial run's breakdown alone, as {@code {"timeline": ...}}. */
  static void writeTimeline(Path path, Map<String, Object> timeline) throws IOException {
    JSON.writeValue(path.toFile(), Map.of("timeline", timeline));
  }

  /** The paced runs at one fixed rate, per scenario. */
  record Paced(int rate, Map<Scenario, List<Stats>> runs) {
    List<Stats> of(Scenario s) {
      return runs.getOrDefault(s, List.of());
    }

    Double p50(Scenario s) {
      return median(of(s), Stats::p50);
    }

    Double p99(Scenario s) {
      return median(of(s), Stats::p99);
    }

    /** Median p50 age at the business of a guarded in-process scenario, null for the others. */
    Double p50Business(Scenario s) {
      return median(of(s), Stats::businessP50);
    }

    /** Median p99 age at the business of a guarded in-process scenario, null for the others. */
    Double p99Business(Scenario s) {
      return median(of(s), Stats::businessP99);
    }
  }

  private Results(Bench.RunInfo info, Map<Scenario, Row> rows, int pacedRate, SidecarRss.Result rss, JsonNode seed, boolean seedPresent,
      List<Bench.ScaleCell> scale, Paced low) {
    this.scale = List.copyOf(scale);
    this.low = low;
    this.info = info;
    this.rows = rows;
    this.pacedRate = pacedRate;
    this.rss = rss;
    this.seed = seed;
    this.seedPresent = seedPresent;
  }

  static Results of(Bench.RunInfo info, Map<Scenario, List<Stats>> throughput, Map<Scenario, List<Stats>> paced, int rate,
      SidecarRss.Result rss, Path seedJson, List<Bench.ScaleCell> scale, Paced low) throws IOException {
    Double base = median(throughput.get(Scenario.BASELINE), Stats::throughput);
    Map<Scenario, Row> rows = new LinkedHashMap<>();
    for (Scenario s : Scenario.values()) {
      List<Stats> runs = throughput.getOrDefault(s, List.of());
      List<Stats> p = paced.getOrDefault(s, List.of());
      Double tp = median(runs, Stats::throughput);
      rows.put(s, new Row(s, tp, tp == null || base == null ? null : tp / base, median(runs, Stats::jvmCpuMsPerRecord),
          median(runs, Stats::jitCpuMsPerRecord), median(runs, Stats::dbCpuMsPerRecord), median(p, Stats::p50), median(p, Stats::p99),
          median(p, Stats::businessP50),
          median(p, Stats::businessP99), runs, p));
    }
    JsonNode seed = JSON.createArrayNode();
    boolean present = false;
    if (Files.isRegularFile(seedJson)) {
      JsonNode n = JSON.readTree(seedJson.toFile());
      if (n != null && n.isArray()) {
        seed = n;
        present = true;
      } else {
        System.err.println(seedJson + " is not a JSON array: not merged");
      }
    }
    return new Results(info, rows, rate, rss, seed, present, scale, low);
  }

  /**
   * Each paced run's {@code {p99_ms, slowest_ack_ms, jvm_cpu_ms_per_record, jit_cpu_ms_per_record}},
   * in run order: the slowest acknowledgement of its records (send to callback) beside the age it
   * is part of, and this JVM's CPU per record and its JIT compilers' part; for the packaged process
   * also {@code sidecar_process_cpu_ms_per_record, sidecar_process_jit_ms_per_record}. Null
   * without paced runs.
   */
  static List<Map<String, Object>> windows(List<Stats> runs) {
    if (runs.isEmpty()) {
      return null;
    }
    List<Map<String, Object>> out = new ArrayList<>();
    for (Stats st : runs) {
      Map<String, Object> w = new LinkedHashMap<>();
      w.put("p99_ms", round(st.p99(), 2));
      w.put("slowest_ack_ms", round(st.slowestAck(), 2));
      w.put("jvm_cpu_ms_per_record", round(st.jvmCpuMsPerRecord(), 4));
      w.put("jit_cpu_ms_per_record", round(st.jitCpuMsPerRecord(), 4));
      if (st.sidecarCpu() != null) {
        w.put("sidecar_process_cpu_ms_per_record", round(st.sidecarCpu().msPerRecord(), 4));
        w.put("sidecar_process_jit_ms_per_record", round(st.sidecarCpu().jitMsPerRecord(), 4));
      }
      out.add(w);
    }
    return out;
  }

  /** Median of the non-null, finite values, or null when there are none. */
  static Double median(List<Stats> runs, Function<Stats, ? extends Number> f) {
    double m = Bench.median(runs.stream().map(f).filter(Objects::nonNull).mapToDouble(Number::doubleValue)
        .filter(Double::isFinite));
    return Double.isNaN(m) ? null : m;
  }

  void writeJson(Path path) throws IOException {
    Map<String, Object> scenarios = new LinkedHashMap<>();
    for (Row r : rows.values()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("rec_per_s", round(r.recPerS(), 1));
      m.put("ratio_vs_baseline", round(r.ratio(), 3));
      m.put("jvm_cpu_ms_per_record", round(r.jvmCpu(), 4));
      m.put("db_cpu_ms_per_record", round(r.dbCpu(), 4));
      m.put("p50_ms", round(r.p50(), 2));
      m.put("p99_ms", round(r.p99(), 2));
      m.put("p50_business_ms", round(r.p50Business(), 2));
      m.put("p99_business_ms", round(r.p99Business(), 2));
      Map<String, Object> steps = new LinkedHashMap<>();
      r.steps().forEach((step, q) -> {
        Map<String, Object> t = new LinkedHashMap<>();
        t.put("p50_ms", round(q[0], 2));
        t.put("p99_ms", round(q[1], 2));
        steps.put(step, t);
      });
      m.put("steps", steps.isEmpty() ? null : steps);
      m.put("paced_windows", windows(r.pacedRuns()));
      scenarios.put(r.scenario().id, m);
    }
    Map<String, Object> rssMb = new LinkedHashMap<>();
    rssMb.put("idle", rss == null ? null : round(rss.idleMb(), 1));
    rssMb.put("load", rss == null ? null : round(rss.loadMb(), 1));
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("scenarios", scenarios);
    root.put("seed", seed);
    root.put("rss_mb", rssMb);
    List<Map<String, Object>> cells = new ArrayList<>();
    for (Bench.ScaleCell c : scale) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("instances", c.instances());
      m.put("rtt_ms", c.rttMs());
      m.put("rec_per_s", round(c.recPerS(), 1));
      m.put("p50_ms", round(c.p50Ms(), 2));
      m.put("p99_ms", round(c.p99Ms(), 2));
      cells.add(m);
    }
    root.put("scale", cells);
    Map<String, Object> lowScenarios = new LinkedHashMap<>();
    for (Scenario s : low.runs().keySet()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("p50_ms", round(low.p50(s), 2));
      m.put("p99_ms", round(low.p99(s), 2));
      m.put("paced_windows", windows(low.of(s)));
      lowScenarios.put(s.id, m);
    }
    Map<String, Object> lowNode = new LinkedHashMap<>();
    lowNode.put("rate", low.rate());
    lowNode.put("scenarios", lowScenarios);
    root.put("paced_low", lowNode);
    root.put("age_vs_baseline", ageVsBaseline());
    if (timeline != null) {
      root.put("timeline", timeline);
    }
    Path parent = path.toAbsolutePath().getParent();
    Files.createDirectories(parent);
    JSON.writeValue(path.toFile(), root);
  }

  /**
   * {@code guard_machine} against {@code baseline} at the same rate, and the packaged process against
   * the in-process sidecar, both up to the business's receipt (the process's records end there):
   * {@code {"r100": {p50_diff_ms, p99_diff_ms, process_p99_ratio}, "half_max": {p99_ratio}, "process_p99_ratio"}}
   * ({@code r<low rate>}; the top-level process ratio is at half the maximum); null where a side was
   * not measured.
   */
  Map<String, Object> ageVsBaseline() {
    Map<String, Object> lowDiff = new LinkedHashMap<>();
    lowDiff.put("p50_diff_ms", round(diff(low.p50(Scenario.GUARD_MACHINE), low.p50(Scenario.BASELINE)), 2));
    lowDiff.put("p99_diff_ms", round(diff(low.p99(Scenario.GUARD_MACHINE), low.p99(Scenario.BASELINE)), 2));
    Map<String, Object> half = new LinkedHashMap<>();
    half.put("p99_ratio", round(ratio(rows.get(Scenario.GUARD_MACHINE).p99(), rows.get(Scenario.BASELINE).p99()), 3));
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("r" + low.rate(), lowDiff);
    out.put("half_max", half);
    // the packaged process's records end at the business, so the in-process side is its age there too
    out.put("process_p99_ratio",
        round(ratio(rows.get(Scenario.GUARD_MACHINE_PROCESS).p99(), rows.get(Scenario.GUARD_MACHINE).p99Business()), 3));
    lowDiff.put("process_p99_ratio", round(ratio(low.p99(Scenario.GUARD_MACHINE_PROCESS), low.p99Business(Scenario.GUARD_MACHINE)), 3));
    return out;
  }

  static Double diff(Double a, Double b) {
    return a == null || b == null ? null : a - b;
  }

  static Double ratio(Double a, Double b) {
    return a == null || b == null || b == 0 ? null : a / b;
  }

  static Double round(Double v, int digits) {
    if (v == null || !Double.isFinite(v)) {
      return null;
    }
    double f = Math.pow(10, digits);
    return Math.round(v * f) / f;
  }

  /** The seed rows as plain maps (field order as written). */
  List<Map<String, Object>> seedRows() {
    List<Map<String, Object>> out = new ArrayList<>();
    for (JsonNode n : seed) {
      out.add(JSON.convertValue(n, JSON.getTypeFactory().constructMapType(LinkedHashMap.class, String.class, Object.class)));
    }
    return out;
  }

  void print() {
    System.out.printf(Locale.ROOT, "%nMedians (%d throughput runs per scenario; paced at %d rec/s)%n",
        rows.get(Scenario.BASELINE).runs().size(), pacedRate);
    System.out.printf(Locale.ROOT, "%-22s %10s %9s %12s %12s %9s %9s%n", "scenario", "rec/s", "vs base", "JVM ms/rec", "DB ms/rec",
        "p50 ms", "p99 ms");
    for (Row r : rows.values()) {
      System.out.printf(Locale.ROOT, "%-22s %10s %9s %12s %12s %9s %9s%n", r.scenario().id, fmt(r.recPerS(), 0), fmt(r.ratio(), 2),
          fmt(r.jvmCpu(), 3), fmt(r.dbCpu(), 3), fmt(r.p50(), 1), fmt(r.p99(), 1));
    }
  }

  static String fmt(Double v, int digits) {
    return v == null || !Double.isFinite(v) ? "–" : String.format(Locale.ROOT, "%,." + digits + "f", v);
  }
}
