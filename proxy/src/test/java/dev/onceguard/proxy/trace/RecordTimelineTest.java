package dev.onceguard.proxy.trace;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.trace.RecordTimeline.Count;
import dev.onceguard.proxy.trace.RecordTimeline.Key;
import dev.onceguard.proxy.trace.RecordTimeline.Mark;
import dev.onceguard.proxy.trace.RecordTimeline.Step;
import dev.onceguard.proxy.trace.RecordTimeline.Trace;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class RecordTimelineTest {
  @AfterEach
  void off() {
    RecordTimeline.stop();
  }

  /** Every hook, for record t/0@{@code offset}, as the pipeline calls them for a guarded record. */
  private static void allHooks(long offset) {
    RecordTimeline.polled("t", 0, offset, 1_000L);
    RecordTimeline.mark("t", 0, offset, Mark.LAUNCHED);
    RecordTimeline.submitted("t", 0, offset, Step.CLAIM, 3, 2);
    List<Key> keys = List.of(new Key("t", 0, offset));
    RecordTimeline.grouped(Step.CLAIM, keys, 5);
    RecordTimeline.working(Step.CLAIM, keys);
    RecordTimeline.beforeCommit();
    RecordTimeline.worked();
    RecordTimeline.mark("t", 0, offset, Mark.VERDICT);
  }

  @Test
  void off_theHooksFollowNothing_andARecordPolledBeforeTheStartIsNotFollowedAfterIt() {
    assertThat(RecordTimeline.on()).isFalse();
    allHooks(1);
    RecordTimeline.start(100, false);
    RecordTimeline.mark("t", 0, 1, Mark.CLAIM_BACK); // polled while off: not followed now either
    assertThat(RecordTimeline.stop()).isEmpty();

    allHooks(2); // stopped again
    RecordTimeline.start(100, false);
    assertThat(RecordTimeline.stop()).as("a new start forgets nothing it never saw").isEmpty();
  }

  @Test
  void on_stampsEachMarkOnItsThread_theQueuesSeen_andAutocommitWorkEndsItsStatementsWithIt() throws Exception {
    RecordTimeline.start(100, false);
    allHooks(7);
    // a confirm in autocommit: no COMMIT of its own, on a thread of another name
    Thread worker = new Thread(() -> {
      List<Key> keys = List.of(new Key("t", 0, 7));
      RecordTimeline.working(Step.CONFIRM, keys);
      RecordTimeline.worked();
    }, "onceguard-mysql-4");
    worker.start();
    worker.join();
    RecordTimeline.mark("t", 0, 7, Mark.VERDICT); // again: the last time is kept, the repeat counted
    RecordTimeline.mark("t", 0, 8, Mark.VERDICT); // never polled: not followed

    List<Trace> got = RecordTimeline.stop();
    assertThat(got).hasSize(1);
    Trace t = got.get(0);
    assertThat(t.key()).isEqualTo(new Key("t", 0, 7));
    assertThat(t.createdMillis()).isEqualTo(1_000L);
    assertThat(t.polledMillis()).isGreaterThan(1_000L);
    long prev = 0;
    for (Mark m : List.of(Mark.POLLED, Mark.LAUNCHED, Mark.CLAIM_SUBMIT, Mark.CLAIM_GROUP, Mark.CLAIM_WORK, Mark.CLAIM_STATEMENTS,
        Mark.CLAIM_COMMIT, Mark.CONFIRM_WORK, Mark.CONFIRM_STATEMENTS, Mark.CONFIRM_COMMIT, Mark.VERDICT)) {
      assertThat(t.has(m)).as(m.name()).isTrue();
      assertThat(t.at(m)).as(m.name()).isGreaterThanOrEqualTo(prev);
      prev = t.at(m);
    }
    assertThat(t.has(Mark.L1_START)).isFalse();
    assertThat(t.has(Mark.CONFIRM_SUBMIT)).isFalse();
    assertThat(t.thread(Mark.CLAIM_COMMIT)).isEqualTo(Thread.currentThread().getName());
    assertThat(t.thread(Mark.CONFIRM_STATEMENTS)).isEqualTo("onceguard-mysql-4");
    assertThat(t.at(Mark.CONFIRM_STATEMENTS)).isLessThanOrEqualTo(t.at(Mark.CONFIRM_COMMIT));
    assertThat(t.count(Count.CLAIM_QUEUED)).isEqualTo(3);
    assertThat(t.count(Count.CLAIM_RUNNING)).isEqualTo(2);
    assertThat(t.count(Count.CLAIM_GROUP_SIZE)).isEqualTo(1);
    assertThat(t.count(Count.CLAIM_DB_QUEUED)).isEqualTo(5);
    assertThat(t.count(Count.CONFIRM_QUEUED)).isEqualTo(-1);
    assertThat(t.repeats()).isEqualTo(1);
    assertThat(t.waited()[Mark.POLLED.ordinal()]).as("schedstat not asked for").isEqualTo(-1);
  }

  @Test
  void followsAtMostItsCapacity() {
    RecordTimeline.start(2, false);
    for (long i = 0; i < 5; i++) {
      RecordTimeline.polled("t", 1, i, 0L);
    }
    assertThat(RecordTimeline.stop()).extracting(tr -> tr.key().offset()).containsExactlyInAnyOrder(0L, 1L);
  }

  @Test
  void withSchedstat_eachMarkCarriesItsThreadsCpuAndRunQueueTimes_onLinux() {
    RecordTimeline.start(10, true);
    RecordTimeline.polled("t", 0, 1, 0L);
    Trace t = RecordTimeline.stop().get(0);
    if (RecordTimeline.schedstat() != null) {
      assertThat(t.ran()[Mark.POLLED.ordinal()]).isPositive();
      assertThat(t.waited()[Mark.POLLED.ordinal()]).isNotNegative();
    }
  }
}
