package dev.onceguard.proxy.dispatch;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.dispatch.DispatchResult.Kind;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.HandleResult.Outcome;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The real dispatcher against an in-process business, so the wire mapping is tested end to end. */
class GrpcDispatcherTest {
  private final String name = InProcessServerBuilder.generateName();
  private final List<Delivery> received = new CopyOnWriteArrayList<>();
  private volatile BiConsumer<Delivery, StreamObserver<HandleResult>> behaviour;
  private Server server;
  private GrpcDispatcher dispatcher;

  private GrpcDispatcher start(BiConsumer<Delivery, StreamObserver<HandleResult>> b) throws Exception {
    behaviour = b;
    server = InProcessServerBuilder.forName(name).directExecutor().addService(new MessageHandlerGrpc.MessageHandlerImplBase() {
      @Override
      public void handle(Delivery request, StreamObserver<HandleResult> responseObserver) {
        received.add(request);
        behaviour.accept(request, responseObserver);
      }
    }).build().start();
    ManagedChannel ch = InProcessChannelBuilder.forName(name).directExecutor().build();
    dispatcher = new GrpcDispatcher("in-process:" + name, ch);
    return dispatcher;
  }

  @AfterEach
  void tearDown() {
    if (dispatcher != null) {
      dispatcher.close();
    }
    if (server != null) {
      server.shutdownNow();
    }
  }

  private static BiConsumer<Delivery, StreamObserver<HandleResult>> answer(HandleResult r) {
    return (d, obs) -> {
      obs.onNext(r);
      obs.onCompleted();
    };
  }

  private static BiConsumer<Delivery, StreamObserver<HandleResult>> fail(Status s) {
    return (d, obs) -> obs.onError(s.asRuntimeException());
  }

  private DispatchResult call() throws Exception {
    return dispatcher.dispatch(Delivery.newBuilder().setRoute("r").setAttempt(1).build(), Duration.ofSeconds(5))
        .toCompletableFuture().get(5, TimeUnit.SECONDS);
  }

  @Test
  void dispatch_okResult_isOk_andDeliveryArrivesUnchanged() throws Exception {
    start(answer(HandleResult.newBuilder().setOutcome(Outcome.OK).build()));
    Delivery d = Delivery.newBuilder().setRoute("orders").setAttempt(3).setDeliveryId("x-1").build();
    DispatchResult r = dispatcher.dispatch(d, Duration.ofSeconds(5)).toCompletableFuture().get(5, TimeUnit.SECONDS);
    assertThat(r.kind()).isEqualTo(Kind.OK);
    assertThat(received).containsExactly(d);
  }

  @Test
  void dispatch_retryResult_isRetry_withRetryAfter() throws Exception {
    start(answer(HandleResult.newBuilder().setOutcome(Outcome.RETRY).setMessage("db busy").setRetryAfterMs(1500).build()));
    DispatchResult r = call();
    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.message()).isEqualTo("db busy");
    assertThat(r.retryAfter()).isEqualTo(Duration.ofMillis(1500));
  }

  @Test
  void dispatch_retryAfterAboveSignedRange_isReadUnsigned() throws Exception {
    start(answer(HandleResult.newBuilder().setOutcome(Outcome.RETRY).setRetryAfterMs(-1).build()));
    assertThat(call().retryAfter()).isEqualTo(Duration.ofMillis(4_294_967_295L));
  }

  @Test
  void dispatch_rejectResult_isReject_withMessage() throws Exception {
    start(answer(HandleResult.newBuilder().setOutcome(Outcome.REJECT).setMessage("unknown sku").build()));
    DispatchResult r = call();
    assertThat(r.kind()).isEqualTo(Kind.REJECT);
    assertThat(r.message()).isEqualTo("unknown sku");
  }

  @Test
  void dispatch_outcomeUnspecified_isRetry_sayingNoOutcome() throws Exception {
    start(answer(HandleResult.getDefaultInstance()));
    DispatchResult r = call();
    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.message()).contains("no outcome");
  }

  @ParameterizedTest
  @EnumSource(value = Status.Code.class, names = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "INTERNAL", "UNKNOWN",
      "ABORTED", "UNIMPLEMENTED", "PERMISSION_DENIED", "NOT_FOUND", "CANCELLED", "DATA_LOSS", "OUT_OF_RANGE", "UNAUTHENTICATED"})
  void dispatch_transientOrUnexpectedStatus_isRetry_namingTheStatus(Status.Code code) throws Exception {
    start(fail(Status.fromCode(code).withDescription("boom")));
    DispatchResult r = call();
    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.message()).contains(code.name()).contains("boom");
    assertThat(r.businessDown()).as("the business answered: it is not down, whatever the status").isFalse();
  }

  @ParameterizedTest
  @EnumSource(value = Status.Code.class, names = {"INVALID_ARGUMENT", "FAILED_PRECONDITION"})
  void dispatch_invalidArgumentOrFailedPrecondition_isReject(Status.Code code) throws Exception {
    start(fail(Status.fromCode(code).withDescription("bad payload")));
    DispatchResult r = call();
    assertThat(r.kind()).isEqualTo(Kind.REJECT);
    assertThat(r.message()).contains(code.name()).contains("bad payload");
  }

  @Test
  void dispatch_alreadyExists_isOk() throws Exception {
    start(fail(Status.ALREADY_EXISTS));
    assertThat(call().kind()).isEqualTo(Kind.OK);
  }

  @Test
  void dispatch_businessTooSlow_isRetryWithDeadlineExceeded() throws Exception {
    start((d, obs) -> { /* never answers */ });
    DispatchResult r = dispatcher.dispatch(Delivery.getDefaultInstance(), Duration.ofMillis(100))
        .toCompletableFuture().get(5, TimeUnit.SECONDS);
    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.message()).contains("DEADLINE_EXCEEDED");
    assertThat(r.businessDown()).as("a slow business counts towards max-attempts").isFalse();
  }

  @Test
  void dispatch_cancelled_cancelsTheCallAtTheBusiness() throws Exception {
    CountDownLatch cancelledAtServer = new CountDownLatch(1);
    start((d, obs) -> io.grpc.Context.current().addListener(ctx -> cancelledAtServer.countDown(), Runnable::run));
    CompletableFuture<DispatchResult> f = dispatcher.dispatch(Delivery.getDefaultInstance(), Duration.ofSeconds(30)).toCompletableFuture();
    f.cancel(false);
    assertThat(cancelledAtServer.await(5, TimeUnit.SECONDS)).isTrue();
    assertThat(f).isCancelled();
  }

  @Test
  void dispatch_afterClose_isRetry_notAnException() throws Exception {
    start(answer(HandleResult.newBuilder().setOutcome(Outcome.OK).build()));
    dispatcher.close();
    DispatchResult r = call();
    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(received).isEmpty();
  }

  @Test
  void dispatch_businessNotListening_isRetryUnavailable() throws Exception {
    try (GrpcDispatcher d = GrpcDispatcher.forTarget("127.0.0.1:1")) {
      DispatchResult r = d.dispatch(Delivery.getDefaultInstance(), Duration.ofSeconds(5)).toCompletableFuture().get(10, TimeUnit.SECONDS);
      assertThat(r.kind()).isEqualTo(Kind.RETRY);
      assertThat(r.message()).contains("UNAVAILABLE");
      assertThat(r.businessDown()).isTrue();
      assertThat(r.maybeDelivered()).as("no connection: the business cannot have seen it").isFalse();
    }
  }
}
