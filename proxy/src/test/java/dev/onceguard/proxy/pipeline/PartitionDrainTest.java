package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.time.FakeTime;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Letting partitions go, with a fake of the route's work, Kafka's {@link MockConsumer} for the
 * commits and a fake clock for the bounds (waiting for a completion that never comes moves it).
 */
class PartitionDrainTest {
  private static final TopicPartition P0 = new TopicPartition("orders", 0);
  private static final TopicPartition P1 = new TopicPartition("orders", 1);

  private final MockConsumer<byte[], byte[]> consumer = new MockConsumer<>("earliest");
  private final FakeTime time = new FakeTime(0);
  private final AtomicLong nanos = new AtomicLong();
  private final PartitionCommits commits = new PartitionCommits("orders", consumer, Duration.ofSeconds(1), time);
  private final FakeWork work = new FakeWork();
  private final PartitionDrain drain = new PartitionDrain("orders", work, commits, nanos::get);
  private PartitionCommits.Partition p0;

  /** A started record: whether it stops when cancelled, finishes by itself, and was cancelled. */
  private static final class Running {
    final long offset;
    final boolean honoursCancel;
    boolean cancelled;

    Running(long offset, boolean honoursCancel) {
      this.offset = offset;
      this.honoursCancel = honoursCancel;
    }
  }

  private final class FakeWork implements PartitionDrain.Work {
    final Map<Long, Running> running = new HashMap<>();
    final Deque<Runnable> completions = new ArrayDeque<>();
    final List<TopicPartition> cancelled = new ArrayList<>();
    final List<TopicPartition> forgotten = new ArrayList<>();
    int waiting;

    /** The record reports back by itself: finished. */
    void finishesSoon(Running r) {
      completions.add(() -> {
        running.remove(r.offset);
        commits.finished(p0, r.offset);
      });
    }

    @Override
    public int dropWaiting(Collection<TopicPartition> tps) {
      int n = tps.contains(P0) ? waiting : 0;
      waiting -= n;
      return n;
    }

    @Override
    public int running(Collection<TopicPartition> tps) {
      return tps.contains(P0) ? running.size() : 0;
    }

    @Override
    public void cancel(Collection<TopicPartition> tps) {
      cancelled.addAll(tps);
      if (!tps.contains(P0)) {
        return;
      }
      for (Running r : running.values()) {
        if (!r.cancelled && r.honoursCancel) {
          completions.add(() -> running.remove(r.offset)); // cancelled: not finished
        }
        r.cancelled = true;
      }
    }

    @Override
    public boolean applyNextCompletion(long waitNanos) {
      Runnable c = completions.poll();
      if (c == null) {
        nanos.addAndGet(waitNanos); // nothing came within the wait
        return false;
      }
      c.run();
      return true;
    }

    @Override
    public void forget(Collection<TopicPartition> tps) {
      forgotten.addAll(tps);
      tps.forEach(commits::forget);
    }
  }

  @BeforeEach
  void partitionWithOneFinishedRecordAndOneRunning() {
    consumer.assign(List.of(P0, P1));
    consumer.updateBeginningOffsets(Map.of(P0, 0L, P1, 0L));
    p0 = commits.assigned(P0);
    commits.taken(p0, 0);
    commits.taken(p0, 1);
    commits.taken(p0, 2);
    commits.finished(p0, 0);
    work.waiting = 1; // offset 2 has not started
  }

  private Running runningAtOffset1(boolean honoursCancel) {
    Running r = new Running(1, honoursCancel);
    work.running.put(1L, r);
    return r;
  }

  private long committed(TopicPartition tp) {
    OffsetAndMetadata om = consumer.committed(Set.of(tp)).get(tp);
    return om == null ? -1 : om.offset();
  }

  @Test
  void revoke_givesRunningRecordsAGraceToFinish_thenCancels_waitsForThem_commitsTheFinishedPrefix_andForgets() {
    Running r = runningAtOffset1(true);
    drain.revoke(List.of(P0), Duration.ofSeconds(5));
    assertThat(r.cancelled).isTrue();
    assertThat(work.running).isEmpty();
    assertThat(work.waiting).as("records not started are dropped for the next owner").isZero();
    assertThat(committed(P0)).isEqualTo(1);
    assertThat(work.forgotten).containsExactly(P0);
    assertThat(Duration.ofNanos(nanos.get())).as("the grace (a fifth of the bound, at most 1 s); no waiting once the cancelled record"
        + " reported back").isEqualTo(PartitionDrain.REVOKE_GRACE_MAX);
  }

  @Test
  void revoke_recordThatFinishesWithinTheGrace_isNotCancelled_andItsOffsetIsCommitted() {
    Running r = runningAtOffset1(true);
    work.completions.add(() -> {
      work.running.remove(1L);
      commits.finished(p0, 1);
    });
    drain.revoke(List.of(P0), Duration.ofSeconds(5));
    assertThat(r.cancelled).as("it ended on its own: its claim is confirmed, not left leased for the next owner").isFalse();
    assertThat(committed(P0)).isEqualTo(2);
    assertThat(nanos.get()).isZero();
  }

  @Test
  void revoke_recordIgnoringItsCancellation_isAbandonedAtTheBound_andNotCommitted() {
    runningAtOffset1(false);
    drain.revoke(List.of(P0), Duration.ofMillis(300));
    assertThat(Duration.ofNanos(nanos.get())).as("the grace, then the rest of the bound").isEqualTo(Duration.ofMillis(300));
    assertThat(committed(P0)).isEqualTo(1);
    assertThat(work.forgotten).containsExactly(P0);
  }

  @Test
  void revoke_commitsOnlyTheRevokedPartitions() {
    PartitionCommits.Partition p1 = commits.assigned(P1);
    commits.taken(p1, 0);
    commits.finished(p1, 0);
    drain.revoke(List.of(P0), Duration.ofSeconds(5));
    assertThat(committed(P0)).isEqualTo(1);
    assertThat(committed(P1)).isEqualTo(-1);
    assertThat(work.forgotten).containsExactly(P0);
  }

  @Test
  void shutdown_letsRunningRecordsFinishBeforeCancelling_thenCommitsTheWholePrefix() {
    Running r = runningAtOffset1(true);
    work.finishesSoon(r);
    drain.shutdown(List.of(P0), Duration.ofSeconds(5), Duration.ofSeconds(2));
    assertThat(r.cancelled).isFalse();
    assertThat(committed(P0)).isEqualTo(2);
    assertThat(work.forgotten).containsExactly(P0);
  }

  @Test
  void shutdown_recordStillRunningAfterTheTimeout_isCancelled_andAbandonedAfterTheGrace() {
    Running r = runningAtOffset1(false);
    drain.shutdown(List.of(P0), Duration.ofSeconds(5), Duration.ofSeconds(2));
    assertThat(r.cancelled).isTrue();
    assertThat(Duration.ofNanos(nanos.get())).isEqualTo(Duration.ofSeconds(7));
    assertThat(committed(P0)).isEqualTo(1);
    assertThat(work.forgotten).containsExactly(P0);
  }

  @Test
  void lose_cancelsAndForgets_withoutCommitting() {
    Running r = runningAtOffset1(true);
    drain.lose(List.of(P0));
    assertThat(r.cancelled).isTrue();
    assertThat(committed(P0)).isEqualTo(-1);
    assertThat(work.forgotten).containsExactly(P0);
  }

  @Test
  void abandon_appliesWhatAlreadyReportedBack_andCommitsIt() {
    Running r = runningAtOffset1(false);
    work.finishesSoon(r);
    drain.abandon(List.of(P0));
    assertThat(committed(P0)).isEqualTo(2);
    assertThat(nanos.get()).as("abandoning never waits").isZero();
    assertThat(work.forgotten).containsExactly(P0);
  }
}
