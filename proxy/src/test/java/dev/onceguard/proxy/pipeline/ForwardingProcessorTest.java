package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.TestConfigs;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.Delivery;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

class ForwardingProcessorTest {
  private final RouteConfig route = TestConfigs.oneRoute().routes().get(0);
  private final FakeTime time = new FakeTime(1_000);
  private final ScriptedDispatcher dispatcher = new ScriptedDispatcher();
  // lowest jitter: every backoff is exactly the initial 100 ms (the route's default)
  private final Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), new Random() {
    @Override
    public long nextLong(long bound) {
      return 0;
    }
  });
  private final ForwardingProcessor processor = new ForwardingProcessor(route, dispatcher, time, backoff, new DeliveryIds("run"));

  /** Answers calls from a script; a call without a scripted answer stays pending. */
  static final class ScriptedDispatcher implements Dispatcher {
    final Queue<DispatchResult> script = new ArrayDeque<>();
    final List<Delivery> calls = new CopyOnWriteArrayList<>();
    final List<CompletableFuture<DispatchResult>> pending = new CopyOnWriteArrayList<>();

    @Override
    public synchronized CompletionStage<DispatchResult> dispatch(Delivery delivery, Duration timeout) {
      calls.add(delivery);
      DispatchResult r = script.poll();
      if (r != null) {
        return CompletableFuture.completedFuture(r);
      }
      CompletableFuture<DispatchResult> f = new CompletableFuture<>();
      pending.add(f);
      return f;
    }

    @Override
    public void close() {}
  }

  private static ConsumerRecord<byte[], byte[]> record(String key) {
    return new ConsumerRecord<>("orders", 2, 40, key == null ? null : key.getBytes(StandardCharsets.UTF_8), "v".getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void process_ok_finishesAfterOneCall() {
    dispatcher.script.add(DispatchResult.ok());
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    assertThat(f).isCompleted();
    assertThat(dispatcher.calls).hasSize(1);
    Delivery d = dispatcher.calls.get(0);
    assertThat(d.getRoute()).isEqualTo("orders");
    assertThat(d.getAttempt()).isEqualTo(1);
    assertThat(d.getRedelivery()).isFalse();
    assertThat(d.getDeliveryId()).isEqualTo("run-1");
    assertThat(d.getRecord().getOffset()).isEqualTo(40);
    assertThat(d.getDedupKey()).isEmpty();
  }

  @Test
  void process_stepThrowingInAContinuation_completesTheStageExceptionally_insteadOfHanging() {
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    // a dispatcher bug: a null result makes the result step throw on the dispatcher's thread
    dispatcher.pending.get(0).complete(null);
    assertThat(f).isCompletedExceptionally();
    assertThat(f.handle((v, e) -> e).join()).isInstanceOf(NullPointerException.class);
  }

  @Test
  void process_retryThenOk_waitsBackoffBetweenAttempts_andCountsAttempts() {
    dispatcher.script.add(DispatchResult.retry("busy"));
    dispatcher.script.add(DispatchResult.retry("busy"));
    dispatcher.script.add(DispatchResult.ok());
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    assertThat(f).isNotDone();
    assertThat(dispatcher.calls).hasSize(1);
    time.advance(Duration.ofMillis(99));
    assertThat(dispatcher.calls).hasSize(1);
    time.advance(Duration.ofMillis(1));
    assertThat(dispatcher.calls).hasSize(2);
    time.advance(Duration.ofMillis(100));
    assertThat(f).isCompleted();
    assertThat(dispatcher.calls).extracting(Delivery::getAttempt).containsExactly(1, 2, 3);
    assertThat(dispatcher.calls).extracting(Delivery::getDeliveryId).doesNotHaveDuplicates();
  }

  @Test
  void process_retryAfterLongerThanBackoff_waitsWhatTheBusinessAsked() {
    dispatcher.script.add(DispatchResult.retry("later", Duration.ofSeconds(3)));
    dispatcher.script.add(DispatchResult.ok());
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    time.advance(Duration.ofMillis(2_999));
    assertThat(dispatcher.calls).hasSize(1);
    time.advance(Duration.ofMillis(1));
    assertThat(f).isCompleted();
    assertThat(time.requestedDelays()).containsExactly(Duration.ofSeconds(3));
  }

  @Test
  void process_retryAfter30Days_waitsTheMaxBackoffInstead() {
    dispatcher.script.add(DispatchResult.retry("later", Duration.ofDays(30)));
    dispatcher.script.add(DispatchResult.ok());
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    time.advance(Duration.ofSeconds(10));
    assertThat(f).isCompleted();
    assertThat(time.requestedDelays()).containsExactly(Duration.ofSeconds(10));
  }

  @Test
  void process_retriesWithoutBound_beyondMaxAttempts() {
    int attempts = route.delivery().retry().maxAttempts() + 5;
    for (int i = 1; i < attempts; i++) {
      dispatcher.script.add(DispatchResult.retry("down"));
    }
    dispatcher.script.add(DispatchResult.ok());
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    for (int i = 0; i < attempts && !f.isDone(); i++) {
      time.advance(Duration.ofMillis(100));
    }
    assertThat(f).isCompleted();
    assertThat(dispatcher.calls).hasSize(attempts);
  }

  @Test
  void process_reject_finishesTheRecordWithoutRetrying() {
    dispatcher.script.add(DispatchResult.reject("no such order"));
    CompletableFuture<Void> f = processor.process(record("k"), new Cancellation()).toCompletableFuture();
    assertThat(f).isCompleted();
    time.advance(Duration.ofMinutes(1));
    assertThat(dispatcher.calls).hasSize(1);
  }

  @Test
  void process_cancelledWhileWaitingToRetry_failsWithCancelled_andCallsNoMore() {
    dispatcher.script.add(DispatchResult.retry("busy"));
    Cancellation cancel = new Cancellation();
    CompletableFuture<Void> f = processor.process(record("k"), cancel).toCompletableFuture();
    cancel.cancel();
    assertThat(f).isCompletedExceptionally();
    assertThat(causeOf(f)).isInstanceOf(CancelledException.class);
    assertThat(time.pendingDelays()).isZero();
    time.advance(Duration.ofMinutes(1));
    assertThat(dispatcher.calls).hasSize(1);
  }

  @Test
  void process_cancelledDuringCall_failsAtOnce_andCancelsTheCall() {
    Cancellation cancel = new Cancellation();
    CompletableFuture<Void> f = processor.process(record("k"), cancel).toCompletableFuture();
    assertThat(dispatcher.pending).hasSize(1);
    cancel.cancel();
    assertThat(causeOf(f)).isInstanceOf(CancelledException.class);
    assertThat(dispatcher.pending.get(0)).isCancelled();
  }

  @Test
  void process_alreadyCancelled_neverCalls() {
    Cancellation cancel = new Cancellation();
    cancel.cancel();
    CompletableFuture<Void> f = processor.process(record("k"), cancel).toCompletableFuture();
    assertThat(causeOf(f)).isInstanceOf(CancelledException.class);
    assertThat(dispatcher.calls).isEmpty();
  }

  @Test
  void orderingKey_isTheKafkaKey_orPartitionAndOffsetWhenNull() {
    assertThat(processor.orderingKey(record("order-7"))).isEqualTo("order-7");
    assertThat(processor.orderingKey(record(null))).isEqualTo("p2o40");
    // distinct non-UTF-8 keys stay distinct
    ConsumerRecord<byte[], byte[]> a = new ConsumerRecord<>("t", 0, 1, new byte[] {(byte) 0xff}, null);
    ConsumerRecord<byte[], byte[]> b = new ConsumerRecord<>("t", 0, 2, new byte[] {(byte) 0xfe}, null);
    assertThat(processor.orderingKey(a)).isNotEqualTo(processor.orderingKey(b));
  }

  private static Throwable causeOf(CompletableFuture<?> f) {
    try {
      f.getNow(null);
      throw new AssertionError("not failed");
    } catch (java.util.concurrent.CompletionException e) {
      return e.getCause();
    } catch (java.util.concurrent.CancellationException e) {
      return e;
    }
  }

}
