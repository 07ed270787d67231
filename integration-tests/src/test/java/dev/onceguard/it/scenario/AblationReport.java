package dev.onceguard.it.scenario;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/** The tables of Q1 in docs/answers.md, from the counts of {@link LayerAblation}. Pure. */
final class AblationReport {

  /** The layers in the order a record meets them, as the verdict names them, and as the page names them. */
  private static final List<String> LAYERS = List.of("CACHE", "LEDGER", "STATE_MACHINE", "BUSINESS");
  private static final Map<String, String> LAYER_NAMES = Map.of("CACHE", "L1", "LEDGER", "L2 ledger", "STATE_MACHINE", "L3 state machine",
      "BUSINESS", "business");

  /**
   * Damage as the scenario judge finds it: transitions never delivered ({@code lost}), delivered
   * more than once ({@code doubled}), records escalated that must not be ({@code wronglyEscalated}),
   * transitions delivered that the machine forbids or out of its order ({@code wronglyApplied}),
   * records that must be escalated and were not ({@code missedEscalations}).
   */
  record Damage(int lost, int doubled, int wronglyEscalated, int wronglyApplied, int missedEscalations) {
    static final Damage NONE = new Damage(0, 0, 0, 0, 0);

    boolean any() {
      return lost + doubled + wronglyEscalated + wronglyApplied + missedEscalations > 0;
    }
  }

  /**
   * One configuration's run.
   *
   * @param caught records by the "LAYER/REASON" of their verdict, for the verdicts other than ACCEPTED
   * @param outcomes per kind of record in the stream (in the stream's order), its records by outcome
   * @param l1Hits L1 lookups that found the key, of {@code l1Lookups}
   * @param mysqlRoundTrips statements the sidecars sent to MySQL during the run
   */
  record Row(String config, int records, Map<String, Integer> caught, Map<String, Map<String, Integer>> outcomes, Damage damage,
      long l1Hits, long l1Lookups, long mysqlRoundTrips, double seconds) {}

  private AblationReport() {}

  /**
   * Three tables: what each layer caught, by reason; what became of each kind of record in each
   * configuration; the damage and the cost.
   */
  static String markdown(List<Row> rows) {
    List<String> columns = caughtColumns(rows);
    StringBuilder md = new StringBuilder("| Configuration | records |");
    for (String c : columns) {
      String[] lr = c.split("/", 2);
      md.append(' ').append(LAYER_NAMES.getOrDefault(lr[0], lr[0])).append(": `").append(lr[1]).append("` |");
    }
    md.append("\n|---|---:|").append("---:|".repeat(columns.size())).append('\n');
    for (Row r : rows) {
      md.append("| ").append(r.config()).append(" | ").append(String.format(Locale.ROOT, "%,d", r.records())).append(" |");
      for (String c : columns) {
        md.append(' ').append(String.format(Locale.ROOT, "%,d", r.caught().getOrDefault(c, 0))).append(" |");
      }
      md.append('\n');
    }
    md.append('\n').append(outcomes(rows));
    md.append("\n| Configuration | facts lost | facts doubled | wrongly escalated | applied against the machine | escalations missed"
        + " | L1 hit rate | MySQL round trips per record | run |\n");
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (Row r : rows) {
      Damage d = r.damage();
      md.append(String.format(Locale.ROOT, "| %s | %,d | %,d | %,d | %,d | %,d | %s | %.2f | %.0f s |%n", r.config(), d.lost(), d.doubled(),
          d.wronglyEscalated(), d.wronglyApplied(), d.missedEscalations(), hitRate(r), (double) r.mysqlRoundTrips() / r.records(),
          r.seconds()));
    }
    return md.toString();
  }

  /** Kinds of record down, configurations across; a cell lists the outcomes, the most frequent first. */
  static String outcomes(List<Row> rows) {
    Set<String> kinds = new LinkedHashSet<>();
    rows.forEach(r -> kinds.addAll(r.outcomes().keySet()));
    StringBuilder md = new StringBuilder("| Records in the stream |");
    rows.forEach(r -> md.append(' ').append(r.config()).append(" |"));
    md.append("\n|---|").append("---|".repeat(rows.size())).append('\n');
    for (String k : kinds) {
      int n = rows.stream().mapToInt(r -> r.outcomes().getOrDefault(k, Map.of()).values().stream().mapToInt(Integer::intValue).sum())
          .max().orElse(0);
      md.append("| ").append(k).append(String.format(Locale.ROOT, " (%,d)", n)).append(" |");
      for (Row r : rows) {
        List<Map.Entry<String, Integer>> cell = new ArrayList<>(r.outcomes().getOrDefault(k, Map.of()).entrySet());
        cell.sort(Map.Entry.<String, Integer>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()));
        md.append(' ').append(cell.isEmpty() ? "–" : String.join(", ", cell.stream()
            .map(e -> String.format(Locale.ROOT, "%,d %s", e.getValue(), e.getKey())).toList())).append(" |");
      }
      md.append('\n');
    }
    return md.toString();
  }

  /**
   * What the full configuration (the first row) did, then the damage of each reduced one, then the
   * MySQL round trips of those that did none, against the full one's.
   */
  static String summary(List<Row> rows) {
    StringBuilder sb = new StringBuilder("**Measured.** ");
    Row full = rows.get(0);
    String fullConfig = Character.toUpperCase(full.config().charAt(0)) + full.config().substring(1);
    sb.append(fullConfig).append(full.damage().any() ? " did damage: " + damage(full.damage()) + "." : ": nothing lost, doubled or"
        + " wrongly escalated.");
    List<String> harmed = new ArrayList<>();
    List<String> harmless = new ArrayList<>();
    for (Row r : rows.subList(1, rows.size())) {
      if (r.damage().any()) {
        harmed.add(r.config() + ": " + damage(r.damage()));
      } else {
        harmless.add(r.config() + String.format(Locale.ROOT, ", %.2f MySQL round trips per record", (double) r.mysqlRoundTrips()
            / r.records()));
      }
    }
    if (!harmed.isEmpty()) {
      sb.append(" Without a layer: ").append(String.join("; ", harmed)).append('.');
    }
    if (!harmless.isEmpty()) {
      sb.append(" No damage: ").append(String.join("; ", harmless)).append(String.format(Locale.ROOT, " (%s: %.2f).", full.config(),
          (double) full.mysqlRoundTrips() / full.records()));
    }
    return sb.toString();
  }

  /** "3 facts lost, 2 doubled", the non-zero kinds only. */
  static String damage(Damage d) {
    List<String> parts = new ArrayList<>();
    add(parts, d.lost(), "lost");
    add(parts, d.doubled(), "doubled");
    add(parts, d.wronglyEscalated(), "wrongly escalated");
    add(parts, d.wronglyApplied(), "applied against the machine");
    add(parts, d.missedEscalations(), "not escalated");
    return parts.isEmpty() ? "none" : String.join(", ", parts);
  }

  private static void add(List<String> parts, int n, String what) {
    if (n > 0) {
      parts.add(String.format(Locale.ROOT, "%,d %s", n, what));
    }
  }

  static String hitRate(Row r) {
    return r.l1Lookups() == 0 ? "L1 off" : String.format(Locale.ROOT, "%.1f%%", 100.0 * r.l1Hits() / r.l1Lookups());
  }

  /** Every "LAYER/REASON" some row counts, the layers in the order a record meets them, then by reason. */
  static List<String> caughtColumns(List<Row> rows) {
    TreeSet<String> cols = new TreeSet<>(Comparator.comparing((String c) -> layerOrder(c.split("/", 2)[0])).thenComparing(c -> c));
    rows.forEach(r -> cols.addAll(r.caught().keySet()));
    return List.copyOf(cols);
  }

  private static int layerOrder(String layer) {
    int i = LAYERS.indexOf(layer);
    return i < 0 ? LAYERS.size() : i;
  }
}
