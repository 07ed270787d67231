package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.store.Source;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.guard.ClaimPolicy.Attempt;
import dev.onceguard.proxy.guard.ClaimPolicy.CompareApplied;
import dev.onceguard.proxy.guard.ClaimPolicy.Decision;
import dev.onceguard.proxy.guard.ClaimPolicy.Done;
import dev.onceguard.proxy.guard.ClaimPolicy.ReleaseExpired;
import dev.onceguard.proxy.guard.ClaimPolicy.TakeOver;
import dev.onceguard.proxy.guard.ClaimResult.Wait.Kind;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.v1.AppliedFact;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link ClaimPolicy} is pure: facts in, a decision out. No store, no clock. */
class ClaimPolicyTest {
  private static final long NOW = 1_000_000L;
  private static final long EARLY_RETRY = 200L;
  private static final String ME = "owner-me";
  private static final String OTHER = "owner-other";
  private static final Source SOURCE = new Source("orders", 3, 41L);
  private static final String FP = "fp-this";
  /** When the rows in these tests were confirmed (or claimed): 90 s before NOW. */
  private static final long ORIGINAL_AT = NOW - 90_000L;

  /** created → paid → to_ship → shipped → delivered, cancel from the first three. */
  private static final StateMachine ORDER = new StateMachine(OrderRoute.MACHINE);

  private static Attempt attempt(String event, Source source, boolean ownAttemptActive) {
    ExtractedEvent e = new ExtractedEvent("o-1", event, "key-1", "order_id=o-1", FP);
    return new Attempt("orders", ORDER, ORDER.event(event), e, source, ME, ownAttemptActive, NOW, EARLY_RETRY);
  }

  private static Attempt attempt(String event) {
    return attempt(event, SOURCE, false);
  }

  /** A ledger row of key-1 claimed for {@code from}. */
  private static LedgerRow row(String status, String fingerprint, String owner, Source from, Long leaseLeft, Long ownerLeft) {
    return new LedgerRow("orders", "key-1", "order_id=o-1", fingerprint, status, owner, 5_000L, from.topic(), from.partition(),
        from.offset(), "to_ship", "shipped", 1, leaseLeft, ownerLeft, ORIGINAL_AT);
  }

  private static LedgerRow pending(String owner, Source from, Long leaseLeft, Long ownerLeft) {
    return row("PENDING", FP, owner, from, leaseLeft, ownerLeft);
  }

  private static ClaimResult result(Decision d) {
    assertThat(d).isInstanceOf(Done.class);
    return ((Done) d).result();
  }

  private static Verdict rejected(Decision d) {
    ClaimResult r = result(d);
    assertThat(r).isInstanceOf(ClaimResult.Rejected.class);
    return ((ClaimResult.Rejected) r).verdict();
  }

  private static ClaimResult.Wait waited(Decision d) {
    ClaimResult r = result(d);
    assertThat(r).isInstanceOf(ClaimResult.Wait.class);
    return (ClaimResult.Wait) r;
  }

  // ------------------------------------------------------------------------- onLedgerConflict

  @Test
  void onLedgerConflict_rejectedRow_takesOverUnforced() {
    LedgerRow r = row("REJECTED", FP, OTHER, SOURCE, null, null);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  @Test
  void onLedgerConflict_rejectedRowWithOtherContent_isTakenOver_aReDriveMayCarryCorrectedContent() {
    LedgerRow r = row("REJECTED", "fp-other", OTHER, SOURCE, null, null);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  @Test
  void onLedgerConflict_differentFingerprint_escalatesKeyCollision() {
    LedgerRow r = row("DONE", "fp-other", OTHER, new Source("orders", 1, 7L), null, null);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship"), r));

    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getLayer()).isEqualTo(Layer.LEDGER);
    assertThat(v.getReason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(v.getDetail()).contains("orders/1@7");
    assertThat(v.getRoute()).isEqualTo("orders");
    assertThat(v.getDedupKey()).isEqualTo("key-1");
    assertThat(v.getEntityId()).isEqualTo("o-1");
    assertThat(v.getExpectedFromStatesList()).containsExactly("to_ship");
  }

  @Test
  void onLedgerConflict_pendingRowWithDifferentFingerprint_escalatesKeyCollisionEvenWhileLive() {
    LedgerRow r = row("PENDING", "fp-other", OTHER, new Source("orders", 1, 7L), 10_000L, 3_000L);

    assertThat(rejected(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).getReason()).isEqualTo(Reason.KEY_COLLISION);
  }

  @Test
  void onLedgerConflict_doneSameFingerprint_duplicateLedgerHit() {
    LedgerRow r = row("DONE", FP, OTHER, new Source("orders", 1, 7L), null, null);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship"), r));

    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getLayer()).isEqualTo(Layer.LEDGER);
    assertThat(v.getReason()).isEqualTo(Reason.LEDGER_HIT);
    assertThat(v.getDetail()).contains("orders/1@7");
    assertThat(v.getOriginalAgeMs()).as("time since the original was confirmed").isEqualTo(90_000L);
  }

  @Test
  void onLedgerConflict_doneRowOfThisVeryRecord_isAcceptedAgainFlaggedReplayed_evenUnderAnotherFingerprint() {
    // the record that applied the key, consumed again after its verdict was lost; the
    // configuration changed meanwhile, so its fingerprint reads differently now
    LedgerRow r = row("DONE", "fp-before-the-change", OTHER, SOURCE, null, null);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship"), r));

    assertThat(v.getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(v.getReplayed()).isTrue();
    assertThat(v.getDetail()).contains("orders/3@41").contains("not called again");
  }

  @Test
  void onLedgerConflict_doneRowOfTheSameCoordinatesThroughTheApi_isNoReplayOfAKafkaRecord() {
    Source api = Source.api("req-1");
    LedgerRow r = row("DONE", FP, OTHER, api, null, null);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship", api, false), r));

    assertThat(v.getReason()).isEqualTo(Reason.LEDGER_HIT);
    assertThat(v.getReplayed()).isFalse();
  }

  @Test
  void onLedgerConflict_deadPendingClaimOfThisVeryRecordUnderAnotherFingerprint_isTakenOver_notAKeyCollision() {
    // the sidecar died holding the claim and came back with another fingerprint-exclude: the
    // record is the same, so its claim is taken over by its source coordinates
    LedgerRow r = row("PENDING", "fp-before-the-change", OTHER, SOURCE, 10_000L, -1L);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  @Test
  void onLedgerConflict_liveClaimOfThisVeryRecordUnderAnotherFingerprint_waitsForIt() {
    LedgerRow r = row("PENDING", "fp-before-the-change", OTHER, SOURCE, 10_000L, 3_000L);

    assertThat(waited(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).kind()).isEqualTo(Kind.OWN_LEASE_LIVE);
  }

  @ParameterizedTest(name = "leaseLeft={0}")
  @ValueSource(longs = {10_000L, -5_000L})
  void onLedgerConflict_apiAttemptMeetsAKafkaClaim_liveOrNot_isInFlight_neverATakeover(long leaseLeft) {
    LedgerRow r = pending(OTHER, new Source("orders", 1, 7L), leaseLeft, leaseLeft);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship", Source.api("req-2"), false), r));

    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(v.getDetail()).contains("Kafka record orders/1@7");
  }

  @ParameterizedTest(name = "ownAttemptActive={0}")
  @ValueSource(booleans = {false, true})
  void onLedgerConflict_liveApiClaimAndKafkaCopy_waitsOwnLeaseLiveUntilTheClaimEnds(boolean ownAttemptActive) {
    LedgerRow r = pending(ME, Source.api("req-9"), 8_000L, 3_000L);

    ClaimResult.Wait w = waited(ClaimPolicy.onLedgerConflict(attempt("ship", SOURCE, ownAttemptActive), r));

    assertThat(w.kind()).isEqualTo(Kind.OWN_LEASE_LIVE);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + 3_000L);
    assertThat(w.ifTimedOut().getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.IN_FLIGHT);
  }

  @Test
  void onLedgerConflict_liveApiClaimAndAnotherApiCall_duplicateInFlight() {
    LedgerRow r = pending(OTHER, Source.api("req-9"), 8_000L, 3_000L);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship", Source.api("req-10"), false), r));

    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getReason()).isEqualTo(Reason.IN_FLIGHT);
  }

  @Test
  void onLedgerConflict_ownAttemptActiveOnSameSourceLive_waitsOwnLeaseLiveUntilLeaseEnds() {
    LedgerRow r = pending(ME, SOURCE, 4_000L, null);

    ClaimResult.Wait w = waited(ClaimPolicy.onLedgerConflict(attempt("ship", SOURCE, true), r));

    assertThat(w.kind()).isEqualTo(Kind.OWN_LEASE_LIVE);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + 4_000L);
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.IN_FLIGHT);
  }

  @Test
  void onLedgerConflict_ownAttemptActiveOnSameSourceExpired_waitsOwnLeaseLiveOneRetryLater() {
    // the lease lapsed (store outage) but the attempt still runs here: never a second one
    LedgerRow r = pending(ME, SOURCE, -50L, null);

    ClaimResult.Wait w = waited(ClaimPolicy.onLedgerConflict(attempt("ship", SOURCE, true), r));

    assertThat(w.kind()).isEqualTo(Kind.OWN_LEASE_LIVE);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + EARLY_RETRY);
  }

  @Test
  void onLedgerConflict_ownAttemptActiveForAnotherSource_waitsKeyHeld() {
    LedgerRow r = pending(ME, new Source("orders", 3, 40L), 4_000L, 3_000L);

    ClaimResult.Wait w = waited(ClaimPolicy.onLedgerConflict(attempt("ship", SOURCE, true), r));

    assertThat(w.kind()).isEqualTo(Kind.KEY_HELD);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + EARLY_RETRY);
  }

  @Test
  void onLedgerConflict_liveClaimOfAnotherSource_duplicateInFlight() {
    LedgerRow r = pending(OTHER, new Source("orders", 0, 12L), 4_000L, 3_000L);

    Verdict v = rejected(ClaimPolicy.onLedgerConflict(attempt("ship"), r));

    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getLayer()).isEqualTo(Layer.LEDGER);
    assertThat(v.getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(v.getDetail()).contains("orders/0@12").contains(OTHER);
  }

  @Test
  void onLedgerConflict_liveClaimOfSameSourceByUs_takesOverForced() {
    LedgerRow r = pending(ME, SOURCE, 4_000L, 3_000L);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, true));
  }

  @Test
  void onLedgerConflict_liveClaimOfSameSourceByOtherOwner_waitsUntilLeaseEndsWhenOwnerOutlivesIt() {
    LedgerRow r = pending(OTHER, SOURCE, 2_500L, 3_000L);

    ClaimResult.Wait w = waited(ClaimPolicy.onLedgerConflict(attempt("ship"), r));

    assertThat(w.kind()).isEqualTo(Kind.OWN_LEASE_LIVE);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + 2_500L);
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(w.ifTimedOut().getDetail()).contains(OTHER);
  }

  @Test
  void onLedgerConflict_liveClaimOfSameSourceByOtherOwner_waitsUntilOwnerHeartbeatEndsWhenSooner() {
    LedgerRow r = pending(OTHER, SOURCE, 20_000L, 1_500L);

    ClaimResult.Wait w = waited(ClaimPolicy.onLedgerConflict(attempt("ship"), r));

    assertThat(w.kind()).isEqualTo(Kind.OWN_LEASE_LIVE);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + 1_500L);
  }

  @Test
  void onLedgerConflict_liveClaimOfSameSourceByOwnerWithoutHeartbeatRow_waitsForTheLeaseAlone() {
    LedgerRow r = pending(OTHER, SOURCE, 20_000L, null);

    assertThat(waited(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).retryAtMillis()).isEqualTo(NOW + 20_000L);
  }

  @ParameterizedTest(name = "ownerLeft={0}")
  @ValueSource(longs = {0L, -1L, -60_000L})
  void onLedgerConflict_ownerDeadWhileLeaseLive_takesOverUnforced(long ownerLeft) {
    LedgerRow r = pending(OTHER, SOURCE, 20_000L, ownerLeft);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  @Test
  void onLedgerConflict_ownerDeadOnAnotherSourcesClaim_takesOverInsteadOfIgnoring() {
    // its record will be redelivered to somebody, but this copy must not be dropped as IN_FLIGHT
    LedgerRow r = pending(OTHER, new Source("orders", 0, 12L), 20_000L, 0L);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  @ParameterizedTest(name = "leaseLeft={0}")
  @ValueSource(longs = {0L, -1L, -60_000L})
  void onLedgerConflict_leaseExpired_takesOverUnforced(long leaseLeft) {
    LedgerRow r = pending(OTHER, SOURCE, leaseLeft, 3_000L);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  @Test
  void onLedgerConflict_pendingWithoutLease_takesOverUnforced() {
    LedgerRow r = pending(OTHER, new Source("orders", 0, 12L), null, null);

    assertThat(ClaimPolicy.onLedgerConflict(attempt("ship"), r)).isEqualTo(new TakeOver(r, false));
  }

  // ------------------------------------------------------------------------- onCasLost

  @Test
  void onCasLost_creatingEventWithoutEntity_claimsAgain() {
    Decision d = ClaimPolicy.onCasLost(attempt("create"), null, null);

    assertThat(d).isInstanceOf(ClaimPolicy.Again.class);
    assertThat(((ClaimPolicy.Again) d).why()).contains("deleted");
  }

  @Test
  void onCasLost_nonCreatingEventWithoutEntity_waitsEarlyArrival() {
    ClaimResult.Wait w = waited(ClaimPolicy.onCasLost(attempt("ship"), null, null));

    assertThat(w.kind()).isEqualTo(Kind.EARLY_ARRIVAL);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + EARLY_RETRY);
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.OUT_OF_ORDER);
    assertThat(w.ifTimedOut().getDetail()).contains("does not exist yet");
    assertThat(w.ifTimedOut().getCurrentState()).isEmpty();
  }

  @Test
  void onCasLost_busyWithExpiredPending_releasesTheExpiredClaim() {
    EntityRow e = new EntityRow("to_ship", 3, "key-0", 1_200L);

    assertThat(ClaimPolicy.onCasLost(attempt("ship"), e, null)).isEqualTo(new ReleaseExpired(e));
  }

  @Test
  void onCasLost_busyWithLivePending_waitsEntityBusy() {
    EntityRow e = new EntityRow("to_ship", 3, "key-0", -5_000L);

    ClaimResult.Wait w = waited(ClaimPolicy.onCasLost(attempt("ship"), e, null));

    assertThat(w.kind()).isEqualTo(Kind.ENTITY_BUSY);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + EARLY_RETRY);
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.OUT_OF_ORDER);
    assertThat(w.ifTimedOut().getDetail()).contains("key-0").doesNotContain("expired");
    assertThat(w.ifTimedOut().getCurrentState()).isEqualTo("to_ship");
    assertThat(w.ifTimedOut().getCurrentVersion()).isEqualTo(3);
  }

  @Test
  void onCasLost_targetAlreadyPassed_comparesAppliedRows() {
    EntityRow e = new EntityRow("delivered", 5, null, null);

    assertThat(ClaimPolicy.onCasLost(attempt("ship"), e, null)).isEqualTo(new CompareApplied(e));
  }

  @Test
  void onCasLost_fromStateStillAhead_waitsEarlyArrival() {
    EntityRow e = new EntityRow("paid", 2, null, null);

    ClaimResult.Wait w = waited(ClaimPolicy.onCasLost(attempt("ship"), e, null));

    assertThat(w.kind()).isEqualTo(Kind.EARLY_ARRIVAL);
    assertThat(w.retryAtMillis()).isEqualTo(NOW + EARLY_RETRY);
    Verdict v = w.ifTimedOut();
    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getLayer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(v.getReason()).isEqualTo(Reason.OUT_OF_ORDER);
    assertThat(v.getCurrentState()).isEqualTo("paid");
    assertThat(v.getCurrentVersion()).isEqualTo(2);
    assertThat(v.getDetail()).contains("'paid'");
  }

  @Test
  void onCasLost_transitionFromUnrelatedBranch_escalatesIllegalTransition() {
    EntityRow e = new EntityRow("cancelled", 3, null, null);

    Verdict v = rejected(ClaimPolicy.onCasLost(attempt("prepare"), e, null));

    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getLayer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(v.getReason()).isEqualTo(Reason.ILLEGAL_TRANSITION);
    assertThat(v.getCurrentState()).isEqualTo("cancelled");
    assertThat(v.getCurrentVersion()).isEqualTo(3);
    assertThat(v.getExpectedFromStatesList()).containsExactly("paid");
  }

  // a same-key copy on another partition: its INSERT went through, its CAS was lost to the
  // original's claim, and the original's row under the same key is what the read after it finds

  @Test
  void onCasLost_keyConfirmedByAnotherRecord_ledgerHitNotTheMachine() {
    EntityRow e = new EntityRow("shipped", 4, null, null);
    LedgerRow key = row("DONE", FP, OTHER, new Source("orders", 1, 7L), null, null);

    Verdict v = rejected(ClaimPolicy.onCasLost(attempt("ship"), e, key));

    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getLayer()).isEqualTo(Layer.LEDGER);
    assertThat(v.getReason()).isEqualTo(Reason.LEDGER_HIT);
  }

  @Test
  void onCasLost_keyClaimedLiveByAnotherRecord_inFlightNotEntityBusy() {
    EntityRow e = new EntityRow("shipped", 4, "key-1", -5_000L);
    LedgerRow key = pending(OTHER, new Source("orders", 1, 7L), 5_000L, 3_000L);

    Verdict v = rejected(ClaimPolicy.onCasLost(attempt("ship"), e, key));

    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getReason()).isEqualTo(Reason.IN_FLIGHT);
  }

  @Test
  void onCasLost_keyHeldWithOtherContent_keyCollision() {
    EntityRow e = new EntityRow("shipped", 4, null, null);
    LedgerRow key = row("DONE", "fp-other", OTHER, new Source("orders", 1, 7L), null, null);

    Verdict v = rejected(ClaimPolicy.onCasLost(attempt("ship"), e, key));

    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getReason()).isEqualTo(Reason.KEY_COLLISION);
  }

  @Test
  void onCasLost_keyRowRejected_theMachineDecides() {
    EntityRow e = new EntityRow("delivered", 5, null, null);
    LedgerRow key = row("REJECTED", FP, OTHER, new Source("orders", 1, 7L), null, null);

    assertThat(ClaimPolicy.onCasLost(attempt("ship"), e, key)).isEqualTo(new CompareApplied(e));
  }
  @Test
  void classify_busyWithExpiredPendingNobodyReleased_waitsEntityBusyAndSaysSo() {
    // what the guard asks once releasing the expired claim did nothing (it is not an API claim)
    EntityRow e = new EntityRow("to_ship", 3, "key-0", 1_200L);

    ClaimResult.Wait w = waited(ClaimPolicy.classify(attempt("ship"), e));

    assertThat(w.kind()).isEqualTo(Kind.ENTITY_BUSY);
    assertThat(w.ifTimedOut().getDetail()).contains("expired 1200 ms ago");
  }

  @Test
  void onExpiredPending_noLedgerRowHoldsTheKey_waitsAndNamesTheOrphanAndItsRelease() {
    // a pending key whose ledger row is gone: no claim can confirm, abort or take it over
    EntityRow e = new EntityRow("to_ship", 3, "key-0", 1_200L);

    ClaimResult.Wait w = waited(ClaimPolicy.onExpiredPending(attempt("ship"), e, List.of()));

    assertThat(w.kind()).isEqualTo(Kind.ENTITY_BUSY);
    assertThat(w.ifTimedOut().getDetail()).contains("key-0", "expired 1200 ms ago", "no ledger row holds that key",
        "reset-entity --release-orphan");
  }

  // ------------------------------------------------------------------------- onApplied

  private static LedgerRow done(String dedupKey, String businessKey, String fingerprint, Source from) {
    return new LedgerRow("orders", dedupKey, businessKey, fingerprint, "DONE", OTHER, null, from.topic(), from.partition(),
        from.offset(), "to_ship", "shipped", 1, null, null, ORIGINAL_AT);
  }

  @Test
  void onApplied_aRowWithThisFingerprint_duplicateAlreadyApplied() {
    EntityRow e = new EntityRow("shipped", 4, null, null);
    List<LedgerRow> rows = List.of(
        done("key-a", "order_id=o-1, batch=1", "fp-a", new Source("orders", 0, 5L)),
        done("key-b", "order_id=o-1, batch=2", FP, new Source("orders", 1, 6L)));

    ClaimResult r = ClaimPolicy.onApplied(attempt("ship"), e, rows);

    assertThat(r).isInstanceOf(ClaimResult.Rejected.class);
    Verdict v = ((ClaimResult.Rejected) r).verdict();
    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getLayer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(v.getReason()).isEqualTo(Reason.ALREADY_APPLIED);
    assertThat(v.getDetail()).contains("orders/1@6").contains("batch=2");
    assertThat(v.getOriginalAgeMs()).isEqualTo(90_000L);
    assertThat(v.getCurrentState()).isEqualTo("shipped");
    assertThat(v.getCurrentVersion()).isEqualTo(4);
    assertThat(v.hasApplied()).isFalse();
  }

  @Test
  void onApplied_noRowWithThisFingerprint_escalatesConflictingFactNamingTheFirstRow() {
    EntityRow e = new EntityRow("shipped", 4, null, null);
    List<LedgerRow> rows = List.of(
        done("key-a", "order_id=o-1, warehouse=w2", "fp-a", new Source("orders", 0, 5L)),
        done("key-b", "order_id=o-1, warehouse=w3", "fp-b", new Source("orders", 1, 6L)));

    ClaimResult r = ClaimPolicy.onApplied(attempt("ship"), e, rows);

    assertThat(r).isInstanceOf(ClaimResult.Rejected.class);
    Verdict v = ((ClaimResult.Rejected) r).verdict();
    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getLayer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(v.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(v.getApplied()).isEqualTo(AppliedFact.newBuilder().setRoute("orders").setDedupKey("key-a")
        .setBusinessKey("order_id=o-1, warehouse=w2").setSourceTopic("orders").setSourcePartition(0).setSourceOffset(5L).build());
    assertThat(v.getDetail()).contains("warehouse=w2").contains("orders/0@5");
    assertThat(v.getCurrentState()).isEqualTo("shipped");
  }

  @Test
  void onApplied_noRowLeft_escalatesConflictingFactWithoutApplied() {
    EntityRow e = new EntityRow("delivered", 5, null, null);

    ClaimResult r = ClaimPolicy.onApplied(attempt("ship"), e, List.of());

    assertThat(r).isInstanceOf(ClaimResult.Rejected.class);
    Verdict v = ((ClaimResult.Rejected) r).verdict();
    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(v.hasApplied()).isFalse();
    assertThat(v.getDetail()).contains("no confirmed ledger row");
  }
}
