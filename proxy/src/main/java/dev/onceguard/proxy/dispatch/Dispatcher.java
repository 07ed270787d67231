package dev.onceguard.proxy.dispatch;

import dev.onceguard.v1.Delivery;
import java.time.Duration;
import java.util.concurrent.CompletionStage;

/**
 * Hands one accepted delivery to the business and reports what it said. One call is one attempt;
 * retrying is the caller's job (it owns the lease and the backoff). The stage never completes
 * exceptionally: transport failures are mapped to {@link DispatchResult.Kind#RETRY} or
 * {@link DispatchResult.Kind#REJECT}.
 */
public interface Dispatcher extends AutoCloseable {
  CompletionStage<DispatchResult> dispatch(Delivery delivery, Duration timeout);

  @Override
  void close();
}
