package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.v1.Delivery;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Answers deliveries from a script; a call without a scripted answer stays pending in
 * {@link #pending} until the test completes it. Each call is also appended to a journal shared
 * with the store ({@code dispatch <event>}), so a test can check what happened before the business
 * was called. Thread-safe.
 */
final class FakeDispatcher implements Dispatcher {
  final Queue<DispatchResult> script = new ArrayDeque<>();
  final List<Delivery> calls = new ArrayList<>();
  final List<CompletableFuture<DispatchResult>> pending = new ArrayList<>();
  private final List<String> journal;

  FakeDispatcher(List<String> journal) {
    this.journal = journal;
  }

  @Override
  public CompletionStage<DispatchResult> dispatch(Delivery delivery, Duration timeout) {
    synchronized (journal) {
      journal.add("dispatch " + delivery.getEvent());
    }
    synchronized (this) {
      calls.add(delivery);
      DispatchResult r = script.poll();
      if (r != null) {
        return CompletableFuture.completedFuture(r);
      }
      CompletableFuture<DispatchResult> f = new CompletableFuture<>();
      pending.add(f);
      return f;
    }
  }

  /** Completes the oldest pending call with {@code r}. */
  void answer(DispatchResult r) {
    CompletableFuture<DispatchResult> f;
    synchronized (this) {
      f = pending.remove(0);
    }
    f.complete(r);
  }

  @Override
  public void close() {}
}
