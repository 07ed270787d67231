package dev.onceguard.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import com.google.protobuf.ByteString;
import dev.onceguard.v1.CompleteRequest;
import dev.onceguard.v1.CompleteResponse;
import dev.onceguard.v1.ExplainRequest;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.GuardGrpc;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.SubmitRequest;
import dev.onceguard.v1.SubmitResponse;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class GuardClientTest {
  private static final dev.onceguard.v1.Verdict ACCEPTED = dev.onceguard.v1.Verdict.newBuilder()
      .setDisposition(dev.onceguard.v1.Disposition.ACCEPTED)
      .setLayer(dev.onceguard.v1.Layer.STATE_MACHINE)
      .setReason(dev.onceguard.v1.Reason.NONE)
      .setCurrentState("packed")
      .setCurrentVersion(3)
      .addExpectedFromStates("packed")
      .setDedupKey("ab12")
      .setRoute("orders-shipping")
      .setEntityId("o-1")
      .setEvent("ship")
      .build();

  /** A Guard service whose answers each test sets; records the requests. */
  static final class FakeGuard extends GuardGrpc.GuardImplBase {
    final List<SubmitRequest> submits = new ArrayList<>();
    final List<CompleteRequest> completes = new ArrayList<>();
    final List<ExplainRequest> explains = new ArrayList<>();
    Function<SubmitRequest, SubmitResponse> onSubmit = r -> SubmitResponse.getDefaultInstance();
    Function<CompleteRequest, CompleteResponse> onComplete = r -> CompleteResponse.getDefaultInstance();
    Function<ExplainRequest, ExplainResponse> onExplain = r -> ExplainResponse.getDefaultInstance();
    boolean neverAnswer;

    @Override
    public void submit(SubmitRequest request, StreamObserver<SubmitResponse> responses) {
      submits.add(request);
      answer(responses, () -> onSubmit.apply(request));
    }

    @Override
    public void complete(CompleteRequest request, StreamObserver<CompleteResponse> responses) {
      completes.add(request);
      answer(responses, () -> onComplete.apply(request));
    }

    @Override
    public void explain(ExplainRequest request, StreamObserver<ExplainResponse> responses) {
      explains.add(request);
      answer(responses, () -> onExplain.apply(request));
    }

    private <T> void answer(StreamObserver<T> responses, java.util.function.Supplier<T> response) {
      if (neverAnswer) {
        return;
      }
      try {
        responses.onNext(response.get());
        responses.onCompleted();
      } catch (io.grpc.StatusRuntimeException e) {
        responses.onError(e);
      }
    }
  }

  private final FakeGuard sidecar = new FakeGuard();
  private final InProcess grpc = new InProcess(sidecar);
  private final GuardClient guard = new GuardClient(grpc.channel);

  @AfterEach
  void stop() {
    guard.close();
    grpc.close();
  }

  private static Submission order() {
    return Submission.builder("orders-shipping")
        .key("o-1".getBytes(StandardCharsets.UTF_8))
        .value("{\"order_id\":\"o-1\",\"event\":\"ship\"}".getBytes(StandardCharsets.UTF_8))
        .header("source", "erp".getBytes(StandardCharsets.UTF_8))
        .header("empty", null)
        .build();
  }

  @Test
  void submit_accepted_returnsVerdictClaimTokenAndLease() {
    sidecar.onSubmit = r -> SubmitResponse.newBuilder()
        .setVerdict(ACCEPTED)
        .setClaimToken("claim-1")
        .setLeaseUntilMs(1_700_000_000_000L)
        .setFromState("packed")
        .setToState("shipped")
        .build();

    SubmitResult result = guard.submit(order());

    assertThat(result.isAccepted()).isTrue();
    assertThat(result.claimToken()).contains("claim-1");
    assertThat(result.leaseUntil()).contains(Instant.ofEpochMilli(1_700_000_000_000L));
    assertThat(result.fromState()).isEqualTo("packed");
    assertThat(result.toState()).isEqualTo("shipped");
    Verdict v = result.verdict();
    assertThat(v.disposition()).isEqualTo(Verdict.Disposition.ACCEPTED);
    assertThat(v.layer()).isEqualTo(Verdict.Layer.STATE_MACHINE);
    assertThat(v.reason()).isEqualTo(Verdict.Reason.NONE);
    assertThat(v.currentVersion()).isEqualTo(3);
    assertThat(v.expectedFromStates()).containsExactly("packed");
    assertThat(v.entityId()).isEqualTo("o-1");
  }

  @Test
  void submit_sendsRouteKeyValueHeadersAndARequestId() {
    guard.submit(order());

    SubmitRequest sent = sidecar.submits.get(0);
    assertThat(sent.getRoute()).isEqualTo("orders-shipping");
    assertThat(sent.getKey()).isEqualTo(ByteString.copyFromUtf8("o-1"));
    assertThat(sent.getValue().toStringUtf8()).contains("\"order_id\"");
    assertThat(sent.getHeadersList()).hasSize(2);
    assertThat(sent.getHeaders(0).getValue()).isEqualTo(ByteString.copyFromUtf8("erp"));
    assertThat(sent.getHeaders(1).hasValue()).isFalse();
    assertThat(sent.getRequestId()).isNotEmpty();
  }

  @Test
  void submit_retriedWithTheSameSubmission_sendsTheSameRequestId() {
    Submission submission = order();
    sidecar.onSubmit = r -> {
      throw Status.UNAVAILABLE.withDescription("mysql down").asRuntimeException();
    };
    assertThatThrownBy(() -> guard.submit(submission)).isInstanceOf(SidecarUnavailableException.class);
    sidecar.onSubmit = r -> SubmitResponse.getDefaultInstance();

    guard.submit(submission);

    assertThat(sidecar.submits).extracting(SubmitRequest::getRequestId).containsOnly(submission.requestId());
    assertThat(sidecar.submits).hasSize(2);
  }

  @Test
  void submit_duplicate_isAResultWithoutClaimToken() {
    sidecar.onSubmit = r -> SubmitResponse.newBuilder()
        .setVerdict(ACCEPTED.toBuilder()
            .setDisposition(dev.onceguard.v1.Disposition.DUPLICATE_IGNORE)
            .setLayer(dev.onceguard.v1.Layer.LEDGER)
            .setReason(dev.onceguard.v1.Reason.LEDGER_HIT))
        .build();

    SubmitResult result = guard.submit(order());

    assertThat(result.isAccepted()).isFalse();
    assertThat(result.claimToken()).isEmpty();
    assertThat(result.leaseUntil()).isEmpty();
    assertThat(result.verdict().reason()).isEqualTo(Verdict.Reason.LEDGER_HIT);
  }

  @Test
  void submit_aborted_throwsEntityBusyWithTheDescription() {
    sidecar.onSubmit = r -> {
      throw Status.ABORTED.withDescription("entity o-1 has a pending transition").asRuntimeException();
    };

    EntityBusyException e = catchThrowableOfType(EntityBusyException.class, () -> guard.submit(order()));

    assertThat(e).isInstanceOf(OnceGuardException.class);
    assertThat(e.code()).isEqualTo(Status.Code.ABORTED);
    assertThat(e.description()).isEqualTo("entity o-1 has a pending transition");
    assertThat(e.getMessage()).isEqualTo("ABORTED: entity o-1 has a pending transition");
    assertThat(e.isRetriable()).isTrue();
  }

  @Test
  void submit_resourceExhausted_throwsSidecarBusyCarryingTheServersRetryAfterFromTheTrailer() {
    sidecar.onSubmit = r -> {
      io.grpc.Metadata trailers = new io.grpc.Metadata();
      trailers.put(io.grpc.Metadata.Key.of("grpc-retry-pushback-ms", io.grpc.Metadata.ASCII_STRING_MARSHALLER), "750");
      throw Status.RESOURCE_EXHAUSTED.withDescription("Submit refused: 512 calls are in flight already").asRuntimeException(trailers);
    };

    SidecarBusyException e = catchThrowableOfType(SidecarBusyException.class, () -> guard.submit(order()));

    assertThat(e.code()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
    assertThat(e.retryAfter()).isEqualTo(Duration.ofMillis(750));
    assertThat(e.isRetriable()).isTrue();
  }

  @Test
  void complete_resourceExhaustedWithRetryInfoOnly_throwsSidecarBusyWithThatDelay() {
    sidecar.onComplete = r -> {
      throw io.grpc.protobuf.StatusProto.toStatusRuntimeException(com.google.rpc.Status.newBuilder()
          .setCode(Status.Code.RESOURCE_EXHAUSTED.value()).setMessage("Complete refused")
          .addDetails(com.google.protobuf.Any.pack(com.google.rpc.RetryInfo.newBuilder()
              .setRetryDelay(com.google.protobuf.Duration.newBuilder().setSeconds(1).setNanos(200_000_000)).build()))
          .build());
    };

    SidecarBusyException e = catchThrowableOfType(SidecarBusyException.class, () -> guard.complete("t-1", Completion.OK, ""));

    assertThat(e.retryAfter()).isEqualTo(Duration.ofMillis(1200));
  }

  @Test
  void resourceExhausted_withoutAnyDelay_hasAZeroRetryAfter() {
    sidecar.onSubmit = r -> {
      throw Status.RESOURCE_EXHAUSTED.asRuntimeException();
    };

    SidecarBusyException e = catchThrowableOfType(SidecarBusyException.class, () -> guard.submit(order()));

    assertThat(e.retryAfter()).isEqualTo(Duration.ZERO);
  }

  @Test
  void submit_duplicateWithStoredResponse_exposesOutcomeResponseAndOriginalTime() {
    sidecar.onSubmit = r -> SubmitResponse.newBuilder()
        .setVerdict(ACCEPTED.toBuilder().setDisposition(dev.onceguard.v1.Disposition.DUPLICATE_IGNORE)
            .setLayer(dev.onceguard.v1.Layer.LEDGER).setReason(dev.onceguard.v1.Reason.LEDGER_HIT))
        .setOutcome(SubmitResponse.Outcome.DUPLICATE)
        .setResponse(dev.onceguard.v1.StoredResponse.newBuilder().setBody(ByteString.copyFromUtf8("{\"id\":7}"))
            .setContentType("application/json"))
        .setOriginalAtMs(1_700_000_000_000L)
        .build();

    SubmitResult result = guard.submit(order());

    assertThat(result.outcome()).isEqualTo(SubmitOutcome.DUPLICATE);
    assertThat(result.storedResponse()).contains(new StoredResponse("{\"id\":7}".getBytes(StandardCharsets.UTF_8), "application/json"));
    assertThat(result.originalAt()).contains(Instant.ofEpochMilli(1_700_000_000_000L));
  }

  @Test
  void submit_inFlightFromAnOlderSidecar_isInProgressDerivedFromTheVerdict() {
    sidecar.onSubmit = r -> SubmitResponse.newBuilder()
        .setVerdict(ACCEPTED.toBuilder().setDisposition(dev.onceguard.v1.Disposition.DUPLICATE_IGNORE)
            .setLayer(dev.onceguard.v1.Layer.LEDGER).setReason(dev.onceguard.v1.Reason.IN_FLIGHT))
        .build();

    SubmitResult result = guard.submit(order());

    assertThat(result.outcome()).isEqualTo(SubmitOutcome.IN_PROGRESS);
    assertThat(result.storedResponse()).isEmpty();
  }

  @Test
  void complete_withResponse_sendsOkAndTheResponse() {
    sidecar.onComplete = r -> CompleteResponse.newBuilder().setVerdict(ACCEPTED).build();

    guard.complete("t-1", new StoredResponse("created".getBytes(StandardCharsets.UTF_8), "text/plain"));

    CompleteRequest sent = sidecar.completes.get(0);
    assertThat(sent.getOutcome()).isEqualTo(HandleResult.Outcome.OK);
    assertThat(sent.getResponse().getBody().toStringUtf8()).isEqualTo("created");
    assertThat(sent.getResponse().getContentType()).isEqualTo("text/plain");
  }

  @Test
  void submit_unavailable_throwsSidecarUnavailableWithTheDescription() {
    sidecar.onSubmit = r -> {
      throw Status.UNAVAILABLE.withDescription("mysql down").asRuntimeException();
    };

    SidecarUnavailableException e = catchThrowableOfType(SidecarUnavailableException.class, () -> guard.submit(order()));

    assertThat(e.description()).isEqualTo("mysql down");
    assertThat(e.isRetriable()).isTrue();
  }

  @Test
  void submit_invalidArgument_throwsNonRetriableOnceGuardException() {
    sidecar.onSubmit = r -> {
      throw Status.INVALID_ARGUMENT.withDescription("unknown route 'x'").asRuntimeException();
    };

    OnceGuardException e = catchThrowableOfType(OnceGuardException.class, () -> guard.submit(order()));

    assertThat(e).isExactlyInstanceOf(OnceGuardException.class);
    assertThat(e.code()).isEqualTo(Status.Code.INVALID_ARGUMENT);
    assertThat(e.isRetriable()).isFalse();
  }

  @Test
  void submit_noAnswerWithinTheCallTimeout_throwsRetriableDeadlineExceeded() {
    sidecar.neverAnswer = true;
    GuardClient impatient = new GuardClient(grpc.channel, Duration.ofMillis(100));

    OnceGuardException e = catchThrowableOfType(OnceGuardException.class, () -> impatient.submit(order()));

    assertThat(e.code()).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
    assertThat(e.isRetriable()).isTrue();
  }

  @Test
  void complete_sendsTokenOutcomeAndMessage_andReturnsTheVerdict() {
    sidecar.onComplete = r -> CompleteResponse.newBuilder().setVerdict(ACCEPTED).build();

    Verdict v = guard.complete("claim-1", Completion.REJECT, "out of stock");

    assertThat(v.disposition()).isEqualTo(Verdict.Disposition.ACCEPTED);
    CompleteRequest sent = sidecar.completes.get(0);
    assertThat(sent.getClaimToken()).isEqualTo("claim-1");
    assertThat(sent.getOutcome()).isEqualTo(HandleResult.Outcome.REJECT);
    assertThat(sent.getMessage()).isEqualTo("out of stock");
  }

  @Test
  void complete_notFound_throwsClaimExpired() {
    sidecar.onComplete = r -> {
      throw Status.NOT_FOUND.withDescription("claim expired").asRuntimeException();
    };

    assertThatThrownBy(() -> guard.complete("claim-1", Completion.OK, "done"))
        .isInstanceOf(ClaimExpiredException.class)
        .hasMessage("NOT_FOUND: claim expired");
  }

  @Test
  void explainEntity_mapsLedgerEntityAndDecisions() {
    sidecar.onExplain = r -> ExplainResponse.newBuilder()
        .addLedger(dev.onceguard.v1.LedgerEntry.newBuilder()
            .setRoute("orders-shipping").setDedupKey("ab12").setStatus("DONE").setAttempts(1)
            .setSourceTopic("orders").setSourcePartition(2).setSourceOffset(10)
            .setCreatedAtMs(1000).setCompletedAtMs(2000))
        .setEntity(dev.onceguard.v1.EntityState.newBuilder()
            .setMachine("order").setEntityId("o-1").setState("shipped").setVersion(4).setUpdatedAtMs(2000))
        .addDecisions(dev.onceguard.v1.Decision.newBuilder()
            .setAtMs(3000)
            .setVerdict(ACCEPTED.toBuilder()
                .setDisposition(dev.onceguard.v1.Disposition.ILLEGAL_TRANSITION_ESCALATE)
                .setReason(dev.onceguard.v1.Reason.OUT_OF_ORDER)))
        .build();

    Explanation x = guard.explainEntity("orders-shipping", "o-1", 5);

    ExplainRequest sent = sidecar.explains.get(0);
    assertThat(sent.getEntityId()).isEqualTo("o-1");
    assertThat(sent.getLimit()).isEqualTo(5);
    assertThat(x.ledger()).singleElement().satisfies(e -> {
      assertThat(e.status()).isEqualTo("DONE");
      assertThat(e.sourcePartition()).isEqualTo(2);
      assertThat(e.completedAt()).isEqualTo(Instant.ofEpochMilli(2000));
      assertThat(e.leaseUntil()).isNull();
    });
    assertThat(x.entity()).hasValueSatisfying(s -> {
      assertThat(s.state()).isEqualTo("shipped");
      assertThat(s.version()).isEqualTo(4);
    });
    assertThat(x.decisions()).singleElement().satisfies(d -> {
      assertThat(d.at()).isEqualTo(Instant.ofEpochMilli(3000));
      assertThat(d.verdict().reason()).isEqualTo(Verdict.Reason.OUT_OF_ORDER);
    });
  }

  @Test
  void explainDedupKey_sendsTheKey_andAnAbsentEntityIsEmpty() {
    Explanation x = guard.explainDedupKey("orders-shipping", "ab12");

    assertThat(sidecar.explains.get(0).getDedupKey()).isEqualTo("ab12");
    assertThat(x.entity()).isEmpty();
    assertThat(x.ledger()).isEmpty();
  }

  @Test
  void close_ofAClientOnACallersChannel_leavesTheChannelOpen() {
    guard.close();

    assertThat(grpc.channel.isShutdown()).isFalse();
  }

  @Test
  void forTarget_callsOverItsOwnChannel() throws Exception {
    FakeGuard networked = new FakeGuard();
    networked.onSubmit = r -> SubmitResponse.newBuilder().setVerdict(ACCEPTED).setClaimToken("claim-9").build();
    io.grpc.Server server = io.grpc.Grpc.newServerBuilderForPort(0, io.grpc.InsecureServerCredentials.create())
        .addService(networked)
        .build()
        .start();
    try (GuardClient owned = GuardClient.forTarget("localhost:" + server.getPort())) {
      assertThat(owned.submit(order()).claimToken()).contains("claim-9");
    } finally {
      server.shutdownNow().awaitTermination(5, java.util.concurrent.TimeUnit.SECONDS);
    }
  }

  @ParameterizedTest
  @ValueSource(classes = {dev.onceguard.v1.Disposition.class, dev.onceguard.v1.Layer.class, dev.onceguard.v1.Reason.class})
  void javaEnums_mirrorEveryProtoValue(Class<? extends Enum<?>> protoEnum) {
    Class<?> mirror = protoEnum == dev.onceguard.v1.Disposition.class ? Verdict.Disposition.class
        : protoEnum == dev.onceguard.v1.Layer.class ? Verdict.Layer.class
        : Verdict.Reason.class;
    List<String> javaNames = Arrays.stream(mirror.getEnumConstants()).map(c -> ((Enum<?>) c).name()).toList();

    for (Enum<?> value : protoEnum.getEnumConstants()) {
      String name = value.name();
      if (name.equals("UNRECOGNIZED")) {
        continue;
      }
      assertThat(javaNames).contains(name.endsWith("_UNSPECIFIED") ? "UNSPECIFIED" : name);
    }
  }
}
