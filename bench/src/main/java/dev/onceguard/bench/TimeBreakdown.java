package dev.onceguard.bench;

import dev.onceguard.proxy.trace.RecordTimeline.Count;
import dev.onceguard.proxy.trace.RecordTimeline.Mark;
import dev.onceguard.proxy.trace.RecordTimeline.Trace;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Where a paced run's record age goes: the records' timelines ({@link Trace}) cut into segments,
 * one per step boundary a record passed, and the segments of the records at or above the run's
 * p99 age set against those of the median records (ranks 45–55% by age). Pure: no I/O.
 *
 * <p>A segment runs from the previous mark the record passed to the segment's own mark, so the
 * segments of a record add up to its age whatever marks it skipped (an L1 hit has no claim; the
 * unguarded pipeline has no store steps at all). The first segment, before the poll thread took
 * the record, is the producer's timestamp to the wall clock at the poll (millisecond clocks); the
 * rest are {@link System#nanoTime()} differences. A segment whose two marks were stamped on one
 * thread also has that thread's run-queue wait inside it, when the timeline read schedstat.
 */
final class TimeBreakdown {
  /** The segment before the first mark. */
  static final String BEFORE_POLL = "before_poll";

  /** Each segment's name (its end mark's, lower case) and what it is. */
  static final Map<String, String> LABELS = labels();

  private static Map<String, String> labels() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put(BEFORE_POLL, "produced to taken by the poll thread (poll cadence)");
    m.put("launched", "poll thread: taken to launched (poll loop, key order)");
    m.put("l1_start", "launched to L1 asked (extract)");
    m.put("l1_end", "L1 (Redis round trip)");
    m.put("claim_submit", "L1 answer to claim submitted");
    m.put("claim_group", "claim: wait for a group slot");
    m.put("claim_work", "claim: wait for a connection thread");
    m.put("claim_statements", "claim: statements");
    m.put("claim_commit", "claim: COMMIT");
    m.put("claim_back", "claim: hand-off to the record's context");
    m.put("call_start", "to the business call");
    m.put("call_end", "business call");
    m.put("call_back", "call: hand-off to the record's context");
    m.put("confirm_submit", "to confirm submitted");
    m.put("confirm_group", "confirm: wait for a group slot");
    m.put("confirm_work", "confirm: wait for a connection thread");
    m.put("confirm_statements", "confirm: statements");
    m.put("confirm_commit", "confirm: COMMIT");
    m.put("confirm_back", "confirm: hand-off to the record's context");
    m.put("verdict", "to the verdict");
    return m;
  }

  static String name(Mark m) {
    return m.name().toLowerCase(Locale.ROOT);
  }

  /**
   * One record cut into segments.
   *
   * @param segments ms per segment name, in the order passed
   * @param runQueue ms its thread waited on a run queue inside a segment, for the segments known
   * @param threads the thread that stamped the segment's end (digits dropped: one name per pool)
   * @param hops the thread changes between consecutive marks
   * @param counts per {@link Count} what the record saw (-1: not seen)
   */
  record Cut(double ageMs, Map<String, Double> segments, Map<String, Double> runQueue, Map<String, String> threads, int hops, int[] counts) {}

  /**
   * {@code t} cut into segments; null when the record did not end while it was followed (no
   * verdict, and no business answer for an unguarded record).
   */
  static Cut cut(Trace t) {
    if (!t.has(Mark.POLLED) || !(t.has(Mark.VERDICT) || t.has(Mark.CALL_END))) {
      return null;
    }
    Mark end = t.has(Mark.VERDICT) ? Mark.VERDICT : Mark.CALL_END;
    Map<String, Double> seg = new LinkedHashMap<>();
    Map<String, Double> rq = new HashMap<>();
    Map<String, String> threads = new HashMap<>();
    double before = t.polledMillis() - t.createdMillis();
    seg.put(BEFORE_POLL, before);
    threads.put(BEFORE_POLL, pool(t.thread(Mark.POLLED)));
    Mark prev = Mark.POLLED;
    int hops = 0;
    for (Mark m : Mark.values()) {
      if (m.ordinal() <= Mark.POLLED.ordinal() || !t.has(m) || m.ordinal() > end.ordinal()) {
        continue;
      }
      String n = name(m);
      seg.put(n, (t.at(m) - t.at(prev)) / 1e6);
      threads.put(n, pool(t.thread(m)));
      boolean sameThread = t.thread(m) != null && t.thread(m).equals(t.thread(prev));
      if (!sameThread) {
        hops++;
      } else if (t.waited()[m.ordinal()] >= 0 && t.waited()[prev.ordinal()] >= 0) {
        rq.put(n, (t.waited()[m.ordinal()] - t.waited()[prev.ordinal()]) / 1e6);
      }
      prev = m;
    }
    double age = before + (t.at(end) - t.at(Mark.POLLED)) / 1e6;
    return new Cut(age, seg, rq, threads, hops, t.counts().clone());
  }

  /** A thread's pool: its name without digits ({@code onceguard-mysql-3} is {@code onceguard-mysql-}). */
  static String pool(String thread) {
    return thread == null ? null : thread.replaceAll("[0-9]+", "");
  }

  /** A segment's figures in the median records and in the p99 records. */
  record Row(String segment, String label, double medianMean, double medianP50, double tailMean, double tailP50, double tailRunQueueMean,
      String tailThread, int tailPassed) {}

  /**
   * The breakdown of one run (or of several pooled).
   *
   * @param rows one per segment any record passed, in pipeline order
   * @param counts per {@link Count} name, {median records' mean, p99 records' mean} (records that saw it)
   * @param hops {median records' mean, p99 records' mean}
   */
  record Result(int records, double p50AgeMs, double p99AgeMs, int medianRecords, int tailRecords, List<Row> rows,
      Map<String, double[]> counts, double[] hops) {
    Map<String, Object> json() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("records", records);
      m.put("p50_age_ms", round(p50AgeMs));
      m.put("p99_age_ms", round(p99AgeMs));
      m.put("median_records", medianRecords);
      m.put("p99_records", tailRecords);
      m.put("hops", Map.of("median", round(hops[0]), "p99", round(hops[1])));
      Map<String, Object> segs = new LinkedHashMap<>();
      for (Row r : rows) {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("label", r.label());
        s.put("median_mean_ms", round(r.medianMean()));
        s.put("median_p50_ms", round(r.medianP50()));
        s.put("p99_mean_ms", round(r.tailMean()));
        s.put("p99_p50_ms", round(r.tailP50()));
        s.put("p99_run_queue_ms", round(r.tailRunQueueMean()));
        s.put("p99_thread", r.tailThread());
        s.put("p99_passed", r.tailPassed());
        segs.put(r.segment(), s);
      }
      m.put("segments", segs);
      Map<String, Object> c = new LinkedHashMap<>();
      counts.forEach((k, v) -> c.put(k, Map.of("median", round(v[0]), "p99", round(v[1]))));
      m.put("counts", c);
      return m;
    }
  }

  /** The breakdown of {@code traces}; null when no record ended. */
  static Result of(List<Trace> traces) {
    List<Cut> cuts = new ArrayList<>();
    for (Trace t : traces) {
      Cut c = cut(t);
      if (c != null) {
        cuts.add(c);
      }
    }
    if (cuts.isEmpty()) {
      return null;
    }
    cuts.sort(Comparator.comparingDouble(Cut::ageMs));
    int n = cuts.size();
    double p50 = cuts.get(rank(n, 0.50)).ageMs();
    int p99Rank = rank(n, 0.99);
    double p99 = cuts.get(p99Rank).ageMs();
    List<Cut> tail = cuts.subList(p99Rank, n);
    int lo = Math.min(rank(n, 0.45), rank(n, 0.50));
    int hi = Math.max(rank(n, 0.55), lo);
    List<Cut> median = cuts.subList(lo, hi + 1);
    List<String> names = new ArrayList<>();
    for (String s : LABELS.keySet()) {
      if (cuts.stream().anyMatch(c -> c.segments().containsKey(s))) {
        names.add(s);
      }
    }
    List<Row> rows = new ArrayList<>();
    for (String s : names) {
      double[] med = values(median, c -> c.segments().get(s));
      double[] tl = values(tail, c -> c.segments().get(s));
      double[] tlRq = values(tail, c -> c.segments().containsKey(s) ? c.runQueue().get(s) : null);
      rows.add(new Row(s, LABELS.get(s), mean(med), p50(med), mean(tl), p50(tl), mean(tlRq), mostCommon(tail, s), tl.length));
    }
    Map<String, double[]> counts = new LinkedHashMap<>();
    for (Count c : Count.values()) {
      double[] med = values(median, x -> x.counts()[c.ordinal()] < 0 ? null : (double) x.counts()[c.ordinal()]);
      double[] tl = values(tail, x -> x.counts()[c.ordinal()] < 0 ? null : (double) x.counts()[c.ordinal()]);
      if (med.length + tl.length > 0) {
        counts.put(c.name().toLowerCase(Locale.ROOT), new double[] {mean(med), mean(tl)});
      }
    }
    double[] hops = {mean(values(median, c -> (double) c.hops())), mean(values(tail, c -> (double) c.hops()))};
    return new Result(n, p50, p99, median.size(), tail.size(), rows, counts, hops);
  }

  /** Nearest rank, 0-based ({@code 0.55 * 100} is a hair above 55 in doubles: not rank 56). */
  static int rank(int n, double q) {
    return Math.max(0, Math.min(n - 1, (int) Math.ceil(q * n - 1e-9) - 1));
  }

  private static double[] values(List<Cut> cuts, java.util.function.Function<Cut, Double> f) {
    return cuts.stream().map(f).filter(v -> v != null && !v.isNaN()).mapToDouble(Double::doubleValue).toArray();
  }

  static double mean(double[] v) {
    return v.length == 0 ? Double.NaN : Arrays.stream(v).sum() / v.length;
  }

  /** The median (lower middle for an even count); NaN for none. */
  static double p50(double[] v) {
    if (v.length == 0) {
      return Double.NaN;
    }
    double[] s = v.clone();
    Arrays.sort(s);
    return s[rank(s.length, 0.50)];
  }

  private static String mostCommon(List<Cut> cuts, String segment) {
    Map<String, Integer> seen = new HashMap<>();
    for (Cut c : cuts) {
      String t = c.threads().get(segment);
      if (t != null && c.segments().containsKey(segment)) {
        seen.merge(t, 1, Integer::sum);
      }
    }
    return seen.entrySet().stream().max(Map.Entry.comparingByValue()).map(Map.Entry::getKey).orElse(null);
  }

  private static Double round(double v) {
    return Double.isNaN(v) ? null : Math.round(v * 1000) / 1000.0;
  }

  /** The breakdown as a Markdown table (printed by the benchmark and rendered on its page). */
  static String markdown(String title, Result r) {
    StringBuilder sb = new StringBuilder();
    sb.append(String.format(Locale.ROOT, "%s: %d records, age p50 %.1f ms, p99 %.1f ms; %d median records (45–55%%), %d at or above"
        + " p99; thread hops per record %.1f (median) / %.1f (p99)%n%n", title, r.records(), r.p50AgeMs(), r.p99AgeMs(), r.medianRecords(),
        r.tailRecords(), r.hops()[0], r.hops()[1]));
    sb.append("| segment | median records: mean / p50 ms | p99 records: mean / p50 ms | p99 − median (means) |"
        + " run-queue wait inside, p99 records ms | ends on (p99) |\n|---|---|---|---|---|---|\n");
    for (Row row : r.rows()) {
      sb.append(String.format(Locale.ROOT, "| %s | %s / %s | %s / %s | %s | %s | %s |%n", row.label(), ms(row.medianMean()),
          ms(row.medianP50()), ms(row.tailMean()), ms(row.tailP50()), ms(row.tailMean() - row.medianMean()), ms(row.tailRunQueueMean()),
          row.tailThread() == null ? "–" : "`" + row.tailThread() + "`"));
    }
    if (!r.counts().isEmpty()) {
      sb.append("\n| seen by the record | median records (mean) | p99 records (mean) |\n|---|---|---|\n");
      r.counts().forEach((k, v) -> sb.append(String.format(Locale.ROOT, "| %s | %s | %s |%n", k, ms(v[0]), ms(v[1]))));
    }
    return sb.toString();
  }

  private static String ms(double v) {
    return Double.isNaN(v) ? "–" : String.format(Locale.ROOT, "%.2f", v);
  }
}
