package dev.onceguard.proxy.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import dev.onceguard.proxy.TestConfigs;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.guard.ContentionException;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.guard.StoreUnavailableException;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.CompleteRequest;
import dev.onceguard.v1.CompleteResponse;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.SubmitRequest;
import dev.onceguard.v1.SubmitResponse;
import io.grpc.Status;
import java.sql.SQLTransientException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

class GuardServiceTest {
  private static final Duration LEASE = ConfigReader.DEFAULT_LEASE;

  private final SidecarConfig config = TestConfigs.oneRoute();
  private final FakeTime time = new FakeTime(1_000);
  private final FakeGuardStore store = new FakeGuardStore();
  private final GuardService service = new GuardService(config, new Guard(store, IdempotencyCache.DISABLED, Map.of(), time, "owner-1",
      d -> CompletableFuture.completedFuture(null)), time);

  private RecordingObserver<SubmitResponse> submit(String requestId) {
    RecordingObserver<SubmitResponse> a = new RecordingObserver<>();
    service.submit(SubmitRequest.newBuilder().setRoute("orders").setRequestId(requestId)
        .setValue(ByteString.copyFromUtf8("{\"order_id\":\"o-1\"}")).build(), a);
    return a;
  }

  private RecordingObserver<CompleteResponse> complete(String token, HandleResult.Outcome outcome) {
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
}
