package dev.onceguard.bench.contention;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ContentionReportTest {
  private static final ContentionReport.Setup SETUP = new ContentionReport.Setup(64, 4, 5, 1, 200, 4, 2, "1.00 1.00 1.00",
      "2.00 2.00 2.00");

  /** FOR UPDATE with lock-wait p99 {@code wait1} / {@code waitAll}, the claim with p99 {@code claimP99} and {@code busy} share. */
  private static void setting(List<ContentionReport.Result> out, double rtt, int hold, double wait1, double waitAll, double forUpdateP99,
      double claimP99, double busy) {
    out.add(result(Variant.FOR_UPDATE, rtt, hold, 1, new Figures(500, 100, 3, 4, 1.0, wait1, 0)));
    out.add(result(Variant.CLAIM, rtt, hold, 1, new Figures(400, 80, 5, 6, 3.0, 4.0, 0)));
    out.add(result(Variant.FOR_UPDATE, rtt, hold, 4, new Figures(2000, 400, 5, forUpdateP99, 1.5, waitAll, 0)));
    out.add(result(Variant.CLAIM, rtt, hold, 4, new Figures(1800, 360, 6, claimP99, 3.5, 5.0, busy)));
  }

  private static ContentionReport.Result result(Variant v, double rtt, int hold, int instances, Figures f) {
    return new ContentionReport.Result(new Cell(v, rtt, hold, instances), f);
  }

  @Test
  void shortAnswer_jumpOnlyWithABusinessCall_answersWhichFirstThenSaysWhereItReproduces() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 2, 0, 2.5, 3.0, 8, 6, 0.004);
    setting(r, 2, 20, 2.5, 41, 48, 230, 0.03);

    String s = ContentionReport.shortAnswer(SETUP, r);

    assertThat(s).startsWith("**Neither has the better transition p99 everywhere** with 4 instances on 64 shared hot entities:"
            + " FOR UPDATE in 1 of 2 settings (RTT 2 ms, 20 ms call: 48 vs 230 ms), OnceGuard's claim in 1 (RTT 2 ms, no business"
            + " call: 8.0 vs 6.0 ms), FOR UPDATE first.")
        .contains("**reproduces with the business call inside the transaction**: 2.5 → 41 ms at RTT 2 ms, 20 ms call, from 1 to 4"
            + " instances. Without a business call in the transaction it is 3.0 ms at RTT 2 ms with 4 instances.")
        .contains("With 4 instances 0.4%–3.0% of the claim's transitions met a busy entity; in the 1 setting where more than 1.0%"
            + " did, that wait sets the claim's p99 (230 ms).")
        .contains("at RTT 2 ms their p50 is 3.0 vs 5.0 ms.");
  }

  @Test
  void shortAnswer_noCellInTheTeamsRange_saysItDoesNotReproduceAndNamesTheLargestWait() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 0, 0, 0.6, 1.1, 2, 3, 0);
    setting(r, 10, 0, 10.5, 12, 40, 60, 0);
    setting(r, 2, 20, 2.5, 140, 150, 90, 0.002); // beyond twice 45 ms: not the team's figure

    String s = ContentionReport.shortAnswer(SETUP, r);

    assertThat(s).contains("FOR UPDATE in 2 of 3 settings (RTT 0 ms, no business call: 2.0 vs 3.0 ms; RTT 10 ms, no business call:"
            + " 40 vs 60 ms), OnceGuard's claim in 1 (RTT 2 ms, 20 ms call: 150 vs 90 ms)")
        .contains("**does not reproduce here**: the largest lock-wait p99 with 4 instances is 140 ms (RTT 2 ms, 20 ms call), against"
            + " 2.5 ms with 1.")
        .contains("it is 1.1 ms at RTT 0 ms and 12 ms at RTT 10 ms with 4 instances.")
        .contains("With 4 instances 0.0%–0.2% of the claim's transitions met a busy entity.")
        .doesNotContain("sets the claim's p99")
        .contains("at RTT 10 ms their p50 is 3.0 vs 5.0 ms.");
  }

  @Test
  void shortAnswer_oneVariantBetterEverywhere_givesBothRanges() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 2, 0, 9, 15, 15, 256, 0.023);
    setting(r, 2, 20, 10, 27, 79, 293, 0.035);

    String s = ContentionReport.shortAnswer(SETUP, r);

    assertThat(s).startsWith("**FOR UPDATE has the better transition p99 with 4 instances on 64 shared hot entities, in all 2"
            + " settings**: 15–79 ms against 256–293 ms for the claim (business call included).")
        .contains("**does not reproduce here**: the largest lock-wait p99 with 4 instances is 27 ms (RTT 2 ms, 20 ms call), against"
            + " 10 ms with 1.")
        .contains("in the 2 settings where more than 1.0% did, that wait sets the claim's p99 (256–293 ms).");
  }

  @Test
  void reproduces_needsTheTeamsOrderOfMagnitudeAndAJumpFromOneInstance() {
    assertThat(ContentionReport.reproduces(2, 45)).isTrue();
    assertThat(ContentionReport.reproduces(4, 22.5)).isTrue();
    assertThat(ContentionReport.reproduces(10, 27)).as("less than 5 times the p99 with 1").isFalse();
    assertThat(ContentionReport.reproduces(2, 95)).as("more than twice 45 ms").isFalse();
    assertThat(ContentionReport.reproduces(2, 20)).as("less than half of 45 ms").isFalse();
  }

  @Test
  void table_oneRowPerSettingAndInstanceCount_inPlanOrder() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 10, 0, 10.4, 12, 40, 60, 0);
    setting(r, 2, 5, 2.5, 9, 20, 25, 0.125);

    String[] lines = ContentionReport.table(r).split("\n");

    assertThat(lines).hasSize(6);
    assertThat(lines[0]).startsWith("| MySQL RTT | business call | instances | FOR UPDATE p50 / p99 |");
    assertThat(lines[2]).isEqualTo("| 10 ms | 0 ms | 1 | 3.0 / 4.0 | 1.0 / 10 | 100 | 5.0 / 6.0 | 3.0 / 4.0 | 0.0% | 80 |");
    assertThat(lines[3]).isEqualTo("| 10 ms | 0 ms | 4 | 5.0 / 40 | 1.5 / 12 | 400 | 6.0 / 60 | 3.5 / 5.0 | 0.0% | 360 |");
    assertThat(lines[5]).isEqualTo("| 2 ms | 5 ms | 4 | 5.0 / 20 | 1.5 / 9.0 | 400 | 6.0 / 25 | 3.5 / 5.0 | 13% | 360 |");
  }

  @Test
  void table_aVariantNotMeasured_showsDashes() {
    List<ContentionReport.Result> r = List.of(result(Variant.CLAIM, 2, 0, 1, new Figures(10, 2, 5, 6, 3, 4, 0)));

    assertThat(ContentionReport.table(r).split("\n")[2]).isEqualTo("| 2 ms | 0 ms | 1 | – | – | – | 5.0 / 6.0 | 3.0 / 4.0 | 0.0% | 2 |");
  }

  @Test
  void footer_namesTheSmallestCellTheProbesAndTheLoad() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 2, 20, 2.5, 41, 48, 230, 0.03);
    r.add(result(Variant.CLAIM, 10, 20, 1, new Figures(60, 12, 80, 95, 50, 55, 0)));
    Map<Double, Double> probes = new LinkedHashMap<>();
    probes.put(2.0, 2.31);
    probes.put(10.0, 10.4);

    String f = ContentionReport.footer(SETUP, probes, r);

    assertThat(f).contains("the fewest transitions in a cell: 60 (claim, RTT 10 ms, 20 ms call, 1 instance); the p99 of fewer than"
            + " 100 transitions is their largest.")
        .contains("`SELECT 1` through the proxy, median: 2.3 ms at RTT 2 ms, 10 ms at RTT 10 ms.")
        .contains("Load average 1.00 1.00 1.00 before and 2.00 2.00 2.00 after, on 2 cores");
  }

  @Test
  void render_shortAnswerFirstThenSetupThenTable() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 2, 20, 2.5, 41, 48, 230, 0.03);

    String page = ContentionReport.render(SETUP, Map.of(2.0, 2.3), r, null);

    assertThat(page).startsWith("**FOR UPDATE has the better transition p99 with 4 instances");
    assertThat(page.indexOf("**Setup.** 4 instance processes")).isGreaterThan(0).isLessThan(page.indexOf("| MySQL RTT"));
    assertThat(page).contains("about 3/64 = 4.7% of transitions find theirs held");
  }

  @Test
  void retuned_setsTheShorterRetryBesideTheDefaultAndForUpdate() {
    List<ContentionReport.Result> r = new ArrayList<>();
    setting(r, 2, 20, 2.5, 41, 48, 230, 0.03);
    ContentionReport.Retuned t = new ContentionReport.Retuned(new ContentionReport.Setting(2, 20), 20,
        new Figures(1700, 340, 44, 70, 14, 40, 0.028));

    String page = ContentionReport.render(SETUP, Map.of(), r, t);

    assertThat(page).contains("**A shorter `early-arrival-retry`.** With `early-arrival-retry: 20ms` (RTT 2 ms, 20 ms call, 4"
        + " instances) the claim's p50 / p99 is 44 / 70 ms (claim wait p99 40 ms, 2.8% met a busy entity, 340 transitions/s),"
        + " against 6.0 / 230 ms with the default 200 ms and 5.0 / 48 ms for FOR UPDATE.");
    assertThat(page.indexOf("**A shorter")).isGreaterThan(page.indexOf("| MySQL RTT"));
  }

  @Test
  void ms_oneDecimalBelowTenWholeAboveAndDashForNothing() {
    assertThat(ContentionReport.ms(2.345)).isEqualTo("2.3");
    assertThat(ContentionReport.ms(45.6)).isEqualTo("46");
    assertThat(ContentionReport.ms(Double.NaN)).isEqualTo("–");
    assertThat(ContentionReport.pct(0.047)).isEqualTo("4.7%");
    assertThat(ContentionReport.pct(0.25)).isEqualTo("25%");
  }
}
