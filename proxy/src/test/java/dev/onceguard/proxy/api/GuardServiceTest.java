package dev.onceguard.proxy.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.rpc.RetryInfo;
import dev.onceguard.proxy.TestConfigs;
import dev.onceguard.proxy.config.RouteSettings;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.StoreUnavailableException;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.CompleteRequest;
import dev.onceguard.v1.CompleteResponse;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.ExplainRequest;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.SubmitRequest;
import dev.onceguard.v1.SubmitResponse;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.sql.SQLTransientException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

class GuardServiceTest {
  private static final Duration LEASE = RouteSettings.LEASE.defaultValue();

  private final SidecarConfig config = TestConfigs.oneRoute();
  private final FakeTime time = new FakeTime(1_000);
  private final FakeGuardStore store = new FakeGuardStore();
  private final GuardService service = new GuardService(config, new Guard(store, IdempotencyCache.DISABLED, Map.of(), time, "owner-1",
      d -> CompletableFuture.completedFuture(null)), time);

  private RecordingObserver<SubmitResponse> submit(String requestId) {
    return submit(service, requestId);
  }

  private static RecordingObserver<SubmitResponse> submit(GuardService service, String requestId) {
    RecordingObserver<SubmitResponse> a = new RecordingObserver<>();
    service.submit(SubmitRequest.newBuilder().setRoute("orders").setRequestId(requestId)
        .setValue(ByteString.copyFromUtf8("{\"order_id\":\"o-1\"}")).build(), a);
    return a;
  }

  private RecordingObserver<CompleteResponse> complete(String token, HandleResult.Outcome outcome) {
    return complete(service, token, outcome);
  }

  private static RecordingObserver<CompleteResponse> complete(GuardService service, String token, HandleResult.Outcome outcome) {
    RecordingObserver<CompleteResponse> a = new RecordingObserver<>();
    service.complete(CompleteRequest.newBuilder().setClaimToken(token).setOutcome(outcome).build(), a);
    return a;
  }

  private String acceptedToken(String requestId) {
    SubmitResponse r = submit(requestId).value();
    assertThat(r.getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    return r.getClaimToken();
  }

  @Test
  void submit_storeContention_answersAbortedAskingToRetry() {
    // the guard retries a lost race at once a few times; a store that keeps losing reaches the caller
    for (int i = 0; i < Guard.MAX_CONTENTION_RETRIES; i++) {
      store.claimAnswers.add(CompletableFuture.failedFuture(new ContentionException("deadlock (1213)", new SQLTransientException("1213"))));
    }

    RecordingObserver<SubmitResponse> a = submit("r1");

    assertThat(a.status().getCode()).isEqualTo(Status.Code.ABORTED);
    assertThat(a.status().getDescription()).contains("retry").contains("deadlock (1213)");
  }

  @Test
  void submit_storeUnavailable_answersUnavailable() {
    store.claimAnswers.add(CompletableFuture.failedFuture(new StoreUnavailableException("mysql: connection refused", null)));

    RecordingObserver<SubmitResponse> a = submit("r1");

    assertThat(a.status().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
    assertThat(a.status().getDescription()).isEqualTo("mysql: connection refused");
  }

  @Test
  void complete_storeContentionOnConfirm_answersAborted_andTheTokenStaysUsable() {
    String token = acceptedToken("r1");
    for (int i = 0; i < Guard.MAX_CONTENTION_RETRIES; i++) {
      store.confirmAnswers.add(CompletableFuture.failedFuture(new ContentionException("lock wait timeout (1205)", null)));
    }

    RecordingObserver<CompleteResponse> first = complete(token, HandleResult.Outcome.OK);
    RecordingObserver<CompleteResponse> again = complete(token, HandleResult.Outcome.OK);

    assertThat(first.status().getCode()).isEqualTo(Status.Code.ABORTED);
    assertThat(again.value().getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(store.confirmed).hasSize(1);
  }

  @Test
  void abandonedClaim_leavesTheMapAtLeaseEnd_withoutFurtherSubmits() {
    acceptedToken("r1");
    time.advance(LEASE.minusMillis(1));
    assertThat(service.heldClaims()).isEqualTo(1);

    time.advance(Duration.ofMillis(1));

    assertThat(service.heldClaims()).isZero();
    // released too: the caller's retry finds its own claim row and takes it back at once, instead
    // of waiting for an attempt this process would still think it works on
    var first = store.claims.get(0);
    store.claimAnswers.add(CompletableFuture.completedFuture(new ClaimOutcome.LedgerConflict(new LedgerRow("orders",
        first.extracted().dedupKey(), first.extracted().businessKey(), first.extracted().fingerprint(), "PENDING", "owner-1",
        1_000 + LEASE.toMillis(), first.source().topic(), first.source().partition(), first.source().offset(), null, null, 1,
        5_000L, null, null))));
    acceptedToken("r1");
    assertThat(store.takeOvers).hasSize(1);
  }

  @Test
  void complete_afterLeaseExpiry_isRefused() {
    String token = acceptedToken("r1");
    time.advance(LEASE);

    RecordingObserver<CompleteResponse> a = complete(token, HandleResult.Outcome.OK);

    assertThat(a.status().getCode()).isEqualTo(Status.Code.NOT_FOUND);
    assertThat(store.confirmed).isEmpty();
  }

  @Test
  void completedClaim_stopsItsLeaseTimer() {
    String token = acceptedToken("r1");

    complete(token, HandleResult.Outcome.OK).value();

    assertThat(service.heldClaims()).isZero();
    assertThat(time.pendingDelays()).isZero();
  }

  @Test
  void completeFailingAfterItsLeaseEnded_doesNotKeepTheClaim() {
    String token = acceptedToken("r1");
    CompletableFuture<Boolean> confirm = new CompletableFuture<>();
    store.confirmAnswers.add(confirm);
    RecordingObserver<CompleteResponse> a = complete(token, HandleResult.Outcome.OK);
    time.advance(LEASE);

    confirm.completeExceptionally(new StoreUnavailableException("mysql: timeout", null));

    assertThat(a.status().getCode()).isEqualTo(Status.Code.UNAVAILABLE);
    assertThat(service.heldClaims()).isZero();
    assertThat(complete(token, HandleResult.Outcome.OK).status().getCode()).isEqualTo(Status.Code.NOT_FOUND);
  }

  /** A service that admits {@code bound} calls of each kind, on the same store. */
  private GuardService bounded(int bound) {
    return new GuardService(config, new Guard(store, IdempotencyCache.DISABLED, Map.of(), time, "owner-1",
        d -> CompletableFuture.completedFuture(null)), time, bound);
  }

  /** The store holds the next claims until the test completes them. */
  private CompletableFuture<ClaimOutcome> heldClaim() {
    CompletableFuture<ClaimOutcome> f = new CompletableFuture<>();
    store.claimAnswers.add(f);
    return f;
  }

  private static ClaimOutcome claimed() {
    return new ClaimOutcome.Claimed(null, 1_000 + LEASE.toMillis(), 1, false);
  }

  @Test
  void submit_beyondTheBoundOfCallsInFlight_answersResourceExhaustedWithARetryAfter_beforeAnyStoreWork() {
    GuardService svc = bounded(2);
    CompletableFuture<ClaimOutcome> first = heldClaim();
    heldClaim();
    RecordingObserver<SubmitResponse> a = submit(svc, "r1");
    RecordingObserver<SubmitResponse> b = submit(svc, "r2");

    RecordingObserver<SubmitResponse> c = submit(svc, "r3");

    assertThat(c.status().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
    assertThat(c.values).as("no verdict").isEmpty();
    assertThat(c.status().getDescription()).isEqualTo("Submit refused: 2 calls are in flight already (the store is slower than"
        + " the calls arrive); retry after 100 ms");
    Metadata trailers = Status.trailersFromThrowable(c.error);
    assertThat(trailers.get(GuardService.RETRY_PUSHBACK_MS)).isEqualTo("100");
    com.google.rpc.Status details = StatusProto.fromThrowable(c.error);
    assertThat(details.getDetailsList()).hasSize(1);
    assertThat(details.getDetails(0).is(RetryInfo.class)).isTrue();
    assertThat(store.claims).as("the refused call queued no store work").hasSize(2);
    assertThat(svc.inFlight()).isEqualTo(2);
    assertThat(svc.refusedCalls()).containsExactly(1, 0, 0);
    assertThat(a.values).isEmpty();
    assertThat(b.values).isEmpty();

    first.complete(claimed());

    assertThat(a.value().getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(svc.inFlight()).isEqualTo(1);
    assertThat(submit(svc, "r3").value().getVerdict().getDisposition()).as("admitted once a call was answered")
        .isEqualTo(Disposition.ACCEPTED);
  }

  @Test
  void submit_failedInTheStore_freesItsSlot() {
    GuardService svc = bounded(1);
    store.claimAnswers.add(CompletableFuture.failedFuture(new StoreUnavailableException("mysql: connection refused", null)));

    assertThat(submit(svc, "r1").status().getCode()).isEqualTo(Status.Code.UNAVAILABLE);

    assertThat(svc.inFlight()).isZero();
    assertThat(submit(svc, "r2").value().getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
  }

  @Test
  void complete_hasABoundOfItsOwn_soSubmitsInFlightCannotKeepAcceptedClaimsFromCompleting() {
    GuardService svc = bounded(1);
    String token = submit(svc, "r1").value().getClaimToken();
    heldClaim();
    submit(svc, "r2"); // holds the only Submit slot
    assertThat(submit(svc, "r3").status().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
    RecordingObserver<ExplainResponse> explain = new RecordingObserver<>();
    svc.explain(ExplainRequest.newBuilder().setRoute("orders").setDedupKey("k").build(), explain);
    assertThat(explain.status().getCode()).as("Explain shares the Submit bound").isEqualTo(Status.Code.RESOURCE_EXHAUSTED);

    assertThat(complete(svc, token, HandleResult.Outcome.OK).value().getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(store.confirmed).hasSize(1);
    assertThat(svc.refusedCalls()).containsExactly(1, 0, 1);
  }

  @Test
  void complete_beyondItsBound_answersResourceExhausted_andTheTokenStaysUsable() {
    GuardService svc = bounded(1);
    String first = submit(svc, "r1").value().getClaimToken();
    String second = submit(svc, "r2").value().getClaimToken();
    CompletableFuture<Boolean> confirm = new CompletableFuture<>();
    store.confirmAnswers.add(confirm);
    RecordingObserver<CompleteResponse> held = complete(svc, first, HandleResult.Outcome.OK);

    RecordingObserver<CompleteResponse> refused = complete(svc, second, HandleResult.Outcome.OK);

    assertThat(refused.status().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
    assertThat(refused.status().getDescription()).startsWith("Complete refused: 1 calls are in flight already");
    confirm.complete(true);
    assertThat(held.value().getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(complete(svc, second, HandleResult.Outcome.OK).value().getVerdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(store.confirmed).hasSize(2);
  }
}
