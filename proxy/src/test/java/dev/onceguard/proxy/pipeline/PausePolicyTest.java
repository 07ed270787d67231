package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.pipeline.PausePolicy.Load;
import java.util.List;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Pause decisions applied to Kafka's {@link MockConsumer}. */
class PausePolicyTest {
  private static final TopicPartition P0 = new TopicPartition("orders", 0);
  private static final TopicPartition P1 = new TopicPartition("orders", 1);

  private final MockConsumer<byte[], byte[]> consumer = new MockConsumer<>("earliest");
  /** 4 held per partition, 10 per route, 20 uncommitted per partition. */
  private final PausePolicy policy = new PausePolicy("orders", consumer, 4, 10, 20);

  @BeforeEach
  void assign() {
    consumer.assign(List.of(P0, P1));
  }

  @Test
  void partitionAtItsInFlightBound_isPaused_andResumedBelowIt() {
    assertThat(policy.update(4, List.of(new Load(P0, 4, 4), new Load(P1, 0, 0)))).isEqualTo(1);
    assertThat(consumer.paused()).containsExactly(P0);
    assertThat(policy.update(3, List.of(new Load(P0, 3, 3), new Load(P1, 0, 0)))).isZero();
    assertThat(consumer.paused()).isEmpty();
  }

  @Test
  void uncommittedSpanAtItsBound_pausesEvenWithFewRecordsHeld_andResumesWhenItShrinks() {
    // one record stuck at the head, nineteen finished behind it: the span is the bound
    assertThat(policy.update(1, List.of(new Load(P0, 1, 20), new Load(P1, 1, 19)))).isEqualTo(1);
    assertThat(consumer.paused()).containsExactly(P0);
    policy.update(1, List.of(new Load(P0, 1, 21), new Load(P1, 1, 19)));
    assertThat(consumer.paused()).containsExactly(P0);
    policy.update(0, List.of(new Load(P0, 0, 0), new Load(P1, 1, 19)));
    assertThat(consumer.paused()).isEmpty();
    assertThat(policy.isPaused(P0)).isFalse();
  }

  @Test
  void routeAtItsBound_pausesEveryPartition() {
    assertThat(policy.update(10, List.of(new Load(P0, 3, 3), new Load(P1, 3, 3)))).isEqualTo(2);
    assertThat(consumer.paused()).containsExactlyInAnyOrder(P0, P1);
    policy.update(9, List.of(new Load(P0, 3, 3), new Load(P1, 3, 3)));
    assertThat(consumer.paused()).isEmpty();
  }

  @Test
  void forgottenPartition_isNoLongerCountedAsPaused() {
    policy.update(4, List.of(new Load(P0, 4, 4), new Load(P1, 0, 0)));
    policy.forget(P0);
    assertThat(policy.isPaused(P0)).isFalse();
    assertThat(policy.update(0, List.of(new Load(P1, 0, 0)))).isZero();
  }
}
