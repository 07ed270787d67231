package dev.onceguard.proxy.time;

import java.time.Duration;
import java.util.concurrent.CompletionStage;

/**
 * Delays without blocking a thread, injected so that backoff, leases and early-arrival waits can
 * be tested without sleeping (a fake completes the stages when a test advances its time).
 *
 * <p>Threading: {@link #delay} may be called from any thread and never blocks. The returned stage
 * completes on the scheduler's own thread, so continuations attached to it must be short and
 * non-blocking (or hop to an executor of their own). When the scheduler is closed, pending
 * delays complete exceptionally with {@link java.util.concurrent.CancellationException}.
 */
@FunctionalInterface
public interface Scheduler {

  /**
   * A stage that completes normally once {@code delay} has passed (immediately for a zero or
   * negative delay). Cancelling its {@code toCompletableFuture()} releases the pending timer and
   * completes the stage exceptionally (dependents see a {@code CompletionException} whose cause is a
   * {@code CancellationException}).
   */
  CompletionStage<Void> delay(Duration delay);
}
