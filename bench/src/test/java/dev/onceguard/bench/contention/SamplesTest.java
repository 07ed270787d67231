package dev.onceguard.bench.contention;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class SamplesTest {
  @Test
  void recorder_keepsTransitionsBegunInsideTheWindowOnly() {
    Recorder rec = new Recorder(1_000, 2_000);
    rec.add(999, 5_000_000, 1_000_000, true); // warm-up
    rec.add(1_000, 7_000_000, 2_000_000, false);
    rec.add(1_999, 9_000_000, 3_000_000, true);
    rec.add(2_000, 11_000_000, 4_000_000, true); // after the window

    Samples s = rec.samples();

    assertThat(s.totalMicros()).containsExactly(7_000, 9_000);
    assertThat(s.waitMicros()).containsExactly(2_000, 3_000);
    assertThat(s.metBusy()).isEqualTo(1);
    assertThat(rec.open(1_999)).isTrue();
    assertThat(rec.open(2_000)).isFalse();
  }

  @Test
  void figures_mergeInstancesAndTakeNearestRankPercentiles() {
    long[] a = new long[100];
    long[] b = new long[100];
    for (int i = 0; i < 100; i++) {
      a[i] = (200 - i) * 1000L; // 101..200 ms, out of order
      b[i] = (i + 1) * 1000L; // 1..100 ms
    }
    Samples merged = Samples.merge(List.of(new Samples(a, b, 3, 2.0), new Samples(b, a, 1, 2.0)));

    Figures f = merged.figures();

    assertThat(f.count()).isEqualTo(200);
    assertThat(f.perSecond()).isEqualTo(100.0);
    assertThat(f.p50Ms()).isEqualTo(100.0); // the 100th of 1..200 ms
    assertThat(f.p99Ms()).isEqualTo(198.0); // the 198th
    assertThat(f.waitP99Ms()).isEqualTo(198.0);
    assertThat(f.metBusyShare()).isEqualTo(0.02);
  }

  @Test
  void figures_ofNothing_areNotNumbers() {
    Figures f = new Samples(new long[0], new long[0], 0, 1.0).figures();

    assertThat(f.count()).isZero();
    assertThat(f.p99Ms()).isNaN();
    assertThat(f.metBusyShare()).isZero();
  }
}
