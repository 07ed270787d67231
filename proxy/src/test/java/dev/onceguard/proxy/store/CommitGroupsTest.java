package dev.onceguard.proxy.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.store.StoreUnavailableException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Test;

class CommitGroupsTest {
  /** Groups as they were started, each finished by the test. */
  private final List<List<Integer>> started = new ArrayList<>();
  private final List<CompletableFuture<List<String>>> running = new ArrayList<>();

  private CommitGroups<Integer, String> groups(int slots, int maxSize) {
    return new CommitGroups<>(slots, maxSize, items -> {
      started.add(List.copyOf(items));
      CompletableFuture<List<String>> f = new CompletableFuture<>();
      running.add(f);
      return f;
    });
  }

  private void finish(int group) {
    running.get(group).complete(started.get(group).stream().map(i -> "r" + i).toList());
  }

  @Test
  void alone_anItemRunsAtOnce_inAGroupOfOne() throws Exception {
    CommitGroups<Integer, String> g = groups(2, 32);
    CompletableFuture<String> a = g.submit(1);
    assertThat(started).containsExactly(List.of(1));
    finish(0);
    assertThat(a.get()).isEqualTo("r1");
    CompletableFuture<String> b = g.submit(2);
    assertThat(started).containsExactly(List.of(1), List.of(2));
    finish(1);
    assertThat(b.get()).isEqualTo("r2");
  }

  @Test
  void whileEverySlotIsBusy_itemsPileUp_andTheNextFreeSlotTakesThemAsOneGroup() throws Exception {
    CommitGroups<Integer, String> g = groups(2, 32);
    List<CompletableFuture<String>> out = new ArrayList<>();
    for (int i = 1; i <= 7; i++) {
      out.add(g.submit(i));
    }
    assertThat(started).containsExactly(List.of(1), List.of(2));
    finish(1);
    assertThat(started).containsExactly(List.of(1), List.of(2), List.of(3, 4, 5, 6, 7));
    assertThat(out.get(1).get()).isEqualTo("r2");
    assertThat(out.get(0)).isNotDone();
    finish(2);
    finish(0);
    for (int i = 0; i < 7; i++) {
      assertThat(out.get(i).get()).isEqualTo("r" + (i + 1));
    }
    assertThat(g.counts()).containsExactly(3, 7);
    // every slot is free again: the next item runs at once
    g.submit(8);
    assertThat(started).hasSize(4).last().isEqualTo(List.of(8));
  }

  @Test
  void aGroupHoldsAtMostMaxSize() {
    CommitGroups<Integer, String> g = groups(1, 3);
    for (int i = 1; i <= 8; i++) {
      g.submit(i);
    }
    finish(0);
    finish(1);
    finish(2);
    assertThat(started).containsExactly(List.of(1), List.of(2, 3, 4), List.of(5, 6, 7), List.of(8));
  }

  @Test
  void aGroupThatFails_failsEachOfItsItems_andTheQueueGoesOn() throws Exception {
    CommitGroups<Integer, String> g = groups(1, 32);
    CompletableFuture<String> a = g.submit(1);
    CompletableFuture<String> b = g.submit(2);
    CompletableFuture<String> c = g.submit(3);
    running.get(0).completeExceptionally(new IllegalStateException("deadlock"));
    assertThatThrownBy(a::get).isInstanceOf(ExecutionException.class).hasCauseInstanceOf(IllegalStateException.class);
    assertThat(started).containsExactly(List.of(1), List.of(2, 3));
    running.get(1).completeExceptionally(new java.util.concurrent.CompletionException(new IllegalArgumentException("x")));
    assertThatThrownBy(b::get).hasCauseInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(c::get).hasCauseInstanceOf(IllegalArgumentException.class);
    assertThat(g.submit(4)).isNotDone();
    assertThat(started).hasSize(3);
  }

  @Test
  void aRunThatThrows_isAFailureOfItsItems_notALostSlot() {
    List<Integer> calls = new ArrayList<>();
    CommitGroups<Integer, String> g = new CommitGroups<>(1, 32, items -> {
      calls.add(items.size());
      if (items.get(0) == 1) {
        throw new IllegalStateException("bug");
      }
      return CompletableFuture.completedFuture(List.of("only one"));
    });
    assertThat(g.submit(1)).isCompletedExceptionally();
    CompletableFuture<String> ok = g.submit(2);
    assertThat(ok).isCompletedWithValue("only one");
    g.submit(3);
    assertThat(calls).containsExactly(1, 1, 1);
  }

  @Test
  void aGroupThatFailsWithAnErrorOfOneItem_runsAgainItemByItem_soOnlyThatItemFails() throws Exception {
    List<List<Integer>> runs = new ArrayList<>();
    CompletableFuture<String> blocker = new CompletableFuture<>();
    CommitGroups<Integer, String> g = new CommitGroups<>(1, 32, items -> {
      runs.add(List.copyOf(items));
      if (items.get(0) == 0) {
        return blocker.thenApply(x -> List.of("r0")); // holds the only slot until the test frees it
      }
      return items.contains(3) ? CompletableFuture.failedFuture(new IllegalArgumentException("value 3 refused"))
          : CompletableFuture.completedFuture(items.stream().map(i -> "r" + i).toList());
    }, e -> e instanceof IllegalArgumentException);
    g.submit(0);
    List<CompletableFuture<String>> out = new ArrayList<>();
    for (int i = 2; i <= 4; i++) {
      out.add(g.submit(i));
    }
    blocker.complete("go");

    assertThat(runs).containsExactly(List.of(0), List.of(2, 3, 4), List.of(2), List.of(3), List.of(4));
    assertThat(out.get(0).get()).isEqualTo("r2");
    assertThatThrownBy(out.get(1)::get).hasCauseInstanceOf(IllegalArgumentException.class);
    assertThat(out.get(2).get()).isEqualTo("r4");
    runs.clear();
    assertThat(g.submit(5).get()).as("the slot is free again").isEqualTo("r5");
    assertThat(runs).containsExactly(List.of(5));
  }

  @Test
  void runningAlone_twoFailuresInARow_areAnOutage_theRestFailAtOnce() {
    List<List<Integer>> runs = new ArrayList<>();
    CompletableFuture<String> blocker = new CompletableFuture<>();
    CommitGroups<Integer, String> g = new CommitGroups<>(1, 32, items -> {
      runs.add(List.copyOf(items));
      return items.get(0) == 0 ? blocker.thenApply(x -> List.of("r0"))
          : CompletableFuture.failedFuture(new IllegalArgumentException("database down"));
    }, e -> e instanceof IllegalArgumentException);
    g.submit(0);
    List<CompletableFuture<String>> out = new ArrayList<>();
    for (int i = 1; i <= 5; i++) {
      out.add(g.submit(i));
    }
    blocker.complete("go");
    assertThat(runs).containsExactly(List.of(0), List.of(1, 2, 3, 4, 5), List.of(1), List.of(2));
    for (CompletableFuture<String> f : out) {
      assertThatThrownBy(f::get).hasCauseInstanceOf(IllegalArgumentException.class);
    }
    assertThat(g.submit(6)).as("the slot is free again").isCompletedExceptionally();
  }

  @Test
  void aGroupThatFailsWithAnotherError_failsEachItem_withoutRunningThemAlone() {
    List<List<Integer>> runs = new ArrayList<>();
    CompletableFuture<String> blocker = new CompletableFuture<>();
    CommitGroups<Integer, String> g = new CommitGroups<>(1, 32, items -> {
      runs.add(List.copyOf(items));
      return items.get(0) == 0 ? blocker.thenApply(x -> List.of("r0"))
          : CompletableFuture.failedFuture(new IllegalStateException("deadlock"));
    }, e -> e instanceof IllegalArgumentException);
    g.submit(0);
    CompletableFuture<String> a = g.submit(1);
    CompletableFuture<String> b = g.submit(2);
    blocker.complete("go");
    assertThat(runs).containsExactly(List.of(0), List.of(1, 2));
    assertThatThrownBy(a::get).hasCauseInstanceOf(IllegalStateException.class);
    assertThatThrownBy(b::get).hasCauseInstanceOf(IllegalStateException.class);
  }

  @Test
  void atItsQueueBound_anItemFailsAtOnceAsAnOutage_andTheWaitingOnesStillRun() throws Exception {
    CommitGroups<Integer, String> g = new CommitGroups<>(1, 32, 3, items -> {
      started.add(List.copyOf(items));
      CompletableFuture<List<String>> f = new CompletableFuture<>();
      running.add(f);
      return f;
    }, e -> false);
    List<CompletableFuture<String>> out = new ArrayList<>();
    for (int i = 1; i <= 5; i++) {
      out.add(g.submit(i));
    }

    // 1 runs, 2..4 wait (the bound), 5 is refused without waiting
    assertThat(g.queued()).isEqualTo(3);
    assertThat(out.get(4)).isCompletedExceptionally();
    assertThatThrownBy(() -> out.get(4).get()).cause().isInstanceOf(StoreUnavailableException.class)
        .hasMessageContaining("saturated").hasMessageContaining("3 items already wait");
    assertThat(g.refused()).isEqualTo(1);
    finish(0);
    assertThat(started).containsExactly(List.of(1), List.of(2, 3, 4));
    finish(1);
    for (int i = 0; i < 4; i++) {
      assertThat(out.get(i).get()).isEqualTo("r" + (i + 1));
    }
    assertThat(g.queued()).isZero();
    assertThat(g.submit(6)).isNotDone(); // room again
    assertThat(started).hasSize(3);
  }

  @Test
  void badLimits_areRefused() {
    assertThatThrownBy(() -> new CommitGroups<Integer, String>(0, 1, x -> null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new CommitGroups<Integer, String>(1, 0, x -> null)).isInstanceOf(IllegalArgumentException.class);
  }
}
