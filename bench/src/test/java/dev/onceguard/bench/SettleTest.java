package dev.onceguard.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SettleTest {
  @Test
  void ticksAddTheFirstEightFieldsAndIdleIsTheFourth() {
    // user nice system idle iowait irq softirq steal guest guest_nice
    assertArrayEquals(new long[] {100 + 1 + 20 + 600 + 30 + 0 + 4 + 5, 600},
        Settle.ticks("cpu  100 1 20 600 30 0 4 5 7 0"));
  }

  @Test
  void busyShareCountsIoWaitAndStealAsBusy() {
    long[] before = Settle.ticks("cpu  100 0 20 600 30 0 0 5 0 0");
    // 200 ticks pass: 40 user, 10 iowait, 10 steal, 140 idle
    long[] after = Settle.ticks("cpu  140 0 20 740 40 0 0 15 0 0");
    assertEquals(0.30, Settle.busyShare(before, after), 1e-9);
    assertEquals(1.0, Settle.busyShare(after, after), 1e-9);
  }
}
