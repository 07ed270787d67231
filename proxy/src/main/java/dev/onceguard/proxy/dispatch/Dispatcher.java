package dev.onceguard.proxy.dispatch;

import dev.onceguard.v1.Delivery;
import java.time.Duration;
import java.util.concurrent.CompletionStage;

/**
 * Hands one accepted delivery to the business and reports what it said. One call is one attempt;
 * retrying is the caller's job (it owns the lease and the backoff). The stage never completes
 * exceptionally: transport failures are mapped to {@link DispatchResult.Kind#RETRY} or
 * {@link DispatchResult.Kind#REJECT}.
 *
 * <p>Threading: {@link #dispatch} may be called concurrently from any thread and must not block;
 * the stage may complete on an I/O thread, so continuations must not block either. Cancelling the
 * stage's {@code toCompletableFuture()} abandons the attempt (implementations cancel the call when
 * they can); the stage then completes with a {@link java.util.concurrent.CancellationException}.
 * {@link #close()} releases the connection; attempts still running complete with RETRY.
 */
public interface Dispatcher extends AutoCloseable {
  CompletionStage<DispatchResult> dispatch(Delivery delivery, Duration timeout);

  /**
   * As {@link #dispatch(Delivery, Duration)}, within the trace {@code trace} (the record's
   * {@code onceguard.handle} span): a dispatcher that can carry it to the business does
   * ({@link GrpcDispatcher} sends it as the call's {@code traceparent} metadata); the others ignore it.
   */
  default CompletionStage<DispatchResult> dispatch(Delivery delivery, Duration timeout, io.opentelemetry.context.Context trace) {
    return dispatch(delivery, timeout);
  }

  @Override
  void close();
}
