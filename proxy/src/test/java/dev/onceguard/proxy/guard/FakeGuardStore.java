package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.store.StoredResponse;
import dev.onceguard.proxy.store.StoreUnavailableException;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Verdict;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * An in-memory {@link GuardStore} for unit tests. Each write step first takes the next scripted
 * {@link Answer} of its queue; with none left it runs a small model of the real store: entity rows
 * with the CAS of the machine (claim moves the entity to the event's target and marks it pending,
 * confirm clears the pending key, abort restores the previous state), and claims whose renewal
 * was refused count as lost (confirm, abort and renew answer false for them). The ledger is not
 * modelled: ledger conflicts are scripted. Every call is journaled in {@link #calls} in order.
 * Thread-safe (every method is synchronized); answers complete on the calling thread.
 */
final class FakeGuardStore implements GuardStore {
  /** Responses stored with confirms, by route and dedup key. */
  final java.util.Map<String, StoredResponse> responses = new java.util.concurrent.ConcurrentHashMap<>();

  /** A scripted answer to one call. */
  @FunctionalInterface
  interface Answer<C, T> {
    CompletionStage<T> apply(C call);
  }

  static <C, T> Answer<C, T> reply(T value) {
    return c -> CompletableFuture.completedFuture(value);
  }

  static <C, T> Answer<C, T> failure(Throwable t) {
    return c -> CompletableFuture.failedFuture(t);
  }

  static <C, T> Answer<C, T> hold(CompletableFuture<T> f) {
    return c -> f;
  }

  static ContentionException contention() {
    return new ContentionException("deadlock (1213)", null);
  }

  static StoreUnavailableException outage() {
    return new StoreUnavailableException("connection refused", null);
  }

  /** The modelled entity row. */
  static final class Entity {
    String state;
    long version;
    String pendingKey;
    String previousState;

    Entity(String state, long version) {
      this.state = state;
      this.version = version;
    }

    EntityRow row() {
      return new EntityRow(state, version, pendingKey, pendingKey == null ? null : -1_000L);
    }
  }

  final Queue<Answer<ClaimCommand, ClaimOutcome>> claims = new ArrayDeque<>();
  /** While true, every claim fails as an outage (before the scripted answers). */
  boolean claimsDown;
  /** The lease length the last renewal asked for. */
  volatile long lastRenewMillis = -1;
  final Queue<Answer<ClaimCommand, ClaimOutcome>> takeOvers = new ArrayDeque<>();
  final Queue<Answer<Claim, Boolean>> confirms = new ArrayDeque<>();
  final Queue<Answer<Claim, Boolean>> aborts = new ArrayDeque<>();
  final Queue<Answer<Claim, Boolean>> renews = new ArrayDeque<>();
  final Queue<Answer<String, Boolean>> releases = new ArrayDeque<>();
  final Queue<Answer<String, List<LedgerRow>>> appliedRows = new ArrayDeque<>();
  /** The routes of each appliedRows call, in order. */
  final List<List<String>> appliedRowsRoutes = new ArrayList<>();

  /** Every call, in order: {@code claim}, {@code takeOver force=…}, {@code confirm}, … */
  final List<String> calls = Collections.synchronizedList(new ArrayList<>());
  final List<ClaimCommand> claimCommands = new ArrayList<>();
  final List<Boolean> abortMaySeen = new ArrayList<>();
  final List<Verdict> decisions = new ArrayList<>();
  final Map<String, Entity> entities = new HashMap<>();
  /** Dedup keys whose claim was refused a renewal: taken over by another owner. */
  final Set<String> lost = new HashSet<>();

  /** Seeds an entity in {@code state}. */
  synchronized FakeGuardStore entity(String id, String state) {
    entities.put(id, new Entity(state, 1));
    return this;
  }

  synchronized Entity entityRow(String id) {
    return entities.get(id);
  }

  long count(String call) {
    synchronized (calls) {
      return calls.stream().filter(c -> c.equals(call) || c.startsWith(call + " ")).count();
    }
  }

  private static <C, T> CompletionStage<T> next(Queue<Answer<C, T>> script, C call, java.util.function.Supplier<T> model) {
    Answer<C, T> a = script.poll();
    return a != null ? a.apply(call) : CompletableFuture.completedFuture(model.get());
  }

  @Override
  public synchronized CompletionStage<ClaimOutcome> claim(ClaimCommand cmd) {
    calls.add("claim");
    claimCommands.add(cmd);
    if (claimsDown) {
      return CompletableFuture.failedFuture(outage());
    }
    return next(claims, cmd, () -> cas(cmd, 1, false));
  }

  /** The store's CAS on the modelled entity. */
  private ClaimOutcome cas(ClaimCommand cmd, int attempts, boolean takenOver) {
    long until = cmd.nowMillis() + cmd.leaseMillis();
    EventConfig ev = cmd.event();
    if (ev == null) {
      return new ClaimOutcome.Claimed(null, until, attempts, takenOver);
    }
    String id = cmd.extracted().entityId();
    Entity e = entities.get(id);
    if (e == null) {
      if (!ev.creating()) {
        return new ClaimOutcome.CasLost(null);
      }
      e = new Entity(ev.to(), 1);
      e.pendingKey = cmd.extracted().dedupKey();
      entities.put(id, e);
      return new ClaimOutcome.Claimed(null, until, attempts, takenOver);
    }
    if (e.pendingKey != null || !ev.from().contains(e.state)) {
      return new ClaimOutcome.CasLost(e.row());
    }
    e.previousState = e.state;
    e.state = ev.to();
    e.version++;
    e.pendingKey = cmd.extracted().dedupKey();
    return new ClaimOutcome.Claimed(e.previousState, until, attempts, takenOver);
  }

  @Override
  public synchronized CompletionStage<ClaimOutcome> takeOver(ClaimCommand cmd, LedgerRow row, boolean force) {
    calls.add("takeOver force=" + force);
    long until = cmd.nowMillis() + cmd.leaseMillis();
    return next(takeOvers, cmd, () -> new ClaimOutcome.Claimed(row.fromState(), until, row.attempts() + 1, true));
  }

  @Override
  public synchronized CompletionStage<Boolean> releaseAbandonedApiClaim(String machine, String entityId, String pendingKey,
      long graceMillis) {
    calls.add("release " + pendingKey);
    return next(releases, pendingKey, () -> false);
  }

  @Override
  public CompletionStage<List<LedgerRow>> pendingRows(String entityId, String pendingKey) {
    return CompletableFuture.completedFuture(List.of());
  }

  @Override
  public synchronized CompletionStage<List<LedgerRow>> appliedRows(List<String> routes, String entityId, String event, String fingerprint,
      int limit) {
    appliedRowsRoutes.add(routes);
    calls.add("appliedRows " + entityId + " " + event + " limit=" + limit);
    return next(appliedRows, fingerprint, List::of);
  }

  @Override
  public synchronized CompletionStage<StoredResponse> storedResponse(String route, String dedupKey) {
    return CompletableFuture.completedFuture(responses.get(route + ":" + dedupKey));
  }

  @Override
  public synchronized CompletionStage<Boolean> confirm(Claim claim, long nowMillis, StoredResponse response) {
    if (response != null) {
      responses.put(claim.route() + ":" + claim.dedupKey(), new StoredResponse(response.body(), response.contentType(), nowMillis));
    }
    calls.add("confirm");
    return next(confirms, claim, () -> {
      if (lost.contains(claim.dedupKey())) {
        return false;
      }
      Entity e = claim.entityId() == null ? null : entities.get(claim.entityId());
      if (e != null && claim.dedupKey().equals(e.pendingKey)) {
        e.pendingKey = null;
      }
      return true;
    });
  }

  @Override
  public synchronized CompletionStage<Boolean> abort(Claim claim, boolean maySeen, long nowMillis) {
    calls.add("abort maySeen=" + maySeen);
    abortMaySeen.add(maySeen);
    return next(aborts, claim, () -> {
      if (lost.contains(claim.dedupKey())) {
        return false;
      }
      Entity e = claim.entityId() == null ? null : entities.get(claim.entityId());
      if (e != null && claim.dedupKey().equals(e.pendingKey)) {
        e.state = e.previousState;
        e.version--;
        e.pendingKey = null;
      }
      return true;
    });
  }

  @Override
  public synchronized CompletionStage<Boolean> renew(Claim claim, long leaseMillis) {
    calls.add("renew");
    lastRenewMillis = leaseMillis;
    return next(renews, claim, () -> !lost.contains(claim.dedupKey())).thenApply(ok -> {
      if (!ok) {
        synchronized (this) {
          lost.add(claim.dedupKey());
        }
      }
      return ok;
    });
  }

  @Override
  public CompletionStage<Void> heartbeat(String owner, long ttlMillis) {
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public CompletionStage<Void> retire(String owner) {
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public synchronized CompletionStage<Void> recordDecision(Verdict verdict, Source source, long nowMillis) {
    decisions.add(verdict);
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public CompletionStage<Long> purgeDecisions(long beforeMillis) {
    return CompletableFuture.completedFuture(0L);
  }

  @Override
  public CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit) {
    return CompletableFuture.completedFuture(ExplainResponse.getDefaultInstance());
  }

  @Override
  public void close() {}
}
