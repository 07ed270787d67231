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
    s.finished("a");
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
    s.finished("a");
    // a1 (offset 1) was ready after b2 and c3, but the lowest offset starts first
    assertThat(drainReady(s)).containsExactly("a1", "b2", "c3");
  }

  @Test
  void finished_keyWithoutRunningRecord_isRejected() {
    KeyOrderedScheduler<String> s = new KeyOrderedScheduler<>();
    s.submit("a", 0, "a0");
    assertThatThrownBy(() -> s.finished("a")).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> s.finished("zzz")).isInstanceOf(IllegalStateException.class);
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
    s.finished("a");
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
        s.finished("k" + r[1]);
      }
    }
    assertThat(started).isGreaterThan(1000);
  }
}
