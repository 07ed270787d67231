package dev.onceguard.it.scenario;

import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * What a business received twice, per case: the calls it received, in arrival order, each
 * carrying one fact. The first call of a fact is its delivery; every later one is a repeat: of
 * another record carrying the fact (upstream sent it again: a re-send), or of the same Kafka record,
 * either called again by the same consumer after a call that failed or timed out (a retry,
 * {@code attempt > 1}) or delivered again as a first attempt (a redelivery: the record was consumed
 * again). A repeat counts against the case whose record it carried. Pure; thread-confined.
 */
final class DoubleTally {

  /**
   * One call as the business received it.
   *
   * @param coordinates the Kafka record, {@code topic-partition@offset}
   * @param flagged the delivery said {@code redelivery = true}: the business may have seen it
   * @param attempt the delivery's attempt: 1 for a consumer's first call of the record
   */
  record Receipt(String fact, String coordinates, String caseId, boolean flagged, int attempt) {}

  /**
   * One case's calls: {@code received} in all; repeats of a fact already received, as
   * {@code redelivered}, {@code retried} (the same record again) and {@code resent} (another
   * record); and how many of those repeats were {@code flagged}.
   */
  record Counts(int received, int redelivered, int retried, int resent, int flagged) {
    static final Counts NONE = new Counts(0, 0, 0, 0, 0);

    int repeats() {
      return redelivered + retried + resent;
    }

    /** Repeats the business was not told about: only a check of its own would catch them. */
    int unflagged() {
      return repeats() - flagged;
    }
  }

  private DoubleTally() {}

  /** Counts per case, in the order cases first appear. */
  static Map<String, Counts> count(List<Receipt> inArrivalOrder) {
    Map<String, Set<String>> recordsOfFact = new HashMap<>();
    Map<String, int[]> c = new LinkedHashMap<>();
    for (Receipt r : inArrivalOrder) {
      int[] k = c.computeIfAbsent(r.caseId(), x -> new int[5]);
      k[0]++;
      Set<String> seen = recordsOfFact.computeIfAbsent(r.fact(), f -> new HashSet<>());
      if (!seen.isEmpty()) {
        k[!seen.contains(r.coordinates()) ? 3 : r.attempt() > 1 ? 2 : 1]++;
        if (r.flagged()) {
          k[4]++;
        }
      }
      seen.add(r.coordinates());
    }
    Map<String, Counts> out = new LinkedHashMap<>();
    c.forEach((id, k) -> out.put(id, new Counts(k[0], k[1], k[2], k[3], k[4])));
    return out;
  }

  /** The facts of {@code expected} that no call carried, sorted. */
  static Set<String> missing(Collection<String> expected, List<Receipt> received) {
    Set<String> out = new TreeSet<>(expected);
    received.forEach(r -> out.remove(r.fact()));
    return out;
  }

  /** {@code n} per 10,000 of {@code records}. */
  static double per10k(int n, int records) {
    return records == 0 ? 0 : n * 10_000.0 / records;
  }
}
