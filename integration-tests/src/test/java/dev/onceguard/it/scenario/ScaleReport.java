package dev.onceguard.it.scenario;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The numbers of the scale experiment ({@link ScaleAnswer}) per cell, the check that every fact
 * reached the business exactly once, and the Markdown of docs/answers.md. Pure: no I/O.
 */
final class ScaleReport {
  private ScaleReport() {}

  /**
   * One cell as measured over its paced window.
   *
   * @param broker the brokers, as the table names them
   * @param rttMs round-trip time added to MySQL and to Kafka
   * @param offeredPerSecond the producer's pace
   * @param records records produced in the window, each a fact of its own
   * @param seconds from the business's first receipt of the window's records to its last
   * @param agesMs each record's age at the business: receipt minus Kafka create timestamp
   * @param ackedAgesMs each record's age when the brokers acknowledged it to the producer: the part of its age before any sidecar could read it
   * @param roundTrips MySQL statements the cell's processes sent in the window (their {@code onceguard_mysql_round_trips_total})
   * @param cpuMs CPU time the cell's processes used in the window; negative when not measured
   */
  record Cell(String broker, int processes, int rttMs, int offeredPerSecond, int records, double seconds, List<Long> agesMs,
      List<Long> ackedAgesMs, long roundTrips, double cpuMs) {
    double perSecond() {
      return seconds <= 0 ? 0 : records / seconds;
    }

    long p50() {
      return percentile(agesMs, 50);
    }

    long p99() {
      return percentile(agesMs, 99);
    }

    double roundTripsPerRecord() {
      return records == 0 ? 0 : (double) roundTrips / records;
    }

    /** Whether the processes kept pace: delivered at 95% of the offered rate or more. */
    boolean keptPace() {
      return perSecond() >= 0.95 * offeredPerSecond;
    }
  }

  /** The nearest-rank percentile {@code p} (0..100) of {@code values}; 0 for none. */
  static long percentile(Collection<Long> values, double p) {
    if (values.isEmpty()) {
      return 0;
    }
    List<Long> sorted = new ArrayList<>(values);
    sorted.sort(null);
    int rank = (int) Math.ceil(p / 100.0 * sorted.size());
    return sorted.get(Math.max(0, Math.min(sorted.size(), rank) - 1));
  }

  /**
   * Fails unless the business received each of {@code facts} exactly once ({@code received}: calls
   * per fact) and nothing else.
   *
   * @throws IllegalStateException naming the lost and doubled facts (the first few) and their numbers
   */
  static void requireExactlyOnce(String cell, Collection<String> facts, Map<String, Long> received) {
    List<String> lost = facts.stream().filter(f -> received.getOrDefault(f, 0L) == 0).toList();
    List<String> doubled = received.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey).sorted().toList();
    List<String> unknown = received.keySet().stream().filter(f -> !facts.contains(f)).sorted().toList();
    if (!lost.isEmpty() || !doubled.isEmpty() || !unknown.isEmpty()) {
      throw new IllegalStateException(String.format(Locale.ROOT,
          "%s: %d of %d facts lost %s, %d received more than once %s, %d received that were never sent %s", cell, lost.size(),
          facts.size(), first(lost), doubled.size(), first(doubled), unknown.size(), first(unknown)));
    }
  }

  private static List<String> first(List<String> l) {
    return l.subList(0, Math.min(5, l.size()));
  }

  static String markdown(List<Cell> cells) {
    StringBuilder md = new StringBuilder("| Brokers | sidecar processes | added RTT to MySQL and Kafka | offered rec/s | delivered rec/s"
        + " | record age p50 ms | p99 ms | of which until the brokers acked: p50 / p99 ms | MySQL round trips per record"
        + " | sidecar CPU ms per record |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (Cell c : cells) {
      md.append(String.format(Locale.ROOT, "| %s | %d | %d ms | %,d | %,.0f | %d | %d | %d / %d | %.2f | %s |%n", c.broker(),
          c.processes(), c.rttMs(), c.offeredPerSecond(), c.perSecond(), c.p50(), c.p99(), percentile(c.ackedAgesMs(), 50),
          percentile(c.ackedAgesMs(), 99), c.roundTripsPerRecord(),
          c.cpuMs() < 0 ? "–" : String.format(Locale.ROOT, "%.2f", c.cpuMs() / c.records())));
    }
    return md.toString();
  }

  /**
   * What the table says of {@code broker}'s cells, given in the order they ran: per pass (a process
   * count), the RTTs in their order, the record age in the pass's first and last cell, the part
   * until the brokers acked, and the round trips per record; then whether the age followed the run
   * order (drift: warm-up, the machine's load) or the RTT, when the passes ran the RTTs in
   * different orders.
   */
  static String summary(List<Cell> runOrder, String broker) {
    List<Cell> mine = runOrder.stream().filter(c -> c.broker().equals(broker)).toList();
    StringBuilder out = new StringBuilder();
    boolean agesFell = true;
    boolean ackedFell = true;
    boolean risesWithRtt = true;
    Set<Integer> firstRtts = new HashSet<>();
    for (int n : mine.stream().map(Cell::processes).distinct().toList()) {
      List<Cell> pass = mine.stream().filter(c -> c.processes() == n).toList();
      Cell first = pass.get(0);
      Cell last = pass.get(pass.size() - 1);
      Cell near = pass.stream().min(Comparator.comparingInt(Cell::rttMs)).orElseThrow();
      Cell far = pass.stream().max(Comparator.comparingInt(Cell::rttMs)).orElseThrow();
      long behind = pass.stream().filter(c -> !c.keptPace()).count();
      out.append(String.format(Locale.ROOT, "%s%d process%s, RTTs in the order %s ms: %s; record age p50 %d ms in the first cell, %d ms in"
              + " the last (p99 %d, %d), of which until the brokers acked p50 %d, %d ms; %.2f–%.2f MySQL round trips per record.",
          out.length() == 0 ? "" : " ", n, n == 1 ? "" : "es", String.join(", ", pass.stream().map(c -> Integer.toString(c.rttMs())).toList()),
          behind == 0 ? "kept the offered pace" : "fell behind the offered pace in " + behind + " of " + pass.size() + " cells",
          first.p50(), last.p50(), first.p99(), last.p99(), percentile(first.ackedAgesMs(), 50), percentile(last.ackedAgesMs(), 50),
          pass.stream().mapToDouble(Cell::roundTripsPerRecord).min().orElse(0),
          pass.stream().mapToDouble(Cell::roundTripsPerRecord).max().orElse(0)));
      agesFell &= pass.size() > 1 && last.p50() < first.p50();
      ackedFell &= percentile(last.ackedAgesMs(), 50) < percentile(first.ackedAgesMs(), 50);
      risesWithRtt &= pass.size() > 1 && far.p50() > near.p50();
      firstRtts.add(first.rttMs());
    }
    if (firstRtts.size() < 2) {
      return out.toString();
    }
    if (agesFell) {
      out.append(" In each pass the age fell from its first cell to its last, whichever RTT came first");
      out.append(ackedFell ? ", and so did the part until the brokers acked, which no added RTT reaches" : "");
      out.append(": the time since the processes started and the shared machine's load set the age here; the added RTT's effect"
          + " is smaller than that drift.");
    } else if (risesWithRtt) {
      out.append(" In each pass the age was higher at the largest RTT than at the smallest, in either order: the RTT's effect.");
    } else {
      out.append(" Neither the run order nor the RTT moved the age the same way in both passes: the differences are within the"
          + " run-to-run spread.");
    }
    return out.toString();
  }
}
