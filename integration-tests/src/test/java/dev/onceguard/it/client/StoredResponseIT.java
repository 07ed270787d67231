package dev.onceguard.it.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.onceguard.client.GuardClient;
import dev.onceguard.client.OnceGuardException;
import dev.onceguard.client.StoredResponse;
import dev.onceguard.client.Submission;
import dev.onceguard.client.SubmitOutcome;
import dev.onceguard.client.SubmitResult;
import dev.onceguard.client.Verdict.Disposition;
import dev.onceguard.client.Verdict.Reason;
import dev.onceguard.it.KafkaSupport;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Stored responses on the {@code Guard} API against a real sidecar (real gRPC, MariaDB, Redis):
 * a Complete stores a response with the DONE row, a later Submit of the same fact gets it back with
 * the original's time; a Submit while another caller holds the key is told to retry; a changed
 * payload under the same key is a conflict; a response above the route's cap is refused by name.
 */
class StoredResponseIT {
  private static final String ROUTE = "api-payments";
  private static final int RESPONSE_CAP = 256;

  private static KafkaSupport kafka;
  private static ClientSidecar sidecar;
  private static GuardClient guard;

  @BeforeAll
  static void startSidecar() throws Exception {
    kafka = new KafkaSupport();
    String topic = kafka.createTopic("api-payments", 1);
    String escalations = kafka.createTopic("api-payments-escalate", 1);
    sidecar = ClientSidecar.start("stored-response-it", """
          - name: %s
            topics: [%s]
            business-key: [/payment_id]
            fingerprint-exclude: [/request_id]
            mode: pull
            escalation-topic: %s
            early-arrival-retry: 150ms
            response-max-bytes: %d
        """.formatted(ROUTE, topic, escalations, RESPONSE_CAP));
    guard = GuardClient.forTarget(sidecar.target());
  }

  @AfterAll
  static void stop() throws Exception {
    // closed in reverse order, client first; a resource that never started is null and skipped
    try (KafkaSupport k = kafka; ClientSidecar s = sidecar; GuardClient g = guard) {
      // nothing else to do
    }
  }

  /** A payment as an HTTP retry would send it: the same content, a new request id each time. */
  private static Submission payment(String id, int amount) {
    String json = "{\"payment_id\":\"" + id + "\",\"amount\":" + amount + ",\"currency\":\"EUR\",\"request_id\":\"" + UUID.randomUUID() + "\"}";
    return Submission.builder(ROUTE).value(json.getBytes(StandardCharsets.UTF_8)).build();
  }

  private static String fresh() {
    return "p-" + UUID.randomUUID();
  }

  @Test
  void completeWithResponse_thenTheSameFactSubmittedAgain_returnsTheSameBytesContentTypeAndOriginalTime() {
    String id = fresh();
    SubmitResult first = guard.submit(payment(id, 40));
    assertThat(first.outcome()).isEqualTo(SubmitOutcome.PROCEED);
    byte[] body = ("{\"payment\":\"" + id + "\",\"status\":\"captured\"}").getBytes(StandardCharsets.UTF_8);

    Instant before = Instant.now();
    guard.complete(first.claimToken().orElseThrow(), new StoredResponse(body, "application/json"));
    Instant after = Instant.now();

    for (int i = 0; i < 2; i++) {
      SubmitResult again = guard.submit(payment(id, 40));
      assertThat(again.verdict().disposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
      assertThat(again.verdict().reason()).isIn(Reason.CACHE_HIT, Reason.LEDGER_HIT);
      assertThat(again.outcome()).isEqualTo(SubmitOutcome.DUPLICATE);
      assertThat(again.claimToken()).isEmpty();
      assertThat(again.storedResponse()).as("submit %d after the complete", i + 1).hasValueSatisfying(r -> {
        assertThat(r.body()).isEqualTo(body);
        assertThat(r.contentType()).isEqualTo("application/json");
      });
      assertThat(again.originalAt()).as("the time of the original's confirm")
          .hasValueSatisfying(t -> assertThat(t).isBetween(before.minusMillis(5), after.plusMillis(5)));
    }
  }

  @Test
  void submitWhileAnotherCallerHoldsTheKey_isInProgressWithRetryAfter_thenDuplicateWithTheResponse() {
    String id = fresh();
    SubmitResult holder = guard.submit(payment(id, 10));
    assertThat(holder.outcome()).isEqualTo(SubmitOutcome.PROCEED);

    SubmitResult concurrent = guard.submit(payment(id, 10));

    assertThat(concurrent.verdict().reason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(concurrent.outcome()).isEqualTo(SubmitOutcome.IN_PROGRESS);
    assertThat(concurrent.retryAfter().toMillis()).as("the route's early-arrival-retry").isEqualTo(150);
    assertThat(concurrent.claimToken()).isEmpty();
    assertThat(concurrent.storedResponse()).isEmpty();
    assertThat(concurrent.originalAt()).as("the holder's claim time").isPresent();

    guard.complete(holder.claimToken().orElseThrow(), new StoredResponse("ok".getBytes(StandardCharsets.UTF_8), "text/plain"));
    SubmitResult retried = guard.submit(payment(id, 10));

    assertThat(retried.outcome()).isEqualTo(SubmitOutcome.DUPLICATE);
    assertThat(retried.storedResponse()).contains(new StoredResponse("ok".getBytes(StandardCharsets.UTF_8), "text/plain"));
  }

  @Test
  void changedPayloadUnderTheSameKey_isAConflict_neverADuplicate() {
    String id = fresh();
    SubmitResult first = guard.submit(payment(id, 25));
    guard.complete(first.claimToken().orElseThrow(), new StoredResponse("paid 25".getBytes(StandardCharsets.UTF_8), "text/plain"));

    SubmitResult changed = guard.submit(payment(id, 26));

    assertThat(changed.verdict().disposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(changed.verdict().reason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(changed.outcome()).isEqualTo(SubmitOutcome.CONFLICT);
    assertThat(changed.storedResponse()).as("the original's response is not handed to a different fact").isEmpty();
  }

  @Test
  void responseAboveTheRouteCap_isInvalidArgumentNamingTheSetting_andTheClaimCanStillCompleteWithASmallerOne() {
    String id = fresh();
    SubmitResult first = guard.submit(payment(id, 5));
    String token = first.claimToken().orElseThrow();

    OnceGuardException e = catchThrowableOfType(OnceGuardException.class,
        () -> guard.complete(token, new StoredResponse(new byte[RESPONSE_CAP + 1], "application/octet-stream")));

    assertThat(e.code()).isEqualTo(Status.Code.INVALID_ARGUMENT);
    assertThat(e.description()).contains("response-max-bytes").contains(Integer.toString(RESPONSE_CAP)).contains(ROUTE);

    guard.complete(token, new StoredResponse(new byte[RESPONSE_CAP], "application/octet-stream"));
    SubmitResult again = guard.submit(payment(id, 5));
    assertThat(again.storedResponse()).hasValueSatisfying(r -> assertThat(r.body()).hasSize(RESPONSE_CAP));
  }
}
