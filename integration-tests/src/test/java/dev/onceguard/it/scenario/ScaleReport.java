package dev.onceguard.it.scenario;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;

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
   * What the table says, one sentence per process count on {@code broker}: the pace kept or not,
   * the p50 and p99 at the smallest and largest RTT, and the round trips per record.
   */
  static String summary(List<Cell> cells, String broker) {
    StringBuilder out = new StringBuilder();
    cells.stream().filter(c -> c.broker().equals(broker)).map(Cell::processes).distinct().forEach(n -> {
      List<Cell> mine = cells.stream().filter(c -> c.broker().equals(broker) && c.processes() == n).toList();
      Cell near = mine.stream().min((a, b) -> Integer.compare(a.rttMs(), b.rttMs())).orElseThrow();
      Cell far = mine.stream().max((a, b) -> Integer.compare(a.rttMs(), b.rttMs())).orElseThrow();
      long behind = mine.stream().filter(c -> !c.keptPace()).count();
      out.append(String.format(Locale.ROOT, "%s%d process%s: %s; record age p50 %d → %d ms and p99 %d → %d ms from %d to %d ms of RTT;"
              + " %.2f–%.2f MySQL round trips per record.", out.length() == 0 ? "" : " ", n, n == 1 ? "" : "es",
          behind == 0 ? "kept the offered pace at every RTT" : "fell behind the offered pace in " + behind + " of " + mine.size() + " cells",
          near.p50(), far.p50(), near.p99(), far.p99(), near.rttMs(), far.rttMs(),
          mine.stream().mapToDouble(Cell::roundTripsPerRecord).min().orElse(0),
          mine.stream().mapToDouble(Cell::roundTripsPerRecord).max().orElse(0)));
    });
    return out.toString();
  }
}
