package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.time.FakeTime;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Commit bookkeeping against Kafka's {@link MockConsumer}, with a fake clock. */
class PartitionCommitsTest {
  private static final TopicPartition P0 = new TopicPartition("orders", 0);
  private static final TopicPartition P1 = new TopicPartition("orders", 1);
  private static final Duration INTERVAL = Duration.ofSeconds(1);

  private final MockConsumer<byte[], byte[]> consumer = new MockConsumer<>("earliest");
  private final FakeTime time = new FakeTime(1_000_000);
  private final PartitionCommits commits = new PartitionCommits("orders", consumer, INTERVAL, time);

  @BeforeEach
  void assign() {
    consumer.assign(List.of(P0, P1));
    consumer.updateBeginningOffsets(Map.of(P0, 0L, P1, 0L));
  }

  private long committed(TopicPartition tp) {
    OffsetAndMetadata om = consumer.committed(Set.of(tp)).get(tp);
    return om == null ? -1 : om.offset();
  }

  private void takenAndFinished(PartitionCommits.Partition p, long offset) {
    commits.taken(p, offset);
    commits.finished(p, offset);
  }

  private void commitNow() {
    time.advance(INTERVAL);
    commits.commitIfDue();
  }

  @Test
  void commitIfDue_commitsOnlyTheContiguousFinishedPrefix() {
    PartitionCommits.Partition p = commits.assigned(P0);
    for (long o = 0; o < 4; o++) {
      commits.taken(p, o);
    }
    commits.finished(p, 1);
    commits.finished(p, 2);
    commitNow();
    assertThat(committed(P0)).isZero();
    commits.finished(p, 0);
    commitNow();
    assertThat(committed(P0)).isEqualTo(3);
    commits.finished(p, 3);
    commitNow();
    assertThat(committed(P0)).isEqualTo(4);
  }

  @Test
  void commitIfDue_beforeTheInterval_commitsNothing() {
    PartitionCommits.Partition p = commits.assigned(P0);
    takenAndFinished(p, 0);
    time.advance(INTERVAL.minusMillis(1));
    commits.commitIfDue();
    assertThat(committed(P0)).isEqualTo(-1);
    time.advance(Duration.ofMillis(1));
    commits.commitIfDue();
    assertThat(committed(P0)).isEqualTo(1);
    assertThat(commits.nextDueAt()).isEqualTo(time.nowMillis() + INTERVAL.toMillis());
  }

  @Test
  void idlePartition_isCommittedAtTheConsumersPosition() {
    commits.assigned(P1);
    consumer.seek(P1, 7);
    commitNow();
    assertThat(committed(P1)).isEqualTo(7);
  }

  @Test
  void commitSync_commitsOnlyTheGivenPartitions() {
    PartitionCommits.Partition p0 = commits.assigned(P0);
    PartitionCommits.Partition p1 = commits.assigned(P1);
    takenAndFinished(p0, 5);
    takenAndFinished(p1, 9);
    commits.commitSync(List.of(P0), "revoked");
    assertThat(committed(P0)).isEqualTo(6);
    assertThat(committed(P1)).isEqualTo(-1);
  }

  @Test
  void uncommittedAndOldestUnfinished_followTheFirstUnfinishedRecord() {
    PartitionCommits.Partition p = commits.assigned(P0);
    assertThat(p.uncommitted()).isZero();
    assertThat(p.oldestUnfinishedTakenAt()).isEqualTo(-1);
    long t0 = time.nowMillis();
    commits.taken(p, 0);
    commits.taken(p, 1);
    time.advance(Duration.ofSeconds(3));
    commits.taken(p, 2);
    commits.finished(p, 1);
    assertThat(p.uncommitted()).isEqualTo(3);
    assertThat(p.oldestUnfinishedTakenAt()).isEqualTo(t0);
    commits.finished(p, 0);
    // 1 was finished already: the head moves to 2, taken three seconds later
    assertThat(p.uncommitted()).isEqualTo(1);
    assertThat(p.oldestUnfinishedTakenAt()).isEqualTo(t0 + 3_000);
    commits.finished(p, 2);
    assertThat(p.uncommitted()).isZero();
    assertThat(p.oldestUnfinishedTakenAt()).isEqualTo(-1);
  }

  @Test
  void forgottenPartition_isNotCommittedAnyMore() {
    PartitionCommits.Partition p = commits.assigned(P0);
    takenAndFinished(p, 0);
    commits.forget(P0);
    commits.commitSync(List.of(P0), "revoked");
    commitNow();
    assertThat(committed(P0)).isEqualTo(-1);
  }
}
