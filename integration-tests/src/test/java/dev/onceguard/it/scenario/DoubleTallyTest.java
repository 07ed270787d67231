package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.scenario.DoubleTally.Counts;
import dev.onceguard.it.scenario.DoubleTally.Receipt;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DoubleTallyTest {

  @Test
  void count_sameRecordAgain_isARedelivery_anotherRecordOfTheFact_isAResend_firstCallIsNeither() {
    List<Receipt> calls = List.of(
        new Receipt("L1", "t-0@0", "kill", false),
        new Receipt("L2", "t-0@1", "kill", false),
        new Receipt("L1", "t-0@0", "kill", false),
        new Receipt("L2", "t-3@7", "rekeyed", false));

    Map<String, Counts> c = DoubleTally.count(calls);

    assertThat(c.get("kill")).isEqualTo(new Counts(3, 1, 0, 0));
    assertThat(c.get("rekeyed")).isEqualTo(new Counts(1, 0, 1, 0));
    assertThat(c.get("kill").unflagged()).isEqualTo(1);
  }

  @Test
  void count_flaggedRepeat_isNotUnflagged_flaggedFirstCallIsNoRepeatAtAll() {
    List<Receipt> calls = List.of(
        new Receipt("L1", "t-0@0", "kill", true),
        new Receipt("L2", "t-0@1", "kill", false),
        new Receipt("L2", "t-0@1", "kill", true));

    Counts c = DoubleTally.count(calls).get("kill");

    assertThat(c.repeats()).isEqualTo(1);
    assertThat(c.flagged()).isEqualTo(1);
    assertThat(c.unflagged()).isZero();
  }

  @Test
  void count_repeatCountsAgainstTheCaseOfItsRecord_notOfTheFirstCall() {
    List<Receipt> calls = List.of(
        new Receipt("L1", "t-0@0", "warm", false),
        new Receipt("L1", "t-5@900", "late", false),
        new Receipt("L1", "t-5@900", "late", false));

    Map<String, Counts> c = DoubleTally.count(calls);

    assertThat(c.get("warm")).isEqualTo(new Counts(1, 0, 0, 0));
    assertThat(c.get("late")).as("a re-send, then that re-send redelivered").isEqualTo(new Counts(2, 1, 1, 0));
  }

  @Test
  void missing_namesFactsNoCallCarried() {
    assertThat(DoubleTally.missing(List.of("L1", "L2", "L3"), List.of(new Receipt("L2", "t-0@0", "kill", false))))
        .containsExactly("L1", "L3");
  }

  @Test
  void per10k_scalesToTenThousandRecords() {
    assertThat(DoubleTally.per10k(37, 10_000)).isEqualTo(37.0);
    assertThat(DoubleTally.per10k(37, 5_000)).isEqualTo(74.0);
    assertThat(DoubleTally.per10k(3, 0)).isZero();
  }
}
