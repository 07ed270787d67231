package dev.onceguard.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.guard.VerdictListener.Step;
import java.util.Map;
import org.junit.jupiter.api.Test;

class StepTimesTest {
  @Test
  void keepsOnlyWhileArmed_andGivesNearestRankPercentilesPerStepInStepOrder() {
    StepTimes t = new StepTimes();
    t.add(Step.CLAIM, 999_000_000L); // before arm: a warm-up record, not kept
    t.arm();
    for (int ms = 2000; ms >= 1; ms--) { // out of order, and past the first array's 1,024
      t.add(Step.CONFIRM, ms * 1_000_000L);
    }
    t.add(Step.CLAIM, 3_000_000L);

    Map<String, double[]> s = t.disarm();
    t.add(Step.HANDLE, 1_000_000L); // after: not kept

    assertThat(s).containsOnlyKeys("claim", "confirm");
    assertThat(s.keySet()).containsExactly("claim", "confirm");
    assertThat(s.get("claim")).containsExactly(3.0, 3.0);
    assertThat(s.get("confirm")).containsExactly(1000.0, 1980.0);
    t.arm();
    assertThat(t.disarm()).as("arming starts afresh").isEmpty();
  }
}
