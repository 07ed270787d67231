package dev.onceguard.proxy.api;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.TestConfigs;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.SubscribeRequest;
import dev.onceguard.v1.Subscription;
import dev.onceguard.v1.Verdict;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class PullHubTest {
  private static final Duration HANDLER_TIMEOUT = Duration.ofSeconds(5);
  private static final int MAX_ATTEMPTS = 3;

  private final FakeTime time = new FakeTime(1_000);
  private final PullHub hub = new PullHub(TestConfigs.oneRoute("""
      mode: pull
      handler-timeout: 5s
      retry:
        max-attempts: %d
      """.formatted(MAX_ATTEMPTS), ""), time);
  private final Dispatcher dispatcher = hub.dispatcher("orders");

  @AfterEach
  void close() {
    hub.close();
  }

  /** A server stream as gRPC hands it to the service: records what is sent, lets the test cancel it. */
  static final class FakeStream extends ServerCallStreamObserver<Delivery> {
    final RecordingObserver<Delivery> out = new RecordingObserver<>();
    final List<Delivery> sent = out.values;
    volatile Runnable onCancel = () -> {};
    /** What isReady answers: false once the client stopped reading and gRPC's buffer is full. */
    volatile boolean ready = true;

    /** The client went away (what gRPC reports through the cancel handler). */
    void cancelByClient() {
      onCancel.run();
    }

    @Override
    public void onNext(Delivery d) {
      out.onNext(d);
    }

    @Override
    public void onError(Throwable t) {
      out.onError(t);
    }

    @Override
    public void onCompleted() {
      out.onCompleted();
    }

    @Override
    public boolean isReady() {
      return ready;
    }

    @Override
    public boolean isCancelled() {
      return false;
    }

    @Override
    public void setOnCancelHandler(Runnable r) {
      onCancel = r;
    }

    @Override
    public void setOnReadyHandler(Runnable r) {}

    @Override
    public void setCompression(String c) {}

    @Override
    public void disableAutoInboundFlowControl() {}

    @Override
    public void request(int n) {}

    @Override
    public void setMessageCompression(boolean enable) {}
  }

  /** One subscriber: its server stream and the hub's observer of what it sends. */
  record Client(FakeStream stream, StreamObserver<SubscribeRequest> in) {
    void ack(Delivery d, HandleResult.Outcome outcome) {
      in.onNext(SubscribeRequest.newBuilder().setAck(Ack.newBuilder().setDeliveryId(d.getDeliveryId())
          .setResult(HandleResult.newBuilder().setOutcome(outcome))).build());
    }

    Delivery last() {
      return stream.sent.get(stream.sent.size() - 1);
    }
  }

  private Client subscribe(String name, int window) {
    FakeStream s = new FakeStream();
    StreamObserver<SubscribeRequest> in = hub.subscribe(s);
    in.onNext(SubscribeRequest.newBuilder().setSubscription(Subscription.newBuilder().setRoute("orders").setSubscriber(name).setWindow(window)).build());
    return new Client(s, in);
  }

  private static Delivery delivery(String id) {
    return Delivery.newBuilder().setRoute("orders").setDedupKey("k").setDeliveryId(id).build();
  }

  /**
   * The processor's side of the dispatcher contract, as {@code GuardedProcessor.Forward.onResult}
   * applies it (without backoff): a RETRY counts unless the business was down, an ambiguous one
   * flags every later attempt {@code redelivery}, and {@code max-attempts} counted ends it.
   */
  final class Attempts {
    final String key;
    final CompletableFuture<String> outcome = new CompletableFuture<>();
    volatile int counted;
    boolean maybeSeen;

    Attempts(String key) {
      this.key = key;
    }

    Attempts start() {
      attempt(1);
      return this;
    }

    void attempt(int n) {
      Delivery d = Delivery.newBuilder().setRoute("orders").setDedupKey(key).setDeliveryId(key + "-" + n).setAttempt(n)
          .setRedelivery(maybeSeen).build();
      dispatcher.dispatch(d, HANDLER_TIMEOUT).thenAccept(r -> {
        switch (r.kind()) {
          case OK -> outcome.complete("OK");
          case REJECT -> outcome.complete("REJECTED");
          case RETRY -> {
            maybeSeen |= r.maybeDelivered();
            if (!r.businessDown() && ++counted >= MAX_ATTEMPTS) {
              outcome.complete("GAVE UP after " + n);
            } else {
              attempt(n + 1);
            }
          }
        }
      });
    }
  }

  @Test
  void escalationNotices_goRoundRobinToSubscribersThatAskedForThem_outsideTheWindow() {
    Client plain = subscribe("plain", 1);
    FakeStream s1 = new FakeStream();
    hub.subscribe(s1).onNext(SubscribeRequest.newBuilder().setSubscription(Subscription.newBuilder().setRoute("orders")
        .setSubscriber("n1").setWindow(1).setEscalations(true)).build());
    FakeStream s2 = new FakeStream();
    hub.subscribe(s2).onNext(SubscribeRequest.newBuilder().setSubscription(Subscription.newBuilder().setRoute("orders")
        .setSubscriber("n2").setWindow(1).setEscalations(true)).build());
    // fill every window: notices do not wait for room
    for (int i = 0; i < 3; i++) {
      dispatcher.dispatch(delivery("d" + i), HANDLER_TIMEOUT);
    }
    ConsumerRecord<byte[], byte[]> record =
        new ConsumerRecord<>("orders", 2, 41L, "o-17".getBytes(), "{}".getBytes());
    Verdict verdict = Verdict.newBuilder()
        .setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE)
        .setReason(Reason.ILLEGAL_TRANSITION).setEntityId("o-17").setEvent("pay").setDedupKey("dk").build();

    hub.escalated("orders", record, verdict);
    hub.escalated("orders", record, verdict);
    hub.escalated("no-such-route", record, verdict);

    assertThat(plain.stream.sent).noneMatch(Delivery::hasEscalation);
    List<Delivery> notices = new ArrayList<>();
    for (FakeStream s : List.of(s1, s2)) {
      assertThat(s.sent.stream().filter(Delivery::hasEscalation).toList()).as("one notice each").hasSize(1);
      s.sent.stream().filter(Delivery::hasEscalation).forEach(notices::add);
    }
    assertThat(notices).allSatisfy(n -> {
      assertThat(n.getDeliveryId()).isEmpty();
      assertThat(n.getEscalation()).isEqualTo(verdict);
      assertThat(n.getEntityId()).isEqualTo("o-17");
      assertThat(n.getRecord().getPartition()).isEqualTo(2);
      assertThat(n.getRecord().getOffset()).isEqualTo(41L);
      assertThat(n.getRecord().getKey().toStringUtf8()).isEqualTo("o-17");
    });
  }

  @Test
  void escalationNotices_skipASubscriberThatStoppedReading_insteadOfBufferingForItWithoutBound() {
    FakeStream stalled = new FakeStream();
    hub.subscribe(stalled).onNext(SubscribeRequest.newBuilder().setSubscription(Subscription.newBuilder().setRoute("orders")
        .setSubscriber("stalled").setEscalations(true)).build());
    FakeStream reading = new FakeStream();
    hub.subscribe(reading).onNext(SubscribeRequest.newBuilder().setSubscription(Subscription.newBuilder().setRoute("orders")
        .setSubscriber("reading").setEscalations(true)).build());
    stalled.ready = false;
    ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>("orders", 0, 1L, null, null);
    Verdict verdict = Verdict.newBuilder().setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE).build();

    for (int i = 0; i < 4; i++) {
      hub.escalated("orders", record, verdict);
    }
    assertThat(stalled.sent).isEmpty();
    assertThat(reading.sent).hasSize(4);

    reading.ready = false;
    hub.escalated("orders", record, verdict);
    assertThat(stalled.sent).as("dropped: best effort").isEmpty();
    assertThat(reading.sent).hasSize(4);
  }

  @Test
  void escalationNotice_withNoSubscriberThatAsked_isDropped() {
    Client plain = subscribe("plain", 4);
    hub.escalated("orders", new ConsumerRecord<>("orders", 0, 1L, null, null),
        Verdict.getDefaultInstance());
    assertThat(plain.stream.sent).isEmpty();
  }

  @Test
  void streamEndsWithUnackedDelivery_countsAttemptAndRedelivers() {
    Client a = subscribe("a", 4);
    Attempts rec = new Attempts("k1").start();
    assertThat(a.stream.sent).hasSize(1);
    Client b = subscribe("b", 4);

    a.in.onError(Status.UNAVAILABLE.asRuntimeException());

    assertThat(rec.counted).isEqualTo(1);
    assertThat(b.stream.sent).singleElement().satisfies(d -> {
      assertThat(d.getAttempt()).isEqualTo(2);
      assertThat(d.getRedelivery()).isTrue();
    });
    assertThat(hub.subscribers("orders")).isEqualTo(1);
    b.ack(b.last(), HandleResult.Outcome.OK);
    assertThat(rec.outcome).isCompletedWithValue("OK");
  }

  @Test
  void streamEnd_completesEachUnackedDeliveryAsMaybeDeliveredRetry() {
    Client a = subscribe("a", 4);
    CompletableFuture<DispatchResult> f1 = dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture();
    CompletableFuture<DispatchResult> f2 = dispatcher.dispatch(delivery("d2"), HANDLER_TIMEOUT).toCompletableFuture();
    a.ack(a.stream.sent.get(1), HandleResult.Outcome.OK);

    a.stream.cancelByClient();

    assertThat(f1).isCompleted();
    DispatchResult r = f1.join();
    assertThat(r.kind()).isEqualTo(DispatchResult.Kind.RETRY);
    assertThat(r.maybeDelivered()).isTrue();
    assertThat(r.businessDown()).isFalse();
    assertThat(r.message()).contains("'a'");
    assertThat(f2.join().kind()).isEqualTo(DispatchResult.Kind.OK);
  }

  @Test
  void recordWhoseEverySubscriberDies_reachesMaxAttempts() {
    Attempts rec = new Attempts("poison").start();
    List<Delivery> received = new CopyOnWriteArrayList<>();

    // each subscriber crashes on it, each ending its stream another way
    Client c1 = subscribe("c1", 4);
    received.addAll(c1.stream.sent);
    c1.in.onError(Status.INTERNAL.asRuntimeException());
    Client c2 = subscribe("c2", 4);
    received.addAll(c2.stream.sent);
    c2.stream.cancelByClient();
    Client c3 = subscribe("c3", 4);
    received.addAll(c3.stream.sent);
    c3.in.onCompleted();

    assertThat(rec.outcome).isCompletedWithValue("GAVE UP after " + MAX_ATTEMPTS);
    assertThat(received).extracting(Delivery::getAttempt).containsExactly(1, 2, 3);
    assertThat(received).extracting(Delivery::getRedelivery).containsExactly(false, true, true);
    assertThat(subscribe("c4", 4).stream.sent).isEmpty();
  }

  @Test
  void ackAfterStreamEnd_isIgnored() {
    Client a = subscribe("a", 4);
    Attempts rec = new Attempts("k1").start();
    Delivery first = a.last();
    a.stream.cancelByClient();
    Client b = subscribe("b", 4);
    Delivery second = b.last();

    // late acks from the dead stream: for what it held, and for what went to b meanwhile
    a.ack(first, HandleResult.Outcome.OK);
    a.ack(second, HandleResult.Outcome.OK);

    assertThat(rec.outcome).isNotDone();
    assertThat(rec.counted).isEqualTo(1);
    assertThat(a.stream.sent).containsExactly(first);
    b.ack(second, HandleResult.Outcome.REJECT);
    assertThat(rec.outcome).isCompletedWithValue("REJECTED");
  }

  @Test
  void deliveryNotAckedWithinHandlerTimeout_countsAsMaybeDeliveredRetry_andLateAckIsIgnored() {
    Client a = subscribe("a", 4);
    CompletableFuture<DispatchResult> f = dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture();

    time.advance(HANDLER_TIMEOUT.minusMillis(1));
    assertThat(f).isNotDone();
    time.advance(Duration.ofMillis(1));

    assertThat(f).isCompleted();
    assertThat(f.join().kind()).isEqualTo(DispatchResult.Kind.RETRY);
    assertThat(f.join().maybeDelivered()).isTrue();
    a.ack(a.last(), HandleResult.Outcome.OK);
    assertThat(f.join().kind()).isEqualTo(DispatchResult.Kind.RETRY);
  }

  @Test
  void ackedDelivery_cancelsItsHandlerTimeout() {
    Client a = subscribe("a", 4);
    dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT);

    a.ack(a.last(), HandleResult.Outcome.OK);

    assertThat(time.pendingDelays()).isZero();
  }

  @Test
  void cancelledDispatch_freesItsWindowSlot() {
    Client a = subscribe("a", 1);
    CompletableFuture<DispatchResult> f1 = dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture();
    dispatcher.dispatch(delivery("d2"), HANDLER_TIMEOUT);
    assertThat(a.stream.sent).extracting(Delivery::getDeliveryId).containsExactly("d1");

    f1.cancel(false);

    assertThat(a.stream.sent).extracting(Delivery::getDeliveryId).containsExactly("d1", "d2");
  }

  @Test
  void close_endsStreams_andAnswersQueuedDeliveriesAsNeverSent() {
    Client a = subscribe("a", 1);
    CompletableFuture<DispatchResult> sent = dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture();
    CompletableFuture<DispatchResult> queued = dispatcher.dispatch(delivery("d2"), HANDLER_TIMEOUT).toCompletableFuture();

    hub.close();

    assertThat(a.stream.out.status().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
    assertThat(sent.join().maybeDelivered()).isTrue();
    assertThat(sent.join().businessDown()).isFalse();
    assertThat(queued.join().maybeDelivered()).isFalse();
    assertThat(queued.join().businessDown()).isTrue();
  }

  // A continuation that needs the hub from another thread while the completing thread waits for it
  // (a processor step handed to a pool, a lock taken in another order) hangs if the hub completes
  // futures under its lock.

  @Test
  void completionOnStreamEnd_reenteringFromAnotherThread_doesNotDeadlock() throws Exception {
    Client a = subscribe("a", 4);
    AtomicReference<Object> seen = reenterOnCompletion(dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture());

    a.stream.cancelByClient();

    assertThat(seen.get()).isEqualTo(0);
  }

  @Test
  void completionOnAck_reenteringFromAnotherThread_doesNotDeadlock() throws Exception {
    Client a = subscribe("a", 4);
    AtomicReference<Object> seen = reenterOnCompletion(dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture());

    a.ack(a.last(), HandleResult.Outcome.OK);

    assertThat(seen.get()).isEqualTo(1);
  }

  @Test
  void completionOnHandlerTimeout_reenteringFromAnotherThread_doesNotDeadlock() throws Exception {
    subscribe("a", 4);
    AtomicReference<Object> seen = reenterOnCompletion(dispatcher.dispatch(delivery("d1"), HANDLER_TIMEOUT).toCompletableFuture());

    time.advance(HANDLER_TIMEOUT);

    assertThat(seen.get()).isEqualTo(1);
  }

  /** On completion, asks the hub for its subscriber count from another thread and waits up to 2 s. */
  private AtomicReference<Object> reenterOnCompletion(CompletableFuture<DispatchResult> f) {
    AtomicReference<Object> seen = new AtomicReference<>("not completed");
    f.thenRun(() -> {
      try {
        seen.set(CompletableFuture.supplyAsync(() -> hub.subscribers("orders")).get(2, TimeUnit.SECONDS));
      } catch (Exception e) {
        seen.set(e);
      }
    });
    return seen;
  }
}
