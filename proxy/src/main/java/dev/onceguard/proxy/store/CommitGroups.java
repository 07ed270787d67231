package dev.onceguard.proxy.store;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

/**
 * Group commit without a timer: items that are ready while every group slot is busy wait, and
 * the next free slot takes all of them (up to {@code maxSize}) as one group. Alone, an item runs at
 * once in a group of one; under load, groups grow by themselves to what piled up during one
 * group's run. Nothing waits for a group to fill.
 *
 * <p>{@code run} turns a group into one result per item, in order. A group of several that fails
 * with an error {@code alone} accepts (one bad item must not fail the others: a value the database
 * refuses, say) runs again item by item, each in a group of one, so each item gets its own result
 * or error; any other failure (a lost race that is retried anyway) fails each item with that error.
 * At most {@code maxQueued} items wait: an item beyond fails at once with
 * {@link StoreUnavailableException} (the store is saturated; the caller retries it as an outage).
 * Thread-safe; results are completed outside the lock, on whichever thread completed the group's
 * stage.
 *
 * @param <T> an item
 * @param <R> an item's result
 */
final class CommitGroups<T, R> {
  private final int maxGroups;
  private final int maxSize;
  private final int maxQueued;
  private final Function<List<T>, CompletionStage<List<R>>> run;
  private final java.util.function.Predicate<Throwable> alone;
  private final ArrayDeque<Waiting<T, R>> queue = new ArrayDeque<>();
  private int running;
  private long groups;
  private long items;
  private long refused;

  private record Waiting<T, R>(T item, CompletableFuture<R> result) {}

  /**
   * Without a bound on the items waiting, and no failure retried item by item (tests).
   *
   * @param maxGroups groups running at once (each holds one database connection)
   * @param maxSize items in one group at most
   */
  CommitGroups(int maxGroups, int maxSize, Function<List<T>, CompletionStage<List<R>>> run) {
    this(maxGroups, maxSize, run, e -> false);
  }

  /** Without a bound on the items waiting (tests). */
  CommitGroups(int maxGroups, int maxSize, Function<List<T>, CompletionStage<List<R>>> run,
      java.util.function.Predicate<Throwable> alone) {
    this(maxGroups, maxSize, Integer.MAX_VALUE, run, alone);
  }

  /**
   * @param maxQueued items that may wait for a slot at most
   * @param alone which failures of a group of several are retried item by item
   */
  CommitGroups(int maxGroups, int maxSize, int maxQueued, Function<List<T>, CompletionStage<List<R>>> run,
      java.util.function.Predicate<Throwable> alone) {
    if (maxGroups < 1 || maxSize < 1 || maxQueued < 1) {
      throw new IllegalArgumentException("maxGroups, maxSize and maxQueued must be at least 1: " + maxGroups + ", " + maxSize
          + ", " + maxQueued);
    }
    this.maxGroups = maxGroups;
    this.maxSize = maxSize;
    this.maxQueued = maxQueued;
    this.run = run;
    this.alone = alone;
  }

  CompletableFuture<R> submit(T item) {
    CompletableFuture<R> result = new CompletableFuture<>();
    List<Waiting<T, R>> group = null;
    synchronized (this) {
      if (queue.size() >= maxQueued) {
        refused++;
        result.completeExceptionally(new StoreUnavailableException("MySQL store saturated: " + queue.size()
            + " items already wait for a group; retry later", null));
        return result;
      }
      queue.add(new Waiting<>(item, result));
      if (running < maxGroups) {
        running++;
        group = take();
      }
    }
    if (group != null) {
      start(group);
    }
    return result;
  }

  /** Groups run so far and the items they held: their ratio is the mean group size. */
  synchronized long[] counts() {
    return new long[] {groups, items};
  }

  /** Items waiting for a slot now. */
  synchronized int queued() {
    return queue.size();
  }

  /** Group slots busy now. */
  synchronized int running() {
    return running;
  }

  /** Items refused so far because {@code maxQueued} were waiting. */
  synchronized long refused() {
    return refused;
  }

  private List<Waiting<T, R>> take() {
    List<Waiting<T, R>> group = new ArrayList<>(Math.min(queue.size(), maxSize));
    while (group.size() < maxSize && !queue.isEmpty()) {
      group.add(queue.poll());
    }
    groups++;
    items += group.size();
    return group;
  }

  private void start(List<Waiting<T, R>> group) {
    List<T> batch = new ArrayList<>(group.size());
    for (Waiting<T, R> w : group) {
      batch.add(w.item());
    }
    runGuarded(batch).whenComplete((results, err) -> {
      if (err == null && (results == null || results.size() != group.size())) {
        err = new IllegalStateException("a group of " + group.size() + " items returned "
            + (results == null ? "no results" : results.size() + " results"));
      }
      Throwable cause = unwrap(err);
      if (cause != null && group.size() > 1 && alone.test(cause)) {
        oneByOne(group, 0, 0);
        return;
      }
      // the slot first: completing a result runs its caller's continuation on this thread (the
      // next step of that record), and the items queued meanwhile must not wait for all of those
      next();
      for (int i = 0; i < group.size(); i++) {
        if (cause != null) {
          group.get(i).result().completeExceptionally(cause);
        } else {
          group.get(i).result().complete(results.get(i));
        }
      }
    });
  }

  /**
   * Runs the group's items from {@code i} on, each alone and in turn, on the group's slot. Two
   * failures in a row are an outage, not one bad item: the rest fail at once with the second
   * error (each attempt could take a timeout, and the queue waits for this slot).
   */
  private void oneByOne(List<Waiting<T, R>> group, int i, int failedInARow) {
    if (i == group.size()) {
      next();
      return;
    }
    Waiting<T, R> w = group.get(i);
    runGuarded(List.of(w.item())).whenComplete((results, err) -> {
      Throwable cause = unwrap(err);
      if (cause == null && (results == null || results.size() != 1)) {
        cause = new IllegalStateException("a group of 1 item returned " + (results == null ? "no results" : results.size() + " results"));
      }
      if (cause != null) {
        w.result().completeExceptionally(cause);
        if (failedInARow + 1 >= 2) {
          for (int j = i + 1; j < group.size(); j++) {
            group.get(j).result().completeExceptionally(cause);
          }
          next();
          return;
        }
      } else {
        w.result().complete(results.get(0));
      }
      oneByOne(group, i + 1, cause == null ? 0 : failedInARow + 1);
    });
  }

  private CompletionStage<List<R>> runGuarded(List<T> batch) {
    try {
      return run.apply(batch);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private static Throwable unwrap(Throwable err) {
    return err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
  }

  /** The slot is free: the next group, or one slot fewer running. */
  private void next() {
    List<Waiting<T, R>> next = null;
    synchronized (this) {
      if (queue.isEmpty()) {
        running--;
      } else {
        next = take();
      }
    }
    if (next != null) {
      start(next);
    }
  }
}
