package dev.onceguard.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.onceguard.proxy.trace.RecordTimeline.Count;
import dev.onceguard.proxy.trace.RecordTimeline.Key;
import dev.onceguard.proxy.trace.RecordTimeline.Mark;
import dev.onceguard.proxy.trace.RecordTimeline.Trace;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TimeBreakdownTest {
  private static final long T0 = 5_000_000_000L;

  /**
   * A trace polled {@code beforePollMs} after it was produced; {@code steps}: per mark passed after
   * POLLED, {mark, ms after POLLED, thread, run-queue ns so far or null}.
   */
  private static Trace trace(long offset, long beforePollMs, int claimQueued, Object[]... steps) {
    int marks = Mark.values().length;
    long[] nanos = new long[marks];
    String[] threads = new String[marks];
    long[] waited = new long[marks];
    Arrays.fill(waited, -1);
    int[] counts = new int[Count.values().length];
    Arrays.fill(counts, -1);
    counts[Count.CLAIM_QUEUED.ordinal()] = claimQueued;
    nanos[Mark.POLLED.ordinal()] = T0;
    threads[Mark.POLLED.ordinal()] = "onceguard-route-r";
    waited[Mark.POLLED.ordinal()] = 0;
    for (Object[] s : steps) {
      int i = ((Mark) s[0]).ordinal();
      nanos[i] = T0 + Math.round(((Number) s[1]).doubleValue() * 1e6);
      threads[i] = (String) s[2];
      waited[i] = s.length > 3 && s[3] != null ? ((Number) s[3]).longValue() : -1;
    }
    return new Trace(new Key("t", 0, offset), 10_000L, 10_000L + beforePollMs, nanos, threads, counts, 0, waited, new long[marks]);
  }

  private static Object[] at(Mark m, double ms, String thread) {
    return new Object[] {m, ms, thread};
  }

  @Test
  void cut_segmentsRunFromTheLastMarkPassed_addUpToTheAge_andCountHopsAndSameThreadRunQueueWait() {
    Trace t = trace(1, 4, 0,
        new Object[] {Mark.LAUNCHED, 0.5, "onceguard-route-r", 200_000L},
        at(Mark.L1_START, 0.75, "onceguard-route-r"),
        at(Mark.L1_END, 1.25, "lettuce-nioEventLoop-4-1"),
        at(Mark.CLAIM_SUBMIT, 1.5, "lettuce-nioEventLoop-4-1"),
        at(Mark.CLAIM_GROUP, 1.5, "lettuce-nioEventLoop-4-1"),
        new Object[] {Mark.CLAIM_WORK, 3.5, "onceguard-mysql-3", 1_000_000L},
        new Object[] {Mark.CLAIM_STATEMENTS, 5.0, "onceguard-mysql-3", 1_500_000L},
        new Object[] {Mark.CLAIM_COMMIT, 6.0, "onceguard-mysql-3", 1_750_000L},
        at(Mark.CLAIM_BACK, 6.25, "onceguard-mysql-3"),
        at(Mark.VERDICT, 7.0, "onceguard-mysql-3"));

    TimeBreakdown.Cut c = TimeBreakdown.cut(t);

    assertThat(c.segments().keySet()).containsExactly("before_poll", "launched", "l1_start", "l1_end", "claim_submit", "claim_group",
        "claim_work", "claim_statements", "claim_commit", "claim_back", "verdict");
    assertThat(c.segments().get("before_poll")).isEqualTo(4.0);
    assertThat(c.segments().get("claim_work")).isCloseTo(2.0, within(1e-9));
    assertThat(c.segments().get("claim_statements")).isCloseTo(1.5, within(1e-9));
    assertThat(c.segments().get("claim_commit")).isCloseTo(1.0, within(1e-9));
    assertThat(c.segments().get("verdict")).as("from CLAIM_BACK: no call or confirm in between").isCloseTo(0.75, within(1e-9));
    assertThat(c.segments().values().stream().mapToDouble(Double::doubleValue).sum()).isCloseTo(c.ageMs(), within(1e-9));
    assertThat(c.ageMs()).isCloseTo(11.0, within(1e-9));
    assertThat(c.hops()).as("route thread to lettuce, lettuce to mysql").isEqualTo(2);
    assertThat(c.runQueue()).as("only where both ends were read on one thread")
        .containsOnlyKeys("launched", "claim_statements", "claim_commit");
    assertThat(c.runQueue().get("claim_statements")).isCloseTo(0.5, within(1e-9));
    assertThat(c.runQueue().get("claim_commit")).isCloseTo(0.25, within(1e-9));
    assertThat(c.threads().get("claim_work")).isEqualTo("onceguard-mysql-");
  }

  @Test
  void cut_anUnguardedRecordEndsAtTheBusinessAnswer_anUnfinishedOneIsLeftOut() {
    TimeBreakdown.Cut plain = TimeBreakdown.cut(trace(1, 2, -1, at(Mark.LAUNCHED, 1, "r"), at(Mark.CALL_START, 2, "r"),
        at(Mark.CALL_END, 5, "grpc-default-executor-1")));
    assertThat(plain.ageMs()).isCloseTo(7.0, within(1e-9));
    assertThat(plain.segments()).containsOnlyKeys("before_poll", "launched", "call_start", "call_end");

    assertThat(TimeBreakdown.cut(trace(2, 2, 0, at(Mark.LAUNCHED, 1, "r"), at(Mark.CALL_START, 2, "r")))).isNull();
  }

  @Test
  void of_setsTheRecordsAtOrAboveP99AgainstTheMedianOnes() {
    List<Trace> traces = new ArrayList<>();
    // 100 records: ages 2..101 ms, all of the spread in the wait for a claim group slot; the two
    // oldest also saw 7 claims queued
    for (int i = 0; i < 100; i++) {
      traces.add(trace(i, 1, i >= 98 ? 7 : 1, at(Mark.CLAIM_SUBMIT, 0.5, "a"), at(Mark.CLAIM_GROUP, 0.5 + i, "a"),
          at(Mark.VERDICT, 1 + i, "b")));
    }
    traces.add(trace(500, 1, 0, at(Mark.CLAIM_SUBMIT, 1, "a"))); // unfinished: left out

    TimeBreakdown.Result r = TimeBreakdown.of(traces);

    assertThat(r.records()).isEqualTo(100);
    assertThat(r.p50AgeMs()).isCloseTo(51.0, within(1e-9)); // rank 50 of 100: i = 49
    assertThat(r.p99AgeMs()).isCloseTo(100.0, within(1e-9)); // rank 99: i = 98
    assertThat(r.tailRecords()).isEqualTo(2);
    assertThat(r.medianRecords()).isEqualTo(11); // ranks 45..55
    Map<String, TimeBreakdown.Row> rows = new java.util.HashMap<>();
    r.rows().forEach(row -> rows.put(row.segment(), row));
    assertThat(r.rows()).extracting(TimeBreakdown.Row::segment).containsExactly("before_poll", "claim_submit", "claim_group", "verdict");
    TimeBreakdown.Row wait = rows.get("claim_group");
    assertThat(wait.medianMean()).isCloseTo(49.0, within(1e-9)); // i = 44..54
    assertThat(wait.tailMean()).isCloseTo(98.5, within(1e-9)); // i = 98, 99
    assertThat(wait.tailP50()).isCloseTo(98.0, within(1e-9));
    assertThat(rows.get("verdict").tailMean()).isCloseTo(0.5, within(1e-9));
    assertThat(rows.get("before_poll").tailMean() - rows.get("before_poll").medianMean()).isZero();
    assertThat(r.counts().get("claim_queued")).containsExactly(1.0, 7.0);
    assertThat(r.hops()).containsExactly(2.0, 2.0);
    assertThat(TimeBreakdown.markdown("x", r)).contains("| claim: wait for a group slot | 49.00 / 49.00 | 98.50 / 98.00 | 49.50 |");
    assertThat(TimeBreakdown.of(List.of())).isNull();
  }
}
