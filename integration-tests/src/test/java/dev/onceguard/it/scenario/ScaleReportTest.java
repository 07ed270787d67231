package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.it.scenario.ScaleReport.Cell;
import java.util.List;
import java.util.Map;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

class ScaleReportTest {
  private static final List<Long> ONE_TO_HUNDRED = LongStream.rangeClosed(1, 100).boxed().toList();

  @Test
  void percentile_isNearestRank() {
    assertThat(ScaleReport.percentile(ONE_TO_HUNDRED, 50)).isEqualTo(50);
    assertThat(ScaleReport.percentile(ONE_TO_HUNDRED, 99)).isEqualTo(99);
    assertThat(ScaleReport.percentile(List.of(7L, 3L, 5L), 50)).isEqualTo(5);
    assertThat(ScaleReport.percentile(List.of(7L, 3L, 5L), 99)).isEqualTo(7);
    assertThat(ScaleReport.percentile(List.of(), 99)).isZero();
  }

  @Test
  void exactlyOnce_passesOnlyWhenEveryFactArrivedOnce() {
    assertThatCode(() -> ScaleReport.requireExactlyOnce("c", List.of("a", "b"), Map.of("a", 1L, "b", 1L))).doesNotThrowAnyException();
    assertThatThrownBy(() -> ScaleReport.requireExactlyOnce("c", List.of("a", "b"), Map.of("a", 1L)))
        .hasMessageContaining("1 of 2 facts lost [b]");
    assertThatThrownBy(() -> ScaleReport.requireExactlyOnce("c", List.of("a", "b"), Map.of("a", 1L, "b", 2L)))
        .hasMessageContaining("1 received more than once [b]");
    assertThatThrownBy(() -> ScaleReport.requireExactlyOnce("c", List.of("a"), Map.of("a", 1L, "z", 1L)))
        .hasMessageContaining("1 received that were never sent [z]");
  }

  @Test
  void table_andSummary_fromTheCells() {
    Cell near = new Cell("3 × Kafka 3.5.2", 1, 0, 100, 1000, 10.0, ONE_TO_HUNDRED, List.of(4L, 6L), 3000, 2500);
    Cell far = new Cell("3 × Kafka 3.5.2", 1, 10, 100, 1000, 12.5, ONE_TO_HUNDRED.stream().map(a -> a * 2).toList(),
        List.of(5L), 3500, -1);
    List<Cell> cells = List.of(near, far);

    assertThat(ScaleReport.markdown(cells)).contains(
        "| 3 × Kafka 3.5.2 | 1 | 0 ms | 100 | 100 | 50 | 99 | 4 / 6 | 3.00 | 2.50 |",
        "| 3 × Kafka 3.5.2 | 1 | 10 ms | 100 | 80 | 100 | 198 | 5 / 5 | 3.50 | – |");
    assertThat(far.keptPace()).isFalse();
    assertThat(ScaleReport.summary(cells, "3 × Kafka 3.5.2")).as("one pass: no verdict on drift or RTT").isEqualTo(
        "1 process, RTTs in the order 0, 10 ms: fell behind the offered pace in 1 of 2 cells; record age p50 50 ms in the first cell,"
            + " 100 ms in the last (p99 99, 198), of which until the brokers acked p50 4, 5 ms; 3.00–3.50 MySQL round trips per record.");
    assertThat(ScaleReport.summary(cells, "other")).isEmpty();
  }

  @Test
  void summary_tellsDriftFromRtt_whenThePassesRanInOppositeOrders() {
    List<Long> slow = List.of(300L);
    List<Long> fast = List.of(100L);
    List<Cell> drift = List.of(cell(1, 0, slow), cell(1, 10, fast), cell(4, 10, slow), cell(4, 0, fast));
    assertThat(ScaleReport.summary(drift, "b")).contains("4 processes, RTTs in the order 10, 0 ms")
        .endsWith("In each pass the age fell from its first cell to its last, whichever RTT came first, and so did the part until the"
            + " brokers acked, which no added RTT reaches: the time since the processes started and the shared machine's load set the"
            + " age here; the added RTT's effect is smaller than that drift.");
    List<Cell> rtt = List.of(cell(1, 0, fast), cell(1, 10, slow), cell(4, 10, slow), cell(4, 0, fast));
    assertThat(ScaleReport.summary(rtt, "b")).endsWith("In each pass the age was higher at the largest RTT than at the smallest, in either"
        + " order: the RTT's effect.");
    List<Cell> neither = List.of(cell(1, 0, fast), cell(1, 10, slow), cell(4, 10, fast), cell(4, 0, slow));
    assertThat(ScaleReport.summary(neither, "b")).endsWith("the differences are within the run-to-run spread.");
  }

  private static Cell cell(int processes, int rtt, List<Long> ages) {
    return new Cell("b", processes, rtt, 100, 1000, 10.0, ages, ages, 1000, 1000);
  }
}
