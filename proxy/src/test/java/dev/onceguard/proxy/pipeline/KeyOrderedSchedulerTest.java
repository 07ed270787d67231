package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class KeyOrderedSchedulerTest {

  private static List<String> drainReady(KeyOrderedScheduler<String> s) {
    List<String> out = new ArrayList<>();
    while (s.hasReady()) {
      out.add(s.next());
    }
    return out;
  }

  @Test
  void next_distinctKeys_allReadyInOffsetOrder() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 0, "a0");
    s.submit("b", 1, "b1");
    s.submit("c", 2, "c2");
    assertThat(drainReady(s)).containsExactly("a0", "b1", "c2");
    assertThat(s.running()).isEqualTo(3);
    assertThat(s.waiting()).isZero();
  }

  @Test
  void next_sameKey_secondWaitsUntilFirstFinished() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("b", 2, "b2");
    assertThat(drainReady(s)).containsExactly("a0", "b2");
    assertThat(s.waiting()).isEqualTo(1);
    s.finished("a", 0);
    assertThat(drainReady(s)).containsExactly("a1");
  }

  @Test
  void next_keyBecomesReadyLater_lowerOffsetGoesFirst() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("b", 2, "b2");
    s.submit("c", 3, "c3");
    assertThat(s.next()).isEqualTo("a0"); // capacity for one only
    s.finished("a", 0);
    // a1 (offset 1) was ready after b2 and c3, but the lowest offset starts first
    assertThat(drainReady(s)).containsExactly("a1", "b2", "c3");
  }

  @Test
  void finished_keyWithoutRunningRecord_isRejected() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 0, "a0");
    assertThatThrownBy(() -> s.finished("a", 0)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> s.finished("zzz", 0)).isInstanceOf(IllegalStateException.class);
    s.next();
    assertThatThrownBy(() -> s.finished("a", 1)).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void submit_nonIncreasingOffset_isRejected() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 3, "a3");
    assertThatThrownBy(() -> s.submit("b", 3, "b3")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void dropWaiting_keepsRunningCountedAndTheirKeysBlocked() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("b", 2, "b2");
    s.submit("c", 3, "c3");
    assertThat(s.next()).isEqualTo("a0");
    assertThat(s.dropWaiting()).containsExactly("a1", "b2", "c3");
    assertThat(s.running()).isEqualTo(1);
    assertThat(s.waiting()).isZero();
    assertThat(s.hasReady()).isFalse();
    s.finished("a", 0);
    assertThat(s.outstanding()).isZero();
    assertThat(s.hasReady()).isFalse();
  }

  @Test
  void randomInterleaving_everyKeyRunsInOffsetOrder_oneAtATime() {
    Random rnd = new Random(42);
    KeyOrderedScheduler<long[]> s = new KeyOrderedScheduler<>();
    Map<String, Long> lastStarted = new HashMap<>();
    Map<String, Boolean> busy = new HashMap<>();
    List<long[]> runningNow = new ArrayList<>();
    long offset = 0;
    int started = 0;
    for (int step = 0; step < 20_000; step++) {
      int action = rnd.nextInt(3);
      if (action == 0 && offset < 5_000) {
        String key = "k" + rnd.nextInt(20);
        s.submit(key, offset, new long[] {offset, Long.parseLong(key.substring(1))});
        offset++;
      } else if (action == 1 && s.hasReady()) {
        long[] r = s.next();
        String key = "k" + r[1];
        assertThat(busy.getOrDefault(key, false)).as("key %s already running", key).isFalse();
        assertThat(r[0]).isGreaterThan(lastStarted.getOrDefault(key, -1L));
        busy.put(key, true);
        lastStarted.put(key, r[0]);
        runningNow.add(r);
        started++;
      } else if (!runningNow.isEmpty()) {
        long[] r = runningNow.remove(rnd.nextInt(runningNow.size()));
        busy.put("k" + r[1], false);
        s.finished("k" + r[1], r[0]);
      }
    }
    assertThat(started).isGreaterThan(1000);
  }

  @Test
  void park_windowOne_keepsTheKeyBlocked() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(1);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    assertThat(drainReady(s)).containsExactly("a0");
    assertThat(s.park("a", 0)).isTrue();
    assertThat(s.hasReady()).isFalse();
  }

  @Test
  void park_letsTheNextRecordOfTheKeyStart_upToTheWindow() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(2);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("a", 2, "a2");
    assertThat(drainReady(s)).containsExactly("a0");
    s.park("a", 0);
    assertThat(drainReady(s)).containsExactly("a1");
    s.park("a", 1);
    // two started (both parked): the window is full
    assertThat(s.hasReady()).isFalse();
    assertThat(s.running()).isEqualTo(2);
    assertThat(s.waiting()).isEqualTo(1);
  }

  @Test
  void park_nextStartsOnlyWhenEveryStartedRecordIsParked() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("a", 2, "a2");
    s.next();
    s.park("a", 0);
    assertThat(s.next()).isEqualTo("a1");
    // a1 runs: a2 must wait even though the window has room
    assertThat(s.hasReady()).isFalse();
    s.park("a", 1);
    assertThat(s.hasReady()).isTrue();
    s.unpark("a", 0);
    // a0 goes on to the business: a2 is held back again
    assertThat(s.hasReady()).isFalse();
  }

  @Test
  void finished_outOfOrder_returnsTheOtherStartedRecordsOfTheKey() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("a", 2, "a2");
    s.submit("a", 3, "a3");
    s.next();
    s.park("a", 0);
    s.next();
    s.park("a", 1);
    assertThat(s.next()).isEqualTo("a2");
    // the overtaking record finishes first; both parked ones are told
    assertThat(s.finished("a", 2)).containsExactly("a0", "a1");
    assertThat(drainReady(s)).containsExactly("a3");
    s.unpark("a", 0);
    // a3 runs (it started after a2 finished): it is reported too
    assertThat(s.finished("a", 0)).containsExactly("a1", "a3");
    assertThat(s.finished("a", 1)).containsExactly("a3");
    assertThat(s.finished("a", 3)).isEmpty();
    assertThat(s.outstanding()).isZero();
  }

  @Test
  void park_ofARecordNotStarted_hasNoEffect() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    assertThat(s.park("a", 0)).isFalse();
    assertThat(s.park("a", 7)).isFalse();
    assertThat(drainReady(s)).containsExactly("a0");
  }

  @Test
  void dropWaiting_keepsParkedRecordsStarted() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("a", 2, "a2");
    s.next();
    s.park("a", 0);
    assertThat(s.next()).isEqualTo("a1");
    s.park("a", 1);
    assertThat(s.dropWaiting()).containsExactly("a2");
    assertThat(s.running()).isEqualTo(2);
    assertThat(s.hasReady()).isFalse();
    s.finished("a", 1);
    s.finished("a", 0);
    assertThat(s.outstanding()).isZero();
  }

  @Test
  void randomInterleavingWithParking_startsInOffsetOrder_withinTheWindow_onlyBehindParkedRecords() {
    Random rnd = new Random(7);
    int window = 3;
    KeyOrderedScheduler<long[]> s = new KeyOrderedScheduler<>(window);
    Map<String, List<long[]>> started = new HashMap<>();
    Map<Long, Boolean> parked = new HashMap<>();
    Map<String, Long> lastStarted = new HashMap<>();
    List<long[]> runningNow = new ArrayList<>();
    long offset = 0;
    int overtakes = 0;
    for (int step = 0; step < 30_000; step++) {
      int action = rnd.nextInt(4);
      if (action == 0 && offset < 6_000) {
        String key = "k" + rnd.nextInt(10);
        s.submit(key, offset, new long[] {offset, Long.parseLong(key.substring(1))});
        offset++;
      } else if (action == 1 && s.hasReady()) {
        long[] r = s.next();
        String key = "k" + r[1];
        List<long[]> same = started.computeIfAbsent(key, k -> new ArrayList<>());
        assertThat(r[0]).isGreaterThan(lastStarted.getOrDefault(key, -1L));
        assertThat(same).as("key %s: window", key).hasSizeLessThan(window);
        assertThat(same).as("key %s: everything started must be parked", key).allMatch(x -> parked.getOrDefault(x[0], false));
        overtakes += same.isEmpty() ? 0 : 1;
        same.add(r);
        lastStarted.put(key, r[0]);
        runningNow.add(r);
      } else if (action == 2 && !runningNow.isEmpty()) {
        long[] r = runningNow.get(rnd.nextInt(runningNow.size()));
        boolean p = !parked.getOrDefault(r[0], false);
        parked.put(r[0], p);
        if (p) {
          s.park("k" + r[1], r[0]);
        } else {
          s.unpark("k" + r[1], r[0]);
        }
      } else if (!runningNow.isEmpty()) {
        long[] r = runningNow.remove(rnd.nextInt(runningNow.size()));
        started.get("k" + r[1]).remove(r);
        parked.remove(r[0]);
        s.finished("k" + r[1], r[0]);
      }
    }
    assertThat(overtakes).isGreaterThan(100);
  }

  /** "x" may not overtake a parked record; every other record may. */
  private static KeyOrderedScheduler<String> xMayNotOvertake(int window) {
    return new KeyOrderedScheduler<>(window, (parked, later) -> !later.startsWith("x"));
  }

  @Test
  void recordThatMayNotOvertakeTheParkedOne_isHeld_andTheNextMayStartBehindIt() {
    KeyOrderedScheduler<String> s = xMayNotOvertake(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "x1");
    s.submit("a", 2, "a2");
    assertThat(drainReady(s)).containsExactly("a0");
    s.park("a", 0);

    assertThat(drainReady(s)).as("x1 is held; a2 may overtake both").containsExactly("a2");
    assertThat(s.running()).isEqualTo(2);
    assertThat(s.waiting()).as("the held one").isEqualTo(1);
    assertThat(s.park("a", 1)).as("a held record is not started").isFalse();
    assertThat(s.finished("a", 2)).as("the held record is not nudged").containsExactly("a0");
    assertThat(s.hasReady()).isFalse();

    s.unpark("a", 0);
    assertThat(s.hasReady()).as("a0 runs on (to the business): x1 may still not go before it").isFalse();
    assertThat(s.finished("a", 0)).isEmpty();
    assertThat(drainReady(s)).containsExactly("x1");
    assertThat(s.running()).isEqualTo(1);
    assertThat(s.waiting()).isZero();
    assertThat(s.finished("a", 1)).isEmpty();
    assertThat(s.outstanding()).isZero();
  }

  @Test
  void heldRecord_isLetGoWhenTheParkedOneFinishes_andCountsTowardsTheWindow() {
    KeyOrderedScheduler<String> s = xMayNotOvertake(2);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "x1");
    s.submit("a", 2, "a2");
    s.next();
    s.park("a", 0);
    assertThat(s.hasReady()).as("x1 held, and with a0 the window of 2 is full").isFalse();

    assertThat(s.finished("a", 0)).isEmpty();
    assertThat(drainReady(s)).containsExactly("x1");
    assertThat(s.hasReady()).isFalse();
  }

  @Test
  void heldRecord_mayNotBeOvertakenEither_whenTheRuleSaysSo() {
    // nothing may overtake a parked or held record
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(4, (parked, later) -> false);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("a", 2, "a2");
    s.next();
    s.park("a", 0);
    assertThat(s.hasReady()).isFalse();
    s.finished("a", 0);
    assertThat(drainReady(s)).as("a2 stays held behind a1 until a1 parks").containsExactly("a1");
    s.park("a", 1);
    assertThat(s.hasReady()).isFalse();
    s.unpark("a", 1);
    s.finished("a", 1);
    assertThat(drainReady(s)).containsExactly("a2");
  }

  @Test
  void dropWaiting_dropsHeldRecordsToo() {
    KeyOrderedScheduler<String> s = xMayNotOvertake(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "x1");
    s.submit("a", 2, "x2");
    s.submit("a", 3, "a3");
    s.next();
    s.park("a", 0);
    assertThat(drainReady(s)).containsExactly("a3");

    assertThat(s.dropWaiting()).containsExactly("x1", "x2");
    assertThat(s.waiting()).isZero();
    assertThat(s.running()).isEqualTo(2);
    assertThat(s.finished("a", 0)).containsExactly("a3");
    assertThat(s.finished("a", 3)).isEmpty();
    assertThat(s.outstanding()).isZero();
  }

  @Test
  void finished_marksTheRunningOthersProgressed_once_andTheParkedOnesAreToldApart() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>(4);
    s.submit("a", 0, "a0");
    s.submit("a", 1, "a1");
    s.submit("a", 2, "a2");
    s.next();
    s.park("a", 0);
    s.next();
    s.park("a", 1);
    s.next();
    s.unpark("a", 1); // a1 claims again: running when a2 finishes
    assertThat(s.isParked("a", 0)).isTrue();
    assertThat(s.isParked("a", 1)).isFalse();

    assertThat(s.finished("a", 2)).containsExactly("a0", "a1");

    assertThat(s.takeProgressed("a", 0)).as("a0 was parked: it is nudged, not marked").isFalse();
    assertThat(s.takeProgressed("a", 1)).as("a1 was running: it looks again when it parks").isTrue();
    assertThat(s.takeProgressed("a", 1)).as("once").isFalse();
    assertThat(s.takeProgressed("a", 2)).as("not started any more").isFalse();
  }
}
