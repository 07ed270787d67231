package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.scenario.DoubleTally.Counts;
import dev.onceguard.it.scenario.DoubleTally.Receipt;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DoubleTallyTest {

  @Test
  void count_sameRecordAsFirstAttempt_isARedelivery_asLaterAttempt_aRetry_anotherRecord_aResend_firstCallNone() {
    List<Receipt> calls = List.of(
        new Receipt("L1", "t-0@0", "kill", false, 1),
        new Receipt("L2", "t-0@1", "kill", false, 1),
        new Receipt("L1", "t-0@0", "kill", false, 1),
        new Receipt("L2", "t-0@1", "kill", false, 2),
        new Receipt("L2", "t-3@7", "rekeyed", false, 1));

    Map<String, Counts> c = DoubleTally.count(calls);

    assertThat(c.get("kill")).isEqualTo(new Counts(4, 1, 1, 0, 0));
    assertThat(c.get("rekeyed")).isEqualTo(new Counts(1, 0, 0, 1, 0));
    assertThat(c.get("kill").unflagged()).isEqualTo(2);
  }

  @Test
  void count_flaggedRepeat_isNotUnflagged_flaggedFirstCallIsNoRepeatAtAll() {
    List<Receipt> calls = List.of(
        new Receipt("L1", "t-0@0", "kill", true, 1),
        new Receipt("L2", "t-0@1", "kill", false, 1),
        new Receipt("L2", "t-0@1", "kill", true, 1));

    Counts c = DoubleTally.count(calls).get("kill");

    assertThat(c.repeats()).isEqualTo(1);
    assertThat(c.flagged()).isEqualTo(1);
    assertThat(c.unflagged()).isZero();
  }

  @Test
  void count_repeatCountsAgainstTheCaseOfItsRecord_notOfTheFirstCall() {
    List<Receipt> calls = List.of(
        new Receipt("L1", "t-0@0", "warm", false, 1),
        new Receipt("L1", "t-5@900", "late", false, 1),
        new Receipt("L1", "t-5@900", "late", false, 1));

    Map<String, Counts> c = DoubleTally.count(calls);

    assertThat(c.get("warm")).isEqualTo(new Counts(1, 0, 0, 0, 0));
    assertThat(c.get("late")).as("a re-send, then that re-send redelivered").isEqualTo(new Counts(2, 1, 0, 1, 0));
  }

  @Test
  void missing_namesFactsNoCallCarried() {
    assertThat(DoubleTally.missing(List.of("L1", "L2", "L3"), List.of(new Receipt("L2", "t-0@0", "kill", false, 1))))
        .containsExactly("L1", "L3");
  }

  @Test
  void per10k_scalesToTenThousandRecords() {
    assertThat(DoubleTally.per10k(37, 10_000)).isEqualTo(37.0);
    assertThat(DoubleTally.per10k(37, 5_000)).isEqualTo(74.0);
    assertThat(DoubleTally.per10k(3, 0)).isZero();
  }
}
