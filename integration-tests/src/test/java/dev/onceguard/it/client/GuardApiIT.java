package dev.onceguard.it.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.onceguard.client.ClaimExpiredException;
import dev.onceguard.client.Completion;
import dev.onceguard.client.Decision;
import dev.onceguard.client.EntityBusyException;
import dev.onceguard.client.EntityState;
import dev.onceguard.client.Explanation;
import dev.onceguard.client.GuardClient;
import dev.onceguard.client.LedgerEntry;
import dev.onceguard.client.OnceGuardException;
import dev.onceguard.client.SidecarUnavailableException;
import dev.onceguard.client.Submission;
import dev.onceguard.client.SubmitResult;
import dev.onceguard.client.Verdict;
import dev.onceguard.client.Verdict.Disposition;
import dev.onceguard.client.Verdict.Layer;
import dev.onceguard.client.Verdict.Reason;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.client.ClientSidecar.EntityRow;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link GuardClient} against a real sidecar's {@code Guard} service (real gRPC, MariaDB, Redis):
 * verdicts are data, transient conditions are exceptions from status codes, claims expire with
 * their lease, and {@code Explain} shows what the guard's tables hold. The sidecar reaches
 * MariaDB through a {@link TcpGate}, so one test can make the database unreachable for it alone.
 */
class GuardApiIT {
  private static final String ROUTE = "api-orders";
  private static final Duration LEASE = Duration.ofSeconds(3);

  private static KafkaSupport kafka;
  private static TcpGate gate;
  private static ClientSidecar sidecar;
  private static GuardClient guard;

  @BeforeAll
  static void startSidecar() throws Exception {
    kafka = new KafkaSupport();
    gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort());
    String topic = kafka.createTopic("api-orders", 1);
    String escalations = kafka.createTopic("api-orders-escalate", 1);
    sidecar = ClientSidecar.start("guard-api-it", """
          - name: %s
            topics: [%s]
            machine: order
            entity-id: /order_id
            event: /event
            business-key: [/order_id, /sku_id]
            fingerprint-exclude: [/message_id]
            mode: pull
            escalation-topic: %s
            lease: %ds
        """.formatted(ROUTE, topic, escalations, LEASE.toSeconds()), gate.port());
    guard = GuardClient.forTarget(sidecar.target());
  }

  @AfterAll
  static void stopSidecar() {
    try {
      if (guard != null) {
        guard.close();
      }
    } finally {
      try {
        if (sidecar != null) {
          sidecar.close();
        }
      } finally {
        try {
          if (gate != null) {
            gate.close();
          }
        } finally {
          if (kafka != null) {
            kafka.close();
          }
        }
      }
    }
  }

  /** A fresh submission (random request id, random volatile message id) of one order event. */
  private static Submission event(String orderId, String event) {
    String json = "{\"order_id\":\"" + orderId + "\",\"event\":\"" + event + "\",\"sku_id\":\"sku-7\",\"message_id\":\""
        + UUID.randomUUID() + "\"}";
    return Submission.builder(ROUTE).key(orderId.getBytes(StandardCharsets.UTF_8)).value(json.getBytes(StandardCharsets.UTF_8)).build();
  }

  private static String acceptAndConfirm(String orderId, String event) {
    SubmitResult r = guard.submit(event(orderId, event));
    assertThat(r.verdict().disposition()).as("%s %s", event, orderId).isEqualTo(Disposition.ACCEPTED);
    guard.complete(r.claimToken().orElseThrow(), Completion.OK, "done");
    return r.verdict().dedupKey();
  }

  @Test
  void submit_accepted_completeOk_confirms_andReplayIsDuplicateIgnore() {
    Instant before = Instant.now();
    SubmitResult r = guard.submit(event("a-1", "create"));
    Instant after = Instant.now();

    assertThat(r.verdict().disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(r.verdict().layer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(r.verdict().reason()).isEqualTo(Reason.NONE);
    assertThat(r.verdict().dedupKey()).matches("[0-9a-f]{64}");
    assertThat(r.verdict().entityId()).isEqualTo("a-1");
    assertThat(r.claimToken()).hasValueSatisfying(t -> assertThat(t).isNotBlank());
    assertThat(r.leaseUntil()).as("the route's lease from now")
        .hasValueSatisfying(l -> assertThat(l).isBetween(before.plus(LEASE).minusMillis(5), after.plus(LEASE).plusMillis(5)));
    assertThat(r.fromState()).isEmpty();
    assertThat(r.toState()).isEqualTo("created");
    assertThat(r.redelivery()).isFalse();
    assertThat(sidecar.entity("a-1")).as("claimed: state applied, transition pending")
        .isEqualTo(new EntityRow("created", null, 1, r.verdict().dedupKey()));

    Verdict done = guard.complete(r.claimToken().orElseThrow(), Completion.OK, "shipped");

    assertThat(done.disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(done.currentState()).isEqualTo("created");
    assertThat(sidecar.entity("a-1")).as("confirmed").isEqualTo(new EntityRow("created", null, 1, null));
    assertThat(sidecar.ledger(ROUTE, "a-1")).containsExactly("create DONE 1");

    SubmitResult replay = guard.submit(event("a-1", "create"));
    assertThat(replay.verdict().disposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(replay.verdict().reason()).isIn(Reason.CACHE_HIT, Reason.LEDGER_HIT);
    assertThat(replay.verdict().dedupKey()).isEqualTo(r.verdict().dedupKey());
    assertThat(replay.claimToken()).isEmpty();

    assertThatThrownBy(() -> guard.complete(r.claimToken().orElseThrow(), Completion.OK, "again"))
        .as("a token completes once").isInstanceOf(ClaimExpiredException.class);
    assertThat(sidecar.entity("a-1")).isEqualTo(new EntityRow("created", null, 1, null));
  }

  @Test
  void submit_whileEntityHasAnotherTransitionInFlight_throwsEntityBusy_notAVerdict() {
    SubmitResult create = guard.submit(event("b-1", "create"));
    assertThat(create.isAccepted()).isTrue();

    assertThatThrownBy(() -> guard.submit(event("b-1", "pay")))
        .isInstanceOfSatisfying(EntityBusyException.class, e -> {
          assertThat(e.code()).isEqualTo(Status.Code.ABORTED);
          assertThat(e.isRetriable()).isTrue();
          assertThat(e.description()).contains("another transition");
        });
    assertThat(sidecar.entity("b-1")).isEqualTo(new EntityRow("created", null, 1, create.verdict().dedupKey()));
    assertThat(sidecar.ledger(ROUTE, "b-1")).containsExactly("create PENDING 1");

    guard.complete(create.claimToken().orElseThrow(), Completion.OK, "created");
    SubmitResult pay = guard.submit(event("b-1", "pay"));
    assertThat(pay.isAccepted()).as("accepted once the entity is free").isTrue();
    assertThat(pay.fromState()).isEqualTo("created");
    assertThat(pay.toState()).isEqualTo("paid");
    guard.complete(pay.claimToken().orElseThrow(), Completion.OK, "paid");
    assertThat(sidecar.entity("b-1")).isEqualTo(new EntityRow("paid", "created", 2, null));
  }

  @Test
  void submit_outOfOrder_throwsEntityBusy_andChangesNothing() {
    acceptAndConfirm("c-1", "create");

    assertThatThrownBy(() -> guard.submit(event("c-1", "ship")))
        .as("ship needs 'paid'; the entity is 'created'")
        .isInstanceOfSatisfying(EntityBusyException.class, e -> {
          assertThat(e.code()).isEqualTo(Status.Code.ABORTED);
          assertThat(e.description()).contains("not in a from-state");
        });
    assertThatThrownBy(() -> guard.submit(event("c-2", "pay")))
        .as("pay for an entity not created yet")
        .isInstanceOfSatisfying(EntityBusyException.class, e -> assertThat(e.code()).isEqualTo(Status.Code.ABORTED));

    assertThat(sidecar.entity("c-1")).isEqualTo(new EntityRow("created", null, 1, null));
    assertThat(sidecar.entity("c-2")).isNull();
    assertThat(sidecar.ledger(ROUTE, "c-1")).containsExactly("create DONE 1");
    assertThat(sidecar.ledger(ROUTE, "c-2")).isEmpty();
    assertThat(guard.explainEntity(ROUTE, "c-1").decisions()).as("a transient condition is not a decision").isEmpty();
  }

  @Test
  void submit_unknownRoute_isInvalidArgument() {
    Submission s = Submission.builder("no-such-route").value("{}".getBytes(StandardCharsets.UTF_8)).build();
    assertThatThrownBy(() -> guard.submit(s)).isInstanceOfSatisfying(OnceGuardException.class, e -> {
      assertThat(e.code()).isEqualTo(Status.Code.INVALID_ARGUMENT);
      assertThat(e.isRetriable()).isFalse();
      assertThat(e.description()).contains("no-such-route");
    });
  }

  @Test
  void completeReject_restoresPreviousState_keepsRejectedRow_andResubmitIsAcceptedAsRedelivery() {
    acceptAndConfirm("d-1", "create");
    SubmitResult pay = guard.submit(event("d-1", "pay"));
    assertThat(pay.isAccepted()).isTrue();
    assertThat(sidecar.entity("d-1")).isEqualTo(new EntityRow("paid", "created", 2, pay.verdict().dedupKey()));

    Verdict rejected = guard.complete(pay.claimToken().orElseThrow(), Completion.REJECT, "card declined");

    assertThat(rejected.disposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(rejected.layer()).isEqualTo(Layer.BUSINESS);
    assertThat(rejected.reason()).isEqualTo(Reason.BUSINESS_REJECTED);
    assertThat(rejected.currentState()).isEqualTo("created");
    assertThat(rejected.detail()).contains("card declined");
    assertThat(sidecar.entity("d-1")).as("back where it was").isEqualTo(new EntityRow("created", null, 1, null));
    assertThat(sidecar.ledger(ROUTE, "d-1")).as("the aborted row stays, marked rejected").containsExactly("create DONE 1", "pay REJECTED 1");

    // re-driven: claimed again, flagged, since the caller has seen this event before
    SubmitResult again = guard.submit(event("d-1", "pay"));
    assertThat(again.verdict().disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(again.redelivery()).isTrue();
    assertThat(again.fromState()).isEqualTo("created");
    guard.complete(again.claimToken().orElseThrow(), Completion.OK, "paid");
    assertThat(sidecar.entity("d-1")).isEqualTo(new EntityRow("paid", "created", 2, null));
    assertThat(sidecar.ledger(ROUTE, "d-1")).containsExactly("create DONE 1", "pay DONE 2");
  }

  @Test
  void unfinishedClaim_expiresWithLease_completeThrowsClaimExpired_andSameRequestIdTakesOverAsRedelivery() throws Exception {
    acceptAndConfirm("e-1", "create");
    acceptAndConfirm("e-2", "create");
    Submission pay1 = event("e-1", "pay");
    Submission pay2 = event("e-2", "pay");
    SubmitResult first1 = guard.submit(pay1);
    SubmitResult first2 = guard.submit(pay2);
    assertThat(first1.isAccepted()).isTrue();
    assertThat(first2.isAccepted()).isTrue();

    assertThatThrownBy(() -> guard.submit(pay1))
        .as("the same request id while its claim lives: retry later, never a duplicate verdict")
        .isInstanceOfSatisfying(EntityBusyException.class, e -> assertThat(e.code()).isEqualTo(Status.Code.ABORTED));
    // another request id for the same event while the claim lives: never a second claim (an
    // IN_FLIGHT duplicate verdict by DESIGN.md, or "busy, retry later")
    try {
      SubmitResult other = guard.submit(event("e-1", "pay"));
      assertThat(other.verdict().disposition()).as("another source while the claim lives").isEqualTo(Disposition.DUPLICATE_IGNORE);
      assertThat(other.verdict().reason()).isEqualTo(Reason.IN_FLIGHT);
    } catch (EntityBusyException busy) {
      assertThat(busy.code()).isEqualTo(Status.Code.ABORTED);
    }

    Instant leaseUntil = first2.leaseUntil().orElseThrow();
    Thread.sleep(Math.max(0, Duration.between(Instant.now(), leaseUntil).toMillis()) + 300);

    // e-1: the caller completes too late, then retries its submission
    assertThatThrownBy(() -> guard.complete(first1.claimToken().orElseThrow(), Completion.OK, "too late"))
        .isInstanceOfSatisfying(ClaimExpiredException.class, e -> assertThat(e.code()).isEqualTo(Status.Code.NOT_FOUND));
    assertThat(sidecar.ledger(ROUTE, "e-1")).as("a late Complete confirms nothing").containsExactly("create DONE 1", "pay PENDING 1");
    SubmitResult retried1 = guard.submit(pay1);
    assertThat(retried1.verdict().disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(retried1.redelivery()).as("taken over from the expired claim").isTrue();
    assertThat(retried1.fromState()).isEqualTo("created");
    assertThat(retried1.claimToken()).isPresent().isNotEqualTo(first1.claimToken());
    assertThat(retried1.verdict().dedupKey()).isEqualTo(first1.verdict().dedupKey());
    assertThat(sidecar.ledger(ROUTE, "e-1")).containsExactly("create DONE 1", "pay PENDING 2");
    guard.complete(retried1.claimToken().orElseThrow(), Completion.OK, "paid");
    assertThat(sidecar.entity("e-1")).isEqualTo(new EntityRow("paid", "created", 2, null));
    assertThat(sidecar.ledger(ROUTE, "e-1")).containsExactly("create DONE 1", "pay DONE 2");

    // e-2: the caller crashed before completing; its retry (same request id) takes the claim over
    SubmitResult retried2 = guard.submit(pay2);
    assertThat(retried2.verdict().disposition()).as("an abandoned claim must not block its key").isEqualTo(Disposition.ACCEPTED);
    assertThat(retried2.redelivery()).isTrue();
    assertThatThrownBy(() -> guard.complete(first2.claimToken().orElseThrow(), Completion.OK, "stale"))
        .as("the abandoned token is dead").isInstanceOf(ClaimExpiredException.class);
    guard.complete(retried2.claimToken().orElseThrow(), Completion.OK, "paid");
    assertThat(sidecar.entity("e-2")).isEqualTo(new EntityRow("paid", "created", 2, null));
    assertThat(sidecar.ledger(ROUTE, "e-2")).containsExactly("create DONE 1", "pay DONE 2");
  }

  @Test
  void abandonedClaim_afterItsLease_doesNotKeepTheEntityBusy_anotherEventOfItIsAccepted() throws Exception {
    acceptAndConfirm("h-1", "create");
    SubmitResult pay = guard.submit(event("h-1", "pay"));
    assertThat(pay.isAccepted()).isTrue();
    // the caller goes away without Complete; while the lease lives the entity is busy
    assertThatThrownBy(() -> guard.submit(event("h-1", "cancel")))
        .isInstanceOfSatisfying(EntityBusyException.class, e -> assertThat(e.code()).isEqualTo(Status.Code.ABORTED));

    Instant leaseUntil = pay.leaseUntil().orElseThrow();
    // others undo it 2 s after its lease (a grace for clock skew between sidecars)
    Thread.sleep(Math.max(0, Duration.between(Instant.now(), leaseUntil).toMillis()) + 2_300);

    // past the lease the claim is void: undone, and the entity takes the next event from where it was
    SubmitResult cancel = guard.submit(event("h-1", "cancel"));
    assertThat(cancel.verdict().disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(cancel.fromState()).as("the abandoned 'pay' was rolled back").isEqualTo("created");
    guard.complete(cancel.claimToken().orElseThrow(), Completion.OK, "cancelled");
    assertThat(sidecar.entity("h-1")).isEqualTo(new EntityRow("cancelled", "created", 2, null));
    // the abandoned claim's row is kept as REJECTED, not deleted: its caller was handed it and may
    // have acted on it, so a later claim of the key is flagged as a redelivery
    assertThat(sidecar.ledger(ROUTE, "h-1")).containsExactly("create DONE 1", "pay REJECTED 1", "cancel DONE 1");
    assertThatThrownBy(() -> guard.complete(pay.claimToken().orElseThrow(), Completion.OK, "too late"))
        .isInstanceOf(ClaimExpiredException.class);
  }

  @Test
  void explain_byDedupKeyAndByEntity_returnsLedgerRows_stateAndVersion_andRecentDecisionsWithReasons() {
    Submission create = event("f-1", "create");
    SubmitResult created = guard.submit(create);
    guard.complete(created.claimToken().orElseThrow(), Completion.OK, "created");
    String createKey = created.verdict().dedupKey();
    // same business key, different content: the ledger escalates a key collision (a logged decision)
    SubmitResult collision = guard.submit(Submission.builder(ROUTE).value(("{\"order_id\":\"f-1\",\"event\":\"create\","
        + "\"sku_id\":\"sku-7\",\"warehouse_id\":\"w-2\"}").getBytes(StandardCharsets.UTF_8)).build());
    assertThat(collision.verdict().reason()).isEqualTo(Reason.KEY_COLLISION);
    SubmitResult pay = guard.submit(event("f-1", "pay"));
    guard.complete(pay.claimToken().orElseThrow(), Completion.REJECT, "card declined");
    String payKey = acceptAndConfirm("f-1", "pay");
    assertThat(payKey).isEqualTo(pay.verdict().dedupKey());

    // decisions are written after the response, best effort: wait for them
    await().atMost(Duration.ofSeconds(5)).until(() -> guard.explainEntity(ROUTE, "f-1").decisions().size() >= 2);
    Explanation byKey = guard.explainDedupKey(ROUTE, createKey);

    assertThat(byKey.ledger()).hasSize(1);
    LedgerEntry row = byKey.ledger().get(0);
    assertThat(row.route()).isEqualTo(ROUTE);
    assertThat(row.dedupKey()).isEqualTo(createKey);
    assertThat(row.businessKey()).contains("f-1", "sku-7");
    assertThat(row.entityId()).isEqualTo("f-1");
    assertThat(row.event()).isEqualTo("create");
    assertThat(row.toState()).isEqualTo("created");
    assertThat(row.status()).isEqualTo("DONE");
    assertThat(row.attempts()).isEqualTo(1);
    assertThat(row.sourceTopic()).as("a submission's source is its request id").isEqualTo("@api:" + create.requestId());
    assertThat(row.completedAt()).isNotNull();
    assertThat(byKey.entity()).hasValueSatisfying(e -> assertEntity(e, "paid", 2));
    assertThat(byKey.decisions()).hasSize(1);
    Decision collided = byKey.decisions().get(0);
    assertThat(collided.verdict().disposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(collided.verdict().layer()).isEqualTo(Layer.LEDGER);
    assertThat(collided.verdict().reason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(collided.verdict().detail()).contains("business key");
    assertThat(collided.verdict().dedupKey()).isEqualTo(createKey);
    assertThat(collided.sourceTopic()).as("a submission's source").startsWith("@api:");
    assertThat(collided.at()).isNotNull();

    Explanation byEntity = guard.explainEntity(ROUTE, "f-1");

    assertThat(byEntity.ledger()).extracting(LedgerEntry::event, LedgerEntry::status, LedgerEntry::fromState, LedgerEntry::toState)
        .containsExactly(org.assertj.core.groups.Tuple.tuple("create", "DONE", "", "created"),
            org.assertj.core.groups.Tuple.tuple("pay", "DONE", "created", "paid"));
    assertThat(byEntity.entity()).hasValueSatisfying(e -> assertEntity(e, "paid", 2));
    List<Decision> ds = byEntity.decisions();
    assertThat(ds).as("newest first").extracting(d -> d.verdict().reason())
        .containsExactly(Reason.BUSINESS_REJECTED, collided.verdict().reason());
    assertThat(ds.get(0).verdict().detail()).contains("card declined");
    assertThat(ds.get(0).verdict().currentState()).isEqualTo("created");
    assertThat(ds.get(0).verdict().dedupKey()).isEqualTo(payKey);
  }

  private static void assertEntity(EntityState e, String state, long version) {
    assertThat(e.machine()).isEqualTo("order");
    assertThat(e.entityId()).isEqualTo("f-1");
    assertThat(e.state()).isEqualTo(state);
    assertThat(e.version()).isEqualTo(version);
    assertThat(e.pendingKey()).isEmpty();
    assertThat(e.updatedAt()).isNotNull();
  }

  @Test
  void mysqlUnreachable_submitAndExplainThrowSidecarUnavailable_thenTheSameSubmissionIsAccepted() {
    Submission create = event("g-1", "create");
    gate.cut();
    try {
      assertThatThrownBy(() -> guard.submit(create)).isInstanceOfSatisfying(SidecarUnavailableException.class, e -> {
        assertThat(e.code()).isEqualTo(Status.Code.UNAVAILABLE);
        assertThat(e.isRetriable()).isTrue();
        assertThat(e.description()).contains("MySQL");
      });
      assertThatThrownBy(() -> guard.explainEntity(ROUTE, "g-1")).isInstanceOf(SidecarUnavailableException.class);
    } finally {
      gate.restore();
    }
    assertThat(sidecar.entity("g-1")).as("nothing was claimed during the outage").isNull();

    // the caller retries with the same Submission, as the README says
    SubmitResult r = await().atMost(Duration.ofSeconds(15)).pollInterval(Duration.ofMillis(200)).ignoreException(SidecarUnavailableException.class)
        .until(() -> guard.submit(create), x -> true);
    assertThat(r.verdict().disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(r.redelivery()).isFalse();

    // an outage between Submit and Complete: the Complete fails as retriable and the token stays valid
    String token = r.claimToken().orElseThrow();
    gate.cut();
    try {
      assertThatThrownBy(() -> guard.complete(token, Completion.OK, "created")).isInstanceOf(SidecarUnavailableException.class);
    } finally {
      gate.restore();
    }
    assertThat(sidecar.entity("g-1")).as("still pending").isEqualTo(new EntityRow("created", null, 1, r.verdict().dedupKey()));
    Verdict done = await().atMost(Duration.ofSeconds(15)).pollInterval(Duration.ofMillis(200)).ignoreException(SidecarUnavailableException.class)
        .until(() -> guard.complete(token, Completion.OK, "created"), x -> true);
    assertThat(done.disposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(sidecar.entity("g-1")).isEqualTo(new EntityRow("created", null, 1, null));
    assertThat(sidecar.ledger(ROUTE, "g-1")).containsExactly("create DONE 1");
  }
}
