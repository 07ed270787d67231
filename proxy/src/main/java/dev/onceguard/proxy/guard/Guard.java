package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.proxy.store.GuardStore.ClaimCommand;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.store.StoredResponse;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.time.Scheduler;
import dev.onceguard.proxy.trace.RecordTimeline;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The three layers behind one asynchronous API, shared by the Kafka pipeline and the Guard gRPC
 * service: L1 lookup, then the claim (L2 ledger + L3 CAS in one transaction); confirm (then L1
 * write), abort, lease renewal. One claim attempt per call: waiting for early arrivals and
 * retrying store outages is the caller's policy, because the pipeline and the API want different
 * ones.
 *
 * <p>The store reports facts; what they mean is decided by {@link ClaimPolicy}, and the store steps
 * it asks for (take a claim over, release an abandoned API claim, read the rows that applied a
 * transition) are run here.
 *
 * <p>Thread-safe. Never blocks: every method returns a stage completed by the stores' I/O
 * threads. Store outages complete stages with {@link StoreUnavailableException}; a store step that
 * keeps losing races to other transactions with {@link ContentionException} (each step is first
 * retried at once, with jitter, and counted); the cache fails open and never does.
 */
public final class Guard implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Guard.class);
  /** How often a process heartbeats its owner row. */
  public static final Duration HEARTBEAT_EVERY = Duration.ofSeconds(1);
  /**
   * How long an owner row stays alive without a heartbeat: a crashed process's claims are taken
   * over this long after its last heartbeat, not after their (much longer) leases.
   */
  public static final Duration OWNER_TTL = Duration.ofSeconds(5);
  /** Times one claim is run from the start again after a race made its facts stale. */
  static final int MAX_CLAIM_RACES = 5;
  /** Times one store step is run again at once after it lost to another transaction. */
  public static final int MAX_CONTENTION_RETRIES = 8;
  /** An abandoned Guard API claim is undone this long after its lease ran out (database time). */
  static final long API_CLAIM_EXPIRY_GRACE_MILLIS = 2_000;
  /** DONE rows compared with a record whose transition was applied already. */
  static final int APPLIED_ROWS_LIMIT = 16;
  /** Decision-log entries in flight at most (see {@link #record}). */
  public static final int DECISION_LOG_SLOTS = 256;

  private final GuardStore store;
  private final IdempotencyCache cache;
  private final Map<String, StateMachine> machines = new HashMap<>();
  /** Machine name to the configured routes that drive it. */
  private final Map<String, List<String>> machineRoutes = new HashMap<>();
  private final Clock clock;
  private final String owner;
  /** Waits out the jitter before a store step that lost a race runs again. */
  private final Scheduler jitter;
  /** route + dedup key of claims this process is working on right now, with how many attempts. */
  private final Map<String, Integer> active = new ConcurrentHashMap<>();
  private final AtomicLong decisionLogFailures = new AtomicLong();
  private final AtomicLong contention = new AtomicLong();
  private final AtomicLong decisionLogDropped = new AtomicLong();
  /**
   * Bounds decision-log entries in flight (the store writes them in groups on one connection), so
   * a replay storm cannot pile up memory or starve the claims' pool.
   */
  private final java.util.concurrent.Semaphore decisionLogSlots = new java.util.concurrent.Semaphore(DECISION_LOG_SLOTS);

  /**
   * @param owner unique per process run (not per pod name: a restarted pod is a new owner)
   */
  public Guard(GuardStore store, IdempotencyCache cache, Map<String, MachineConfig> machines, Clock clock, String owner) {
    this(store, cache, machines, clock, owner,
        d -> CompletableFuture.runAsync(() -> {}, CompletableFuture.delayedExecutor(d.toMillis(), TimeUnit.MILLISECONDS)));
  }

  /** As the other constructor, with the timer of the contention retries' jitter injected (tests). */
  public Guard(GuardStore store, IdempotencyCache cache, Map<String, MachineConfig> machines, Clock clock, String owner,
      Scheduler jitter) {
    this(store, cache, machines, List.of(), clock, owner, jitter);
  }

  /**
   * @param routes the configured routes: a transition applied already is compared with the DONE
   *     rows of the routes of the same machine only (without them, of the claiming route only)
   */
  public Guard(GuardStore store, IdempotencyCache cache, Map<String, MachineConfig> machines, List<RouteConfig> routes, Clock clock,
      String owner) {
    this(store, cache, machines, routes, clock, owner,
        d -> CompletableFuture.runAsync(() -> {}, CompletableFuture.delayedExecutor(d.toMillis(), TimeUnit.MILLISECONDS)));
  }

  /** As the previous constructor, with the timer of the contention retries' jitter injected (tests). */
  public Guard(GuardStore store, IdempotencyCache cache, Map<String, MachineConfig> machines, List<RouteConfig> routes, Clock clock,
      String owner, Scheduler jitter) {
    this.store = store;
    this.cache = cache;
    machines.forEach((k, v) -> this.machines.put(k, new StateMachine(v)));
    for (RouteConfig r : routes) {
      if (r.machine() != null) {
        machineRoutes.computeIfAbsent(r.machine(), m -> new ArrayList<>()).add(r.name());
      }
    }
    this.clock = clock;
    this.owner = owner;
    this.jitter = jitter;
  }

  public String owner() {
    return owner;
  }

  public Clock clock() {
    return clock;
  }

  public StateMachine machine(String name) {
    return machines.get(name);
  }

  /** L1, then the claim. */
  public CompletionStage<ClaimResult> claim(RouteConfig route, ExtractedEvent e, Source source) {
    RecordTimeline.mark(source.topic(), source.partition(), source.offset(), RecordTimeline.Mark.L1_START);
    return cache.seen(route.name(), e.dedupKey(), e.fingerprint()).thenCompose(hit -> {
      RecordTimeline.mark(source.topic(), source.partition(), source.offset(), RecordTimeline.Mark.L1_END);
      if (hit != null && source.partition() >= 0 && source.toString().equals(hit.source())) {
        // this very record, confirmed before and consumed again: its outcome is ACCEPTED
        return CompletableFuture.completedFuture(new ClaimResult.Rejected(Verdicts.replayedAccept(Verdicts.base(route.name(), e),
            "applied and confirmed from this same record (" + source + ") earlier (L1); the business is not called again")));
      }
      if (hit != null) {
        Verdict.Builder vb = Verdicts.base(route.name(), e);
        return CompletableFuture.completedFuture(new ClaimResult.Rejected(Verdicts.duplicateOf(vb, Layer.CACHE, Reason.CACHE_HIT,
            "dedup key confirmed earlier (L1)", clock.nowMillis(), hit.confirmedAtMillis())));
      }
      return claimInStore(route, e, source);
    });
  }

  /** The claim without L1 (the cache already missed, or the caller knows better). */
  public CompletionStage<ClaimResult> claimInStore(RouteConfig route, ExtractedEvent e, Source source) {
    StateMachine m = route.machine() == null ? null : machines.get(route.machine());
    EventConfig ev = m == null ? null : m.event(e.event());
    String activeKey = route.name() + ":" + e.dedupKey();
    long now = clock.nowMillis();
    ClaimPolicy.Attempt a = new ClaimPolicy.Attempt(route.name(), m, ev, e, source, owner, active.containsKey(activeKey), now,
        route.timings().earlyArrivalRetry().toMillis());
    ClaimCommand cmd = new ClaimCommand(route.name(), m == null ? null : m.name(), ev, e, source, owner, now, route.timings().lease().toMillis());
    return retryingContention(() -> store.claim(cmd), 1)
        .thenCompose(o -> settle(a, cmd, o, 0))
        .thenApply(r -> {
          if (r instanceof ClaimResult.Accepted acc) {
            active.merge(route.name() + ":" + acc.claim().dedupKey(), 1, Integer::sum);
          }
          return r;
        });
  }

  /** Turns a store outcome into a result, running the store steps the policy asks for. */
  private CompletionStage<ClaimResult> settle(ClaimPolicy.Attempt a, ClaimCommand cmd, ClaimOutcome o, int races) {
    if (o instanceof ClaimOutcome.Claimed c) {
      return CompletableFuture.completedFuture(accepted(a, cmd, c));
    }
    ClaimPolicy.Decision d;
    if (o instanceof ClaimOutcome.LedgerConflict lc) {
      d = ClaimPolicy.onLedgerConflict(a, lc.row());
    } else if (o instanceof ClaimOutcome.CasLost cl) {
      d = ClaimPolicy.onCasLost(a, cl.entity(), cl.keyRow());
    } else {
      d = new ClaimPolicy.Again(((ClaimOutcome.Retry) o).why());
    }
    return decide(a, cmd, d, races);
  }

  private CompletionStage<ClaimResult> decide(ClaimPolicy.Attempt a, ClaimCommand cmd, ClaimPolicy.Decision d, int races) {
    if (d instanceof ClaimPolicy.Done done) {
      return CompletableFuture.completedFuture(done.result());
    }
    if (d instanceof ClaimPolicy.TakeOver t) {
      // counted as a race: a takeover that keeps meeting a changed row must end, like a claim
      return retryingContention(() -> store.takeOver(cmd, t.row(), t.force()), 1).thenCompose(o -> settle(a, cmd, o, races + 1));
    }
    if (d instanceof ClaimPolicy.ReleaseExpired r) {
      return retryingContention(() -> store.releaseAbandonedApiClaim(cmd.machine(), a.extracted().entityId(), r.entity().pendingKey(),
              API_CLAIM_EXPIRY_GRACE_MILLIS), 1)
          .thenCompose(released -> {
            if (released) {
              log.warn("route {}: released an abandoned Guard API claim on entity {} (dedup key {}, lease expired {} ms ago)",
                  a.route(), a.extracted().entityId(), r.entity().pendingKey(), r.entity().pendingOverdueMillis());
              return again(a, cmd, races, "an abandoned API claim was released");
            }
            // not an API claim: if it is this very record's, claimed under an earlier business key
            // by an owner that is gone, it is taken over by its source coordinates
            return retryingContention(() -> store.pendingRows(a.extracted().entityId(), r.entity().pendingKey()), 1)
                .thenCompose(rows -> decide(a, cmd, ClaimPolicy.onExpiredPending(a, r.entity(), rows), races));
          });
    }
    if (d instanceof ClaimPolicy.CompareApplied c) {
      return retryingContention(() -> store.appliedRows(routesOf(cmd.machine(), a.route()), a.extracted().entityId(),
              a.extracted().event(), a.extracted().fingerprint(), APPLIED_ROWS_LIMIT), 1)
          .thenApply(rows -> ClaimPolicy.onApplied(a, c.entity(), rows));
    }
    return again(a, cmd, races, ((ClaimPolicy.Again) d).why());
  }

  /**
   * The routes whose DONE rows can tell that a transition of {@code machine} was applied: those
   * configured for it, and {@code route} itself. Another machine's rows never can, though its
   * entity ids and event names may be the same.
   */
  private List<String> routesOf(String machine, String route) {
    List<String> known = machineRoutes.getOrDefault(machine, List.of());
    if (known.contains(route)) {
      return known;
    }
    List<String> out = new ArrayList<>(known);
    out.add(route);
    return out;
  }

  /** A race made the facts stale: claim from the start again, a bounded number of times. */
  private CompletionStage<ClaimResult> again(ClaimPolicy.Attempt a, ClaimCommand cmd, int races, String why) {
    if (races + 1 >= MAX_CLAIM_RACES) {
      Verdict v = Verdicts.escalate(a.verdict(), Layer.LEDGER, Reason.IN_FLIGHT,
          "claim raced with other owners " + MAX_CLAIM_RACES + " times; last: " + why);
      return CompletableFuture.completedFuture(
          new ClaimResult.Wait(ClaimResult.Wait.Kind.ENTITY_BUSY, clock.nowMillis() + a.earlyArrivalRetryMillis(), v));
    }
    return retryingContention(() -> store.claim(cmd), 1).thenCompose(o -> settle(a, cmd, o, races + 1));
  }

  private static ClaimResult accepted(ClaimPolicy.Attempt a, ClaimCommand cmd, ClaimOutcome.Claimed c) {
    ExtractedEvent e = a.extracted();
    EventConfig ev = a.event();
    String key = c.dedupKey() != null ? c.dedupKey() : e.dedupKey();
    Claim claim = new Claim(a.route(), key, e.businessKey(), e.fingerprint(), cmd.machine(), e.entityId(), e.event(), c.fromState(),
        ev == null ? null : ev.to(), a.owner(), c.leaseUntilMillis(), c.attempts(), c.takenOver(), a.source());
    Verdict v = Verdicts.of(a.verdict(), Disposition.ACCEPTED, ev == null ? Layer.LEDGER : Layer.STATE_MACHINE, Reason.NONE,
        c.takenOver() ? "claimed again after an earlier owner or a rejection (attempt " + c.attempts() + ")" : "");
    return new ClaimResult.Accepted(claim, v);
  }

  /**
   * Runs a store step, and again at once (after a few milliseconds of jitter) when it lost a race
   * to another transaction; past {@link #MAX_CONTENTION_RETRIES} the {@link ContentionException}
   * reaches the caller, who retries without pausing anything.
   */
  private <T> CompletionStage<T> retryingContention(java.util.function.Supplier<CompletionStage<T>> step, int attempt) {
    // a success passes straight through; only a failure builds the retry
    return step.get().exceptionallyCompose(err -> {
      Throwable cause = err instanceof java.util.concurrent.CompletionException && err.getCause() != null ? err.getCause() : err;
      if (cause instanceof ContentionException) {
        contention.incrementAndGet();
        if (attempt < MAX_CONTENTION_RETRIES) {
          long wait = 1 + java.util.concurrent.ThreadLocalRandom.current().nextLong(5L * attempt);
          return jitter.delay(Duration.ofMillis(wait)).thenCompose(x -> retryingContention(step, attempt + 1));
        }
      }
      return CompletableFuture.failedFuture(cause);
    });
  }

  /**
   * Store steps that lost a race to another transaction (deadlock, lock-wait timeout): each is run
   * again at once, up to {@link #MAX_CONTENTION_RETRIES} runs in all.
   */
  public long contentionRetries() {
    return contention.get();
  }

  /**
   * Confirms the claim, then writes L1 (best effort) and completes once that write is through, so
   * that a duplicate asked right after is answered by L1 (what a Guard API client that confirms and
   * then asks again expects). The stage's value is false if the claim was lost meanwhile (its lease
   * expired and another owner took it over): that owner finishes it.
   */
  public CompletionStage<Boolean> confirm(RouteConfig route, Claim claim) {
    return confirm(route, claim, true);
  }

  /**
   * {@link #confirm(RouteConfig, Claim)}; with {@code awaitL1} false the stage completes as soon
   * as the store took the confirm, and the L1 write goes on beside it. The consumer pipeline does
   * that: L1 is a best-effort cache whose failures are swallowed anyway, so the record's verdict
   * (and its offset, and the next record of its entity) need not wait a Redis round trip for it; a
   * duplicate that arrives before the write lands is answered by the ledger instead.
   */
  public CompletionStage<Boolean> confirm(RouteConfig route, Claim claim, boolean awaitL1) {
    return confirm(route, claim, awaitL1, null);
  }

  /**
   * {@link #confirm(RouteConfig, Claim)}, keeping {@code response} with the DONE ledger row in the
   * same statement, for {@link #storedResponse} to hand to later submissions of the same fact.
   */
  public CompletionStage<Boolean> confirm(RouteConfig route, Claim claim, StoredResponse response) {
    return confirm(route, claim, true, response);
  }

  private CompletionStage<Boolean> confirm(RouteConfig route, Claim claim, boolean awaitL1, StoredResponse response) {
    long now = clock.nowMillis();
    return retryingContention(() -> store.confirm(claim, now, response), 1).thenCompose(ok -> {
      release(claim);
      if (!ok) {
        log.warn("route={} key={} entity={}: claim lost before confirm (lease expired and taken over); the new owner finishes it",
            claim.route(), claim.dedupKey(), claim.entityId());
        return CompletableFuture.completedFuture(false);
      }
      CompletionStage<Boolean> written =
          cache.remember(route.name(), claim.dedupKey(), claim.fingerprint(), now, route.timings().redisTtl(),
              claim.source() == null ? null : claim.source().toString()).thenApply(x -> true);
      return awaitL1 ? written : CompletableFuture.completedFuture(true);
    });
  }

  /** Aborts a claim the business has (or may have) seen: see {@link #abort(Claim, boolean)}. */
  public CompletionStage<Boolean> abort(Claim claim) {
    return abort(claim, true);
  }

  /**
   * Aborts the claim: the entity goes back to its previous state. If the business {@code maySeen}
   * the record, its ledger row is kept as REJECTED, so a replay of the record is delivered flagged
   * as a redelivery (a re-drive after a fix still works); otherwise the row is deleted.
   */
  public CompletionStage<Boolean> abort(Claim claim, boolean maySeen) {
    return retryingContention(() -> store.abort(claim, maySeen, clock.nowMillis()), 1).thenApply(ok -> {
      release(claim);
      return ok;
    });
  }

  /** Extends the lease by the route's lease length (from the database's now). */
  public CompletionStage<Claim> renew(RouteConfig route, Claim claim) {
    long until = clock.nowMillis() + route.timings().lease().toMillis();
    return retryingContention(() -> store.renew(claim, route.timings().lease().toMillis()), 1)
        .thenApply(ok -> ok ? claim.withLeaseUntil(until) : null);
  }

  /**
   * Gives the claim up for another owner to take over at once, undoing nothing: its lease ends now
   * (database time). For a claim whose record the business may have seen in an earlier attempt
   * (a takeover, a rejected record claimed again), which must stay in the ledger so that its next
   * delivery is flagged. The stage's value is false if the claim was not this owner's any more.
   */
  public CompletionStage<Boolean> relinquish(Claim claim) {
    return retryingContention(() -> store.renew(claim, 0), 1).thenApply(ok -> {
      release(claim);
      return ok;
    });
  }

  /** Tells the store this process is alive for {@link #OWNER_TTL} more. Call every {@link #HEARTBEAT_EVERY}. */
  public CompletionStage<Void> heartbeat() {
    return store.heartbeat(owner, OWNER_TTL.toMillis());
  }

  /** Declares this process gone (graceful shutdown): claims it leaves behind may be taken over at once. */
  public CompletionStage<Void> retire() {
    return store.retire(owner);
  }

  /** Forgets a claim this process stopped working on without finishing it (revocation). */
  public void release(Claim claim) {
    active.computeIfPresent(claim.route() + ":" + claim.dedupKey(), (k, n) -> n <= 1 ? null : n - 1);
  }

  /**
   * Appends a non-accepted verdict to the decision log, best effort: failures are counted, never
   * raised; cache hits are not logged (an L1 hit must not cost a MySQL write); when 256 entries are
   * already in flight the entry is dropped and counted.
   */
  public CompletionStage<Void> record(Verdict v, Source s) {
    if (v.getLayer() == Layer.CACHE) {
      return CompletableFuture.completedFuture(null);
    }
    if (!decisionLogSlots.tryAcquire()) {
      if (decisionLogDropped.incrementAndGet() % 1000 == 1) {
        log.warn("decision log saturated: {} entries dropped so far (verdicts are unaffected)", decisionLogDropped.get());
      }
      return CompletableFuture.completedFuture(null);
    }
    return store.recordDecision(v, s, clock.nowMillis()).whenComplete((x, e) -> decisionLogSlots.release()).exceptionally(e -> {
      if (decisionLogFailures.incrementAndGet() % 1000 == 1) {
        log.warn("decision log write failed ({} so far): {}", decisionLogFailures.get(), e.toString());
      }
      return null;
    });
  }

  /** The response stored with the DONE row of (route, dedup key); {@code null} if none. */
  public CompletionStage<StoredResponse> storedResponse(String route, String dedupKey) {
    return retryingContention(() -> store.storedResponse(route, dedupKey), 1);
  }

  public CompletionStage<ExplainResponse> explain(RouteConfig route, String dedupKey, String entityId, int limit) {
    return store.explain(route.name(), route.machine(), dedupKey, entityId, limit);
  }

  public GuardStore store() {
    return store;
  }

  @Override
  public void close() {
    cache.close();
    store.close();
  }
}
