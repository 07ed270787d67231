package dev.onceguard.client.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.KafkaRecord;
import java.util.List;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.junit.jupiter.api.Test;

class PartitionStateTest {
  private static final long NONE_BUFFERED = Long.MAX_VALUE;

  private static Delivery at(long offset) {
    return Delivery.newBuilder()
        .setDeliveryId("d" + offset)
        .setRecord(KafkaRecord.newBuilder().setTopic("orders").setPartition(0).setOffset(offset))
        .build();
  }

  private static List<Long> offsets(List<Delivery> deliveries) {
    return deliveries.stream().map(d -> d.getRecord().getOffset()).toList();
  }

  @Test
  void position_isWhatWasHandedOut_elseTheLowestBuffered_elseTheCommittedOffset_elseZero() {
    PartitionState s = new PartitionState();
    assertThat(s.position(() -> NONE_BUFFERED)).isZero();
    s.acknowledged(4);
    assertThat(s.position(() -> NONE_BUFFERED)).isEqualTo(4);
    assertThat(s.position(() -> 7)).isEqualTo(7);
    s.handedOut(9);
    s.handedOut(8); // out of order: the position stays after the highest
    assertThat(s.position(() -> 7)).isEqualTo(10);
  }

  @Test
  void unassign_dropsWhatBelongsToTheStream_andKeepsThePauseAndTheCommittedOffset() {
    PartitionState s = new PartitionState();
    s.assign();
    s.pause();
    s.addOutstanding(at(5), 1);
    s.handedOut(5);
    s.acknowledged(3);

    s.unassign();

    assertThat(s.isAssigned()).isFalse();
    assertThat(s.isPaused()).isTrue();
    assertThat(s.hasOutstanding()).isFalse();
    assertThat(s.committed()).isEqualTo(new OffsetAndMetadata(3));
    assertThat(s.position(() -> NONE_BUFFERED)).as("back to the committed offset").isEqualTo(3);
    assertThat(s.isUnused()).isFalse();
    s.resume();
    assertThat(s.isUnused()).as("a committed offset is kept").isFalse();
    assertThat(new PartitionState().isUnused()).isTrue();
  }

  @Test
  void rewindTo_takesBackTheOutstandingDeliveriesFromTheOffset_andMovesThePositionThere() {
    PartitionState s = new PartitionState();
    for (long o : new long[] {4, 2, 6}) {
      s.addOutstanding(at(o), o);
      s.handedOut(o);
    }

    assertThat(offsets(s.rewindTo(9))).isEmpty();
    assertThat(s.position(() -> NONE_BUFFERED)).as("nothing to take back: unchanged").isEqualTo(7);

    assertThat(offsets(s.rewindTo(3))).containsExactly(4L, 6L);
    assertThat(s.position(() -> NONE_BUFFERED)).isEqualTo(3);
    assertThat(s.outstandingCount()).isEqualTo(1);
    assertThat(s.outstandingNext()).isEqualTo(new OffsetAndMetadata(3));
  }

  @Test
  void takeOutstandingBelow_takesTheDeliveriesBelowTheCommittedOffset_inOffsetOrder() {
    PartitionState s = new PartitionState();
    for (long o : new long[] {5, 1, 3}) {
      s.addOutstanding(at(o), o);
    }

    assertThat(offsets(s.takeOutstandingBelow(5))).containsExactly(1L, 3L);
    assertThat(s.takeOutstanding(3)).isNull();
    assertThat(offsets(s.takeAllOutstanding())).containsExactly(5L);
    assertThat(s.hasOutstanding()).isFalse();
  }

  @Test
  void outstandingOrder_isTheOneGivenWhenThePartitionHadNoOutstandingDelivery() {
    PartitionState s = new PartitionState();
    s.addOutstanding(at(1), 10);
    s.addOutstanding(at(2), 11);
    assertThat(s.outstandingOrder()).isEqualTo(10);

    s.takeAllOutstanding();
    s.addOutstanding(at(3), 12);
    assertThat(s.outstandingOrder()).isEqualTo(12);
  }
}
