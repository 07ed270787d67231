package dev.onceguard.proxy.time;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The production {@link Scheduler}: one daemon timer thread (a {@link ScheduledThreadPoolExecutor}
 * of size one) shared by everything that waits. Timers only complete futures; the work that
 * follows runs on that thread too, so it must be short and non-blocking.
 *
 * <p>Ownership: the creator closes it; {@link #close()} completes every pending delay
 * exceptionally with {@link CancellationException} so that nothing waits forever on a dead timer.
 * Thread-safe.
 */
public final class ExecutorScheduler implements Scheduler, AutoCloseable {
  private final ScheduledThreadPoolExecutor executor;
  private final Set<DelayFuture> pending = ConcurrentHashMap.newKeySet();

  /** @param threadName name of the timer thread, e.g. {@code onceguard-timer} */
  public ExecutorScheduler(String threadName) {
    executor = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, threadName);
      t.setDaemon(true);
      return t;
    });
    // A cancelled delay (its record was revoked) must not stay queued until it would have fired.
    executor.setRemoveOnCancelPolicy(true);
  }

  @Override
  public CompletionStage<Void> delay(Duration delay) {
    if (delay.isZero() || delay.isNegative()) {
      return CompletableFuture.completedFuture(null);
    }
    DelayFuture f = new DelayFuture();
    pending.add(f);
    f.whenComplete((v, e) -> pending.remove(f));
    try {
      f.timer = executor.schedule(() -> f.complete(null), delay.toNanos(), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException e) {
      f.completeExceptionally(new CancellationException("scheduler closed"));
    }
    return f;
  }

  /** Stops the timer thread; pending delays complete exceptionally. Idempotent. */
  @Override
  public void close() {
    executor.shutdownNow();
    for (DelayFuture f : pending) {
      f.completeExceptionally(new CancellationException("scheduler closed"));
    }
    try {
      if (!executor.awaitTermination(5, TimeUnit.SECONDS)) {
        throw new IllegalStateException("timer thread did not stop within 5s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * A delay whose cancellation also removes its timer task. Cancelling is routine (every accepted
   * record cancels its lease-renewal timer), so it completes the delay with one shared exception
   * without a stack trace: {@code CompletableFuture.cancel} would create a
   * {@link CancellationException} and, for each dependent stage, a wrapping exception, each filling
   * in its stack trace.
   */
  private static final class DelayFuture extends CompletableFuture<Void> {
    volatile ScheduledFuture<?> timer;

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      ScheduledFuture<?> t = timer;
      if (t != null) {
        t.cancel(false);
      }
      return completeExceptionally(CANCELLED);
    }
  }

  /** How a cancelled delay completes; dependents see this same instance (it is a CompletionException already). */
  static final CompletionException CANCELLED = new Cancelled();

  private static final class Cancelled extends CompletionException {
    private static final long serialVersionUID = 1L;

    Cancelled() {
      super("delay cancelled", new CancellationException("delay cancelled"));
      getCause().setStackTrace(new StackTraceElement[0]);
    }

    @Override
    public synchronized Throwable fillInStackTrace() {
      return this;
    }
  }
}
