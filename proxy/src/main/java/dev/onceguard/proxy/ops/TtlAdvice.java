package dev.onceguard.proxy.ops;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.function.ToDoubleFunction;

/**
 * Turns the ages of duplicates that reached the ledger (how long after their original was
 * confirmed they arrived) into advice on the L1 TTL: which share of them a longer TTL would have
 * answered from Redis, and which share the current one should have answered already (those reached
 * MySQL because Redis lost or skipped the key). Pure; the command supplies the ages.
 */
final class TtlAdvice {
  /** TTLs the advice is given for, besides the route's own. */
  static final List<Duration> CANDIDATES = List.of(Duration.ofHours(1), Duration.ofDays(1), Duration.ofDays(7), Duration.ofDays(14),
      Duration.ofDays(30), Duration.ofDays(90));

  private TtlAdvice() {}

  /**
   * @param agesMs ages of LEDGER_HIT duplicates, in milliseconds
   * @param withoutAge LEDGER_HIT duplicates whose age was not recorded
   * @param otherDuplicates duplicates L1 could not have answered whatever its TTL (in flight, re-sent
   *     with another key)
   * @param currentTtl the route's {@code redis-ttl}
   * @param window how far back the decision log reaches
   */
  static String report(String route, long[] agesMs, long withoutAge, long otherDuplicates, Duration currentTtl, Duration window) {
    StringBuilder out = new StringBuilder();
    out.append(String.format(Locale.ROOT, "route '%s' (redis-ttl %s), decision log of the last %s:%n", route, human(currentTtl.toMillis()),
        human(window.toMillis())));
    if (agesMs.length == 0) {
      out.append(String.format(Locale.ROOT, "  no duplicate reached the ledger with a recorded age (%d without one, %d that L1 could not"
          + " answer: in flight or re-sent under another key); L1 answered every replay it could, or there were none%n", withoutAge,
          otherDuplicates));
      return out.toString();
    }
    long[] a = agesMs.clone();
    Arrays.sort(a);
    out.append(String.format(Locale.ROOT, "  %d duplicates missed L1 and were caught by the ledger (LEDGER_HIT); %d more had no recorded age,"
        + " %d others L1 could not have answered (in flight, or re-sent under another key)%n", a.length, withoutAge, otherDuplicates));
    out.append(String.format(Locale.ROOT, "  their age since the original was confirmed: p50 %s, p90 %s, p99 %s, max %s%n", human(pct(a, 50)),
        human(pct(a, 90)), human(pct(a, 99)), human(a[a.length - 1])));
    appendShares(out, currentTtl, a.length, ttl -> covered(a, ttl), ttl -> true, human(pct(a, 99)));
    return out.toString();
  }

  /**
   * The same advice from the histogram {@code onceguard_duplicate_age_seconds} (Prometheus): shares
   * are read at bucket bounds, so a TTL that is not a bound gets the share of the bound below it
   * (marked as at least that), and percentiles are the bounds they fall under.
   *
   * @param ledgerHits cumulative LEDGER_HIT counts by bucket upper bound in seconds (+Inf included)
   * @param cacheHits duplicates L1 answered in the window
   * @param otherDuplicates duplicates L1 could not have answered (in flight, re-sent under another key)
   */
  static String reportFromBuckets(String route, java.util.Map<Double, Double> ledgerHits, double cacheHits, double otherDuplicates,
      Duration currentTtl, Duration window) {
    java.util.TreeMap<Double, Double> cum = new java.util.TreeMap<>(ledgerHits);
    double total = cum.isEmpty() ? 0 : cum.lastEntry().getValue();
    StringBuilder out = new StringBuilder();
    out.append(String.format(Locale.ROOT, "route '%s' (redis-ttl %s), Prometheus, last %s:%n", route, human(currentTtl.toMillis()),
        human(window.toMillis())));
    out.append(String.format(Locale.ROOT, "  %.0f duplicates missed L1 and were caught by the ledger (LEDGER_HIT); L1 answered %.0f;"
        + " %.0f others L1 could not have answered (in flight, or re-sent under another key)%n", total, cacheHits, otherDuplicates));
    if (total <= 0) {
      out.append("  nothing for a longer TTL to gain: no duplicate reached the ledger in the window").append(System.lineSeparator());
      return out.toString();
    }
    out.append(String.format(Locale.ROOT, "  their age since the original was confirmed: p50 under %s, p90 under %s, p99 under %s%n",
        bound(cum, total * 0.50), bound(cum, total * 0.90), bound(cum, total * 0.99)));
    appendShares(out, currentTtl, total, ttl -> {
      java.util.Map.Entry<Double, Double> e = cum.floorEntry(ttl.toMillis() / 1000.0);
      return e == null ? 0 : e.getValue();
    }, ttl -> cum.containsKey(ttl.toMillis() / 1000.0), null);
    return out.toString();
  }

  /**
   * The advice itself, whatever the ages came from: the share each TTL would have answered, the
   * share the current TTL should have answered already, and the shortest TTL covering 99%.
   *
   * @param covered how many of the {@code total} duplicates are within a TTL
   * @param exact whether {@code covered} is exact for a TTL (else it is a lower bound)
   * @param needed the TTL 99% would need, when known
   */
  private static void appendShares(StringBuilder out, Duration currentTtl, double total, ToDoubleFunction<Duration> covered,
      Predicate<Duration> exact, String needed) {
    TreeSet<Duration> ttls = new TreeSet<>(CANDIDATES);
    ttls.add(currentTtl);
    List<String> parts = new ArrayList<>();
    Duration enough = null;
    for (Duration ttl : ttls) {
      double n = covered.applyAsDouble(ttl);
      parts.add(human(ttl.toMillis()) + " " + (exact.test(ttl) ? "" : "at least ") + share(n, total));
      if (enough == null && n >= 0.99 * total) {
        enough = ttl;
      }
    }
    out.append("  an L1 TTL of ").append(String.join(", ", parts)).append(" would have answered that share of them from Redis")
        .append(System.lineSeparator());
    double within = covered.applyAsDouble(currentTtl);
    if (within > 0) {
      out.append(String.format(Locale.ROOT, "  %s%s of them came within the current TTL: Redis did not have the key (restart, eviction,"
          + " an outage or its breaker), not the TTL%n", exact.test(currentTtl) ? "" : "at least ", share(within, total)));
    }
    out.append(enough != null
        ? String.format(Locale.ROOT, "  the shortest of these covering 99%% is %s; the ledger catches the rest whatever the TTL%n",
            human(enough.toMillis()))
        : String.format(Locale.ROOT, "  none of these TTLs covers 99%%: the ledger (which has no TTL) is what catches these%s%n",
            needed == null ? "" : "; a TTL of at least " + needed + " would be needed"));
  }

  /** The smallest bucket bound under which {@code count} of the duplicates fall. */
  private static String bound(java.util.TreeMap<Double, Double> cum, double count) {
    for (java.util.Map.Entry<Double, Double> e : cum.entrySet()) {
      if (e.getValue() >= count) {
        return e.getKey().isInfinite() ? "+Inf (above the largest bucket)" : human((long) (e.getKey() * 1000));
      }
    }
    return "+Inf";
  }

  /** How many ages are within {@code ttl}. */
  private static long covered(long[] sorted, Duration ttl) {
    long limit = ttl.toMillis();
    int lo = 0;
    int hi = sorted.length;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (sorted[mid] <= limit) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  /** The nearest-rank percentile. */
  static long pct(long[] sorted, int p) {
    int rank = (int) Math.ceil(p / 100.0 * sorted.length);
    return sorted[Math.max(0, rank - 1)];
  }

  private static String share(double n, double of) {
    return String.format(Locale.ROOT, "%.1f%%", 100.0 * n / of);
  }

  /** 950 ms, 42 s, 17 min, 5.2 h, 9.4 d. */
  static String human(long ms) {
    if (ms < 1_000) {
      return ms + " ms";
    }
    double s = ms / 1000.0;
    if (s < 60) {
      return trim(s) + " s";
    }
    if (s < 3600) {
      return trim(s / 60) + " min";
    }
    if (s < 86_400) {
      return trim(s / 3600) + " h";
    }
    return trim(s / 86_400) + " d";
  }

  private static String trim(double v) {
    String s = String.format(Locale.ROOT, "%.1f", v);
    return s.endsWith(".0") ? s.substring(0, s.length() - 2) : s;
  }
}
