package dev.onceguard.it.scenario;

import dev.onceguard.it.scenario.DoubleTally.Counts;
import java.util.List;
import java.util.Locale;

/** The tables of Q5 in docs/answers.md, from the counts of {@link UpstreamOnly}. Pure. */
final class UpstreamReport {

  /**
   * One case: {@code records} produced, of which {@code resends} carried a fact sent before; what
   * each business received; {@code fault}: when the fault came and how it went, as measured.
   */
  record Row(UpstreamCase c, int records, int resends, Counts plain, Counts guarded, String fault) {}

  private UpstreamReport() {}

  static String markdown(List<Row> rows) {
    StringBuilder md = new StringBuilder();
    md.append("| Case | records | plain consumer: received twice | per 10,000 records | of them: upstream's re-sends / the"
        + " consumer's redeliveries / its retries of failed calls | OnceGuard: received twice, unflagged | OnceGuard: received again, flagged"
        + " `redelivery` (redeliveries / retries) |\n");
    md.append("|---|---:|---:|---:|---:|---:|---:|\n");
    for (Row r : rows) {
      md.append(String.format(Locale.ROOT, "| %s (%s) | %,d | %,d | %s | %,d / %,d / %,d | %,d | %,d (%,d / %,d) |%n", r.c.what, r.fault,
          r.records, r.plain.repeats(), per10k(r.plain.repeats(), r.records), r.plain.resent(), r.plain.redelivered(),
          r.plain.retried(), r.guarded.unflagged(), r.guarded.flagged(), r.guarded.redelivered(), r.guarded.retried()));
    }
    md.append("\n| Case | could an upstream producer remove these duplicates? |\n|---|---|\n");
    for (Row r : rows) {
      md.append("| ").append(r.c.what).append(" | ").append(r.c.origin.upstreamCanDedup).append(" |\n");
    }
    return md.toString();
  }

  /**
   * One sentence: what the plain consumer's business received twice per 10,000 records in each
   * case, and what the sidecar's received twice, unflagged and flagged.
   */
  static String summary(List<Row> rows) {
    StringBuilder plain = new StringBuilder();
    int unflagged = 0;
    StringBuilder flagged = new StringBuilder();
    for (Row r : rows) {
      plain.append(plain.length() == 0 ? "" : rows.indexOf(r) == rows.size() - 1 ? " and " : ", ")
          .append(per10k(r.plain.repeats(), r.records)).append(" after ").append(r.c.label);
      unflagged += r.guarded.unflagged();
      if (r.guarded.flagged() > 0) {
        flagged.append(flagged.length() == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%,d", r.guarded.flagged())).append(" after ")
            .append(r.c.label);
      }
    }
    return String.format(Locale.ROOT, "**Measured.** Per 10,000 records, the plain consumer's business received facts twice: %s."
        + " OnceGuard's business received %,d facts twice unflagged%s.", plain, unflagged,
        flagged.length() == 0 ? ", and none again flagged `redelivery`" : ", and facts again flagged `redelivery`: " + flagged);
  }

  /** Per 10,000 records, as an integer when it is one. */
  static String per10k(int n, int records) {
    double v = DoubleTally.per10k(n, records);
    return v == Math.rint(v) ? String.format(Locale.ROOT, "%,d", (long) v) : String.format(Locale.ROOT, "%,.1f", v);
  }
}
