package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.scenario.DoubleTally.Counts;
import dev.onceguard.it.scenario.UpstreamReport.Row;
import java.util.List;
import org.junit.jupiter.api.Test;

class UpstreamReportTest {

  @Test
  void markdown_oneRowPerCase_countsAndThePlainConsumersPer10k_andWhetherUpstreamCouldRemoveThem() {
    String md = UpstreamReport.markdown(List.of(
        new Row(UpstreamCase.KILL_NINE, 5_000, 0, new Counts(5_042, 40, 2, 0, 0), new Counts(5_004, 3, 1, 0, 4), "at record 2,000"),
        new Row(UpstreamCase.REKEYED_RESEND, 10_000, 100, new Counts(10_000, 0, 0, 100, 0), new Counts(9_900, 0, 0, 0, 0),
            "every 100th")));

    assertThat(md).contains("| " + UpstreamCase.KILL_NINE.what + " (at record 2,000) | 5,000 | 42 | 84 | 0 / 40 / 2 | 0 | 4 (3 / 1) |");
    assertThat(md).contains("| " + UpstreamCase.REKEYED_RESEND.what + " (every 100th) | 10,000 | 100 | 100 | 100 / 0 / 0 | 0 | 0 (0 / 0) |");
    assertThat(md).contains("| " + UpstreamCase.KILL_NINE.what + " | No: ");
    assertThat(md).contains("| " + UpstreamCase.REKEYED_RESEND.what + " | Only if its store is keyed by the business key");
  }

  @Test
  void summary_plainPer10kPerCase_guardedUnflaggedTotal_andFlaggedWhereThereAreAny() {
    String s = UpstreamReport.summary(List.of(
        new Row(UpstreamCase.KILL_NINE, 5_000, 0, new Counts(5_040, 40, 0, 0, 0), new Counts(5_003, 3, 0, 0, 3), "x"),
        new Row(UpstreamCase.BROKER_RESTART, 10_000, 0, Counts.NONE, Counts.NONE, "y"),
        new Row(UpstreamCase.REKEYED_RESEND, 10_000, 100, new Counts(10_000, 0, 0, 100, 0), new Counts(9_900, 0, 0, 0, 0), "z")));

    assertThat(s).isEqualTo("**Measured.** Per 10,000 records, the plain consumer's business received facts twice: 80 after one kill -9,"
        + " 0 after a broker restart and 100 after the re-keyed re-sends. OnceGuard's business received 0 facts twice unflagged, and"
        + " facts again flagged `redelivery`: 3 after one kill -9.");
  }

  @Test
  void per10k_oneDecimalUnlessWhole() {
    assertThat(UpstreamReport.per10k(3, 7_000)).isEqualTo("4.3");
    assertThat(UpstreamReport.per10k(1_234, 10_000)).isEqualTo("1,234");
  }
}
