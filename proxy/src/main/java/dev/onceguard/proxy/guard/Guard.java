package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.proxy.store.GuardStore.ClaimCommand;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
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
 * <p>Thread-safe. Never blocks: every method returns a stage completed by the stores' I/O
 * threads. Store outages complete stages with {@link StoreUnavailableException}; the cache fails
 * open and never does.
 */
public final class Guard implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Guard.class);

  private final GuardStore store;
  private final IdempotencyCache cache;
  private final Map<String, StateMachine> machines = new HashMap<>();
  private final Clock clock;
  private final String owner;
  /** route + dedup key of claims this process is working on right now, with how many attempts. */
  private final Map<String, Integer> active = new ConcurrentHashMap<>();
  private final AtomicLong decisionLogFailures = new AtomicLong();
  private final AtomicLong decisionLogDropped = new AtomicLong();
  /** Bounds decision-log writes in flight, so a replay storm cannot starve the claims' pool. */
  private final java.util.concurrent.Semaphore decisionLogSlots = new java.util.concurrent.Semaphore(32);

  /**
   * @param owner unique per process run (not per pod name: a restarted pod is a new owner)
   */
  public Guard(GuardStore store, IdempotencyCache cache, Map<String, MachineConfig> machines, Clock clock, String owner) {
    this.store = store;
    this.cache = cache;
    machines.forEach((k, v) -> this.machines.put(k, new StateMachine(v)));
    this.clock = clock;
    this.owner = owner;
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
    return cache.seen(route.name(), e.dedupKey(), e.fingerprint()).thenCompose(hit -> {
      if (hit) {
        Verdict.Builder vb = Verdicts.base(route.name(), e);
        return CompletableFuture.completedFuture(
            new ClaimResult.Rejected(Verdicts.duplicate(vb, Layer.CACHE, Reason.CACHE_HIT, "dedup key confirmed earlier (L1)")));
      }
      return claimInStore(route, e, source);
    });
  }

  /** The claim without L1 (the cache already missed, or the caller knows better). */
  public CompletionStage<ClaimResult> claimInStore(RouteConfig route, ExtractedEvent e, Source source) {
    StateMachine m = route.machine() == null ? null : machines.get(route.machine());
    EventConfig ev = m == null ? null : m.event(e.event());
    String activeKey = route.name() + ":" + e.dedupKey();
    ClaimCommand cmd = new ClaimCommand(route.name(), m, ev, e, source, owner, clock.nowMillis(), route.lease().toMillis(),
        route.earlyArrivalRetry().toMillis(), active.containsKey(activeKey));
    return store.claim(cmd).thenApply(r -> {
      if (r instanceof ClaimResult.Accepted) {
        active.merge(activeKey, 1, Integer::sum);
      }
      return r;
    });
  }

  /**
   * Confirms the claim, then writes L1 (best effort). The stage's value is false if the claim was
   * lost meanwhile (its lease expired and another owner took it over): that owner finishes it.
   */
  public CompletionStage<Boolean> confirm(RouteConfig route, Claim claim) {
    return store.confirm(claim, clock.nowMillis()).thenCompose(ok -> {
      release(claim);
      if (!ok) {
        log.warn("route={} key={} entity={}: claim lost before confirm (lease expired and taken over); the new owner finishes it",
            claim.route(), claim.dedupKey(), claim.entityId());
        return CompletableFuture.completedFuture(false);
      }
      return cache.remember(route.name(), claim.dedupKey(), claim.fingerprint(), route.redisTtl()).thenApply(x -> true);
    });
  }

  /** Aborts the claim (entity back to its previous state, ledger row deleted). */
  public CompletionStage<Boolean> abort(Claim claim) {
    return store.abort(claim, clock.nowMillis()).thenApply(ok -> {
      release(claim);
      return ok;
    });
  }

  /** Extends the lease by the route's lease length. */
  public CompletionStage<Claim> renew(RouteConfig route, Claim claim) {
    long until = clock.nowMillis() + route.lease().toMillis();
    return store.renew(claim, until).thenApply(ok -> ok ? claim.withLeaseUntil(until) : null);
  }

  /** Forgets a claim this process stopped working on without finishing it (revocation). */
  public void release(Claim claim) {
    active.computeIfPresent(claim.route() + ":" + claim.dedupKey(), (k, n) -> n <= 1 ? null : n - 1);
  }

  /**
   * Appends a non-accepted verdict to the decision log, best effort: failures are counted, never
   * raised; cache hits are not logged (an L1 hit must not cost a MySQL write); when 32 writes are
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
