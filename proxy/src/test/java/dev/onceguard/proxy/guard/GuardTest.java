package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.store.StoreUnavailableException;
import static dev.onceguard.proxy.guard.FakeGuardStore.contention;
import static dev.onceguard.proxy.guard.FakeGuardStore.failure;
import static dev.onceguard.proxy.guard.FakeGuardStore.reply;
import static dev.onceguard.proxy.guard.OrderRoute.OWNER;
import static dev.onceguard.proxy.guard.OrderRoute.ROUTE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

class GuardTest {
  private static final long T0 = 1_000_000L;
  private final FakeTime time = new FakeTime(T0);
  private final FakeGuardStore store = new FakeGuardStore();
  private final Guard guard = new Guard(store, IdempotencyCache.DISABLED, Map.of("order", OrderRoute.MACHINE), time, OWNER, time);

  private final ConsumerRecord<byte[], byte[]> ship = OrderRoute.record(41, "o-1", "ship");
  private final ExtractedEvent shipEvent = OrderRoute.extracted(ship);
  private final Source shipSource = OrderRoute.source(ship);

  private CompletableFuture<ClaimResult> claimShip() {
    return guard.claim(ROUTE, shipEvent, shipSource).toCompletableFuture();
  }

  /** The PENDING ledger row of the ship record, with this content. */
  private LedgerRow shipRow(String owner, Long leaseLeft, Long ownerLeft) {
    return new LedgerRow("orders", shipEvent.dedupKey(), shipEvent.businessKey(), shipEvent.fingerprint(), "PENDING", owner, T0 + 5,
        "orders", 0, 41, "to_ship", "shipped", 1, leaseLeft, ownerLeft, T0);
  }

  private static ClaimResult.Accepted accepted(CompletableFuture<ClaimResult> f) {
    assertThat(f).isCompleted();
    ClaimResult r = f.join();
    assertThat(r).isInstanceOf(ClaimResult.Accepted.class);
    return (ClaimResult.Accepted) r;
  }


  @Test
  void claim_freshEntity_acceptedWithTheTransition() {
    store.entity("o-1", "to_ship");

    ClaimResult.Accepted a = accepted(claimShip());

    Claim c = a.claim();
    assertThat(c.fromState()).isEqualTo("to_ship");
    assertThat(c.toState()).isEqualTo("shipped");
    assertThat(c.owner()).isEqualTo(OWNER);
    assertThat(c.leaseUntilMillis()).isEqualTo(T0 + ROUTE.timings().lease().toMillis());
    assertThat(c.redelivery()).isFalse();
    assertThat(c.attempts()).isEqualTo(1);
    assertThat(a.verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(store.calls).containsExactly("claim");
  }

  /** L1 in memory: what a confirm remembered, with its fingerprint and source. */
  static final class MapCache implements IdempotencyCache {
    final Map<String, String[]> entries = new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public java.util.concurrent.CompletionStage<Hit> seen(String route, String dedupKey, String fingerprint) {
      String[] e = entries.get(route + ":" + dedupKey);
      return CompletableFuture.completedFuture(e == null || !e[0].equals(fingerprint) ? null : new Hit(Long.parseLong(e[1]), e[2]));
    }

    @Override
    public java.util.concurrent.CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, long confirmedAtMillis,
        java.time.Duration ttl, String source) {
      entries.put(route + ":" + dedupKey, new String[] {fingerprint, Long.toString(confirmedAtMillis), source});
      return CompletableFuture.completedFuture(null);
    }

    @Override
    public void close() {}
  }

  @Test
  void claim_l1HitOfThisVeryRecord_isAcceptedAgainFlaggedReplayed_andAnotherCopyIsACacheHit() {
    Guard withL1 = new Guard(store, new MapCache(), Map.of("order", OrderRoute.MACHINE), time, OWNER, time);
    store.entity("o-1", "to_ship");
    Claim c = accepted(withL1.claim(ROUTE, shipEvent, shipSource).toCompletableFuture()).claim();
    assertThat(withL1.confirm(ROUTE, c).toCompletableFuture().join()).isTrue();
    store.calls.clear();

    // the same record consumed again (its verdict was lost in a crash): L1 answers for it
    ClaimResult again = withL1.claim(ROUTE, shipEvent, shipSource).toCompletableFuture().join();
    // a re-send of the same fact at another offset
    ClaimResult copy = withL1.claim(ROUTE, shipEvent, new Source("orders", 0, 99)).toCompletableFuture().join();

    Verdict replayed = ((ClaimResult.Rejected) again).verdict();
    assertThat(replayed.getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(replayed.getReplayed()).isTrue();
    Verdict dup = ((ClaimResult.Rejected) copy).verdict();
    assertThat(dup.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(dup.getReason()).isEqualTo(Reason.CACHE_HIT);
    assertThat(store.calls).as("neither reaches the store").isEmpty();
  }

  @Test
  void claim_ledgerConflictOnExpiredRow_takesOverAndFlagsRedelivery() {
    LedgerRow expired = shipRow("owner-dead", -100L, null);
    store.claims.add(reply(new ClaimOutcome.LedgerConflict(expired)));

    ClaimResult.Accepted a = accepted(claimShip());

    assertThat(store.calls).containsExactly("claim", "takeOver force=false");
    assertThat(a.claim().redelivery()).isTrue();
    assertThat(a.claim().attempts()).isEqualTo(2);
    assertThat(a.verdict().getDetail()).contains("claimed again");
  }

  @Test
  void claim_takeOverLosesTheRace_claimsFromTheStartAgain() {
    store.claims.add(reply(new ClaimOutcome.LedgerConflict(shipRow("owner-dead", -100L, null))));
    store.takeOvers.add(reply(new ClaimOutcome.Retry("another owner took it over first")));
    store.entity("o-1", "to_ship");

    ClaimResult.Accepted a = accepted(claimShip());

    assertThat(store.calls).containsExactly("claim", "takeOver force=false", "claim");
    assertThat(a.claim().redelivery()).isFalse();
  }

  @Test
  void claim_storeKeepsAnsweringRetry_givesUpAfterMaxClaimRacesAsEntityBusy() {
    for (int i = 0; i < 20; i++) {
      store.claims.add(reply(new ClaimOutcome.Retry("row vanished")));
    }

    ClaimResult r = claimShip().join();

    assertThat(store.count("claim")).isEqualTo(Guard.MAX_CLAIM_RACES);
    assertThat(r).isInstanceOf(ClaimResult.Wait.class);
    ClaimResult.Wait w = (ClaimResult.Wait) r;
    assertThat(w.kind()).isEqualTo(ClaimResult.Wait.Kind.ENTITY_BUSY);
    assertThat(w.retryAtMillis()).isEqualTo(T0 + ROUTE.timings().earlyArrivalRetry().toMillis());
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(w.ifTimedOut().getDetail()).contains("raced").contains("row vanished");
  }

  @Test
  void claim_contentionOnce_retriedAfterJitterAndCounted() {
    store.entity("o-1", "to_ship");
    store.claims.add(failure(contention()));

    CompletableFuture<ClaimResult> f = claimShip();

    assertThat(f).isNotDone();
    assertThat(time.requestedDelays()).singleElement()
        .satisfies(d -> assertThat(d).isBetween(Duration.ofMillis(1), Duration.ofMillis(5)));
    time.advance(Duration.ofMillis(5));
    accepted(f);
    assertThat(store.count("claim")).isEqualTo(2);
    assertThat(guard.contentionRetries()).isEqualTo(1);
  }

  @Test
  void claim_persistentContention_surfacesContentionExceptionAfterMaxRetries() {
    for (int i = 0; i < 20; i++) {
      store.claims.add(failure(contention()));
    }

    CompletableFuture<ClaimResult> f = claimShip();
    time.advance(Duration.ofSeconds(1));

    assertThat(f).isCompletedExceptionally();
    assertThatThrownBy(f::join).hasCauseInstanceOf(ContentionException.class);
    assertThat(store.count("claim")).isEqualTo(Guard.MAX_CONTENTION_RETRIES);
    assertThat(guard.contentionRetries()).isEqualTo(Guard.MAX_CONTENTION_RETRIES);
    // the jitter grows with the attempt: up to 5 ms times the attempt number
    List<Duration> waits = time.requestedDelays();
    assertThat(waits).hasSize(Guard.MAX_CONTENTION_RETRIES - 1);
    for (int i = 0; i < waits.size(); i++) {
      assertThat(waits.get(i)).isBetween(Duration.ofMillis(1), Duration.ofMillis(5L * (i + 1)));
    }
  }

  @Test
  void claim_storeOutage_failsAtOnceWithoutContentionRetries() {
    store.claims.add(failure(FakeGuardStore.outage()));

    CompletableFuture<ClaimResult> f = claimShip();

    assertThatThrownBy(f::join).hasCauseInstanceOf(StoreUnavailableException.class);
    assertThat(store.count("claim")).isEqualTo(1);
    assertThat(guard.contentionRetries()).isZero();
  }

  @Test
  void claim_accepted_neverReadsAppliedRows() {
    store.entity("o-1", "to_ship");

    accepted(claimShip());

    assertThat(store.count("appliedRows")).isZero();
  }

  @Test
  void claim_casLostToAppliedTransition_readsAppliedRowsThenIgnoresSameContent() {
    store.entity("o-1", "delivered");
    LedgerRow applied = new LedgerRow("orders", "other-key", "order_id=o-1, resent", shipEvent.fingerprint(), "DONE", "owner-x", null,
        "orders", 0, 7, "to_ship", "shipped", 1, null, null, T0);
    store.appliedRows.add(reply(List.of(applied)));

    ClaimResult r = claimShip().join();

    assertThat(store.calls).containsExactly("claim", "appliedRows o-1 ship limit=" + Guard.APPLIED_ROWS_LIMIT);
    assertThat(r).isInstanceOf(ClaimResult.Rejected.class);
    assertThat(((ClaimResult.Rejected) r).verdict().getReason()).isEqualTo(Reason.ALREADY_APPLIED);
  }

  @Test
  void claim_casLostToAppliedTransitionWithoutRows_escalatesConflictingFact() {
    store.entity("o-1", "shipped");

    ClaimResult r = claimShip().join();

    assertThat(store.count("appliedRows")).isEqualTo(1);
    assertThat(((ClaimResult.Rejected) r).verdict().getReason()).isEqualTo(Reason.CONFLICTING_FACT);
  }

  @Test
  void claim_entityHeldByExpiredClaimThatIsReleased_claimsAgainAndIsAccepted() {
    store.claims.add(reply(new ClaimOutcome.CasLost(new EntityRow("to_ship", 3, "api-key", 2_500L))));
    store.releases.add(reply(true));
    store.entity("o-1", "to_ship");

    accepted(claimShip());

    assertThat(store.calls).containsExactly("claim", "release api-key", "claim");
  }

  @Test
  void claim_entityHeldByExpiredClaimNotReleased_waitsEntityBusy() {
    store.claims.add(reply(new ClaimOutcome.CasLost(new EntityRow("to_ship", 3, "kafka-key", 2_500L))));

    ClaimResult r = claimShip().join();

    assertThat(store.calls).containsExactly("claim", "release kafka-key");
    assertThat(r).isInstanceOf(ClaimResult.Wait.class);
    assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.ENTITY_BUSY);
  }

  @Test
  void claim_ownLiveClaimWhileItsAttemptRuns_waitsInsteadOfTakingOver() {
    store.entity("o-1", "to_ship");
    Claim first = accepted(claimShip()).claim();
    store.claims.add(reply(new ClaimOutcome.LedgerConflict(shipRow(OWNER, 20_000L, 3_000L))));

    ClaimResult second = claimShip().join();

    assertThat(second).isInstanceOf(ClaimResult.Wait.class);
    assertThat(((ClaimResult.Wait) second).kind()).isEqualTo(ClaimResult.Wait.Kind.OWN_LEASE_LIVE);
    assertThat(store.count("takeOver")).isZero();

    // once the first attempt is given up locally, the same facts mean: take our claim back
    guard.release(first);
    store.claims.add(reply(new ClaimOutcome.LedgerConflict(shipRow(OWNER, 20_000L, 3_000L))));
    accepted(claimShip());
    assertThat(store.calls).endsWith("claim", "takeOver force=true");
  }

  @Test
  void confirm_contentionOnce_retriedAndCounted() {
    store.entity("o-1", "to_ship");
    Claim c = accepted(claimShip()).claim();
    store.confirms.add(failure(contention()));

    CompletableFuture<Boolean> f = guard.confirm(ROUTE, c).toCompletableFuture();
    time.advance(Duration.ofMillis(5));

    assertThat(f).isCompletedWithValue(true);
    assertThat(store.count("confirm")).isEqualTo(2);
    assertThat(guard.contentionRetries()).isEqualTo(1);
    assertThat(store.entityRow("o-1").pendingKey).isNull();
  }

  @Test
  void renew_refused_answersNull() {
    store.entity("o-1", "to_ship");
    Claim c = accepted(claimShip()).claim();
    store.renews.add(reply(false));

    assertThat(guard.renew(ROUTE, c).toCompletableFuture().join()).isNull();
  }

  @Test
  void renew_granted_extendsTheLeaseFromNow() {
    store.entity("o-1", "to_ship");
    Claim c = accepted(claimShip()).claim();
    time.advance(Duration.ofSeconds(7));

    Claim renewed = guard.renew(ROUTE, c).toCompletableFuture().join();

    assertThat(renewed.leaseUntilMillis()).isEqualTo(T0 + 7_000 + ROUTE.timings().lease().toMillis());
  }
}
