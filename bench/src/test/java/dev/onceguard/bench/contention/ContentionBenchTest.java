package dev.onceguard.bench.contention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class ContentionBenchTest {
  @Test
  void plan_readsRttAndBusinessCallPairs() {
    assertThat(ContentionBench.plan("0:0, 2:20,0.5:1")).containsExactly(new ContentionReport.Setting(0, 0),
        new ContentionReport.Setting(2, 20), new ContentionReport.Setting(0.5, 1));
    assertThatThrownBy(() -> ContentionBench.plan("2-20")).hasMessageContaining("'2-20' is not rtt-ms:business-call-ms");
    assertThat(ContentionBench.retryCell("2:20:20"))
        .isEqualTo(new ContentionBench.RetryCell(new ContentionReport.Setting(2, 20), 20));
    assertThatThrownBy(() -> ContentionBench.retryCell("2:20")).hasMessageContaining("(or none)");
  }
}
