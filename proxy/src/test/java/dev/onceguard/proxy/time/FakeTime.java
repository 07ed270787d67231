package dev.onceguard.proxy.time;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Test time: a {@link Clock} and a {@link Scheduler} that move only when the test calls
 * {@link #advance}. Due delays complete on the advancing thread, in due order. Thread-safe.
 */
public final class FakeTime implements Clock, Scheduler {
  private record Timer(long dueMillis, long seq, CompletableFuture<Void> future) {}

  private final PriorityQueue<Timer> timers = new PriorityQueue<>(
      (a, b) -> a.dueMillis != b.dueMillis ? Long.compare(a.dueMillis, b.dueMillis) : Long.compare(a.seq, b.seq));
  private long now;
  private long seq;
  private final List<Duration> requested = new ArrayList<>();

  public FakeTime(long startMillis) {
    this.now = startMillis;
  }

  @Override
  public synchronized long nowMillis() {
    return now;
  }

  @Override
  public CompletionStage<Void> delay(Duration delay) {
    synchronized (this) {
      requested.add(delay);
      if (delay.isZero() || delay.isNegative()) {
        return CompletableFuture.completedFuture(null);
      }
      CompletableFuture<Void> f = new CompletableFuture<>();
      timers.add(new Timer(now + delay.toMillis(), seq++, f));
      return f;
    }
  }

  /** Moves time forward and completes the delays that fell due. */
  public void advance(Duration d) {
    long target;
    synchronized (this) {
      target = now + d.toMillis();
    }
    while (true) {
      Timer t;
      synchronized (this) {
        Timer head = timers.peek();
        if (head == null || head.dueMillis > target) {
          now = target;
          return;
        }
        t = timers.poll();
        now = Math.max(now, t.dueMillis);
      }
      t.future.complete(null); // outside the lock: continuations may schedule more delays
    }
  }

  /** Delays not yet due and not cancelled. */
  public synchronized int pendingDelays() {
    return (int) timers.stream().filter(t -> !t.future.isDone()).count();
  }

  /** Every delay asked for, in order. */
  public synchronized List<Duration> requestedDelays() {
    return List.copyOf(requested);
  }
}
