package dev.onceguard.proxy.api;

import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.store.StoredResponse;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Verdict;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link GuardStore} for routes without a machine: every claim is accepted for the command's
 * lease, every takeover succeeds, every confirm and abort succeeds, unless the test queued another
 * answer. Records the claim commands, the rows taken over and the confirmed claims. Thread-safe.
 */
final class FakeGuardStore implements GuardStore {
  /** Responses stored with confirms, by route and dedup key. */
  final java.util.Map<String, StoredResponse> responses = new java.util.concurrent.ConcurrentHashMap<>();
  final List<ClaimCommand> claims = new CopyOnWriteArrayList<>();
  final List<Claim> confirmed = new CopyOnWriteArrayList<>();
  /** Answers for the next claims, in order; then claims are accepted. */
  final Queue<CompletionStage<ClaimOutcome>> claimAnswers = new ConcurrentLinkedQueue<>();
  /** Rows taken over, in order. */
  final List<LedgerRow> takeOvers = new CopyOnWriteArrayList<>();
  /** Answers for the next confirms, in order; then confirms succeed. */
  final Queue<CompletionStage<Boolean>> confirmAnswers = new ConcurrentLinkedQueue<>();

  @Override
  public CompletionStage<ClaimOutcome> claim(ClaimCommand cmd) {
    claims.add(cmd);
    CompletionStage<ClaimOutcome> scripted = claimAnswers.poll();
    if (scripted != null) {
      return scripted;
    }
    return CompletableFuture.completedFuture(new ClaimOutcome.Claimed(null, cmd.nowMillis() + cmd.leaseMillis(), 1, false));
  }

  @Override
  public CompletionStage<ClaimOutcome> takeOver(ClaimCommand cmd, LedgerRow row, boolean force) {
    takeOvers.add(row);
    return CompletableFuture.completedFuture(new ClaimOutcome.Claimed(null, cmd.nowMillis() + cmd.leaseMillis(), row.attempts() + 1, true));
  }

  @Override
  public CompletionStage<Boolean> releaseAbandonedApiClaim(String machine, String entityId, String pendingKey, long graceMillis) {
    return CompletableFuture.completedFuture(false);
  }

  @Override
  public CompletionStage<List<LedgerRow>> pendingRows(String entityId, String pendingKey) {
    return CompletableFuture.completedFuture(List.of());
  }

  @Override
  public CompletionStage<List<LedgerRow>> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit) {
    return CompletableFuture.completedFuture(List.of());
  }

  @Override
  public CompletionStage<StoredResponse> storedResponse(String route, String dedupKey) {
    return CompletableFuture.completedFuture(responses.get(route + ":" + dedupKey));
  }

  @Override
  public CompletionStage<Boolean> confirm(Claim claim, long nowMillis, StoredResponse response) {
    if (response != null) {
      responses.put(claim.route() + ":" + claim.dedupKey(), new StoredResponse(response.body(), response.contentType(), nowMillis));
    }
    CompletionStage<Boolean> scripted = confirmAnswers.poll();
    CompletionStage<Boolean> answer = scripted != null ? scripted : CompletableFuture.completedFuture(true);
    return answer.thenApply(ok -> {
      if (ok) {
        confirmed.add(claim);
      }
      return ok;
    });
  }

  @Override
  public CompletionStage<Boolean> abort(Claim claim, boolean maySeen, long nowMillis) {
    return CompletableFuture.completedFuture(true);
  }

  @Override
  public CompletionStage<Boolean> renew(Claim claim, long leaseMillis) {
    return CompletableFuture.completedFuture(true);
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
  public CompletionStage<Void> recordDecision(Verdict verdict, Source source, long nowMillis) {
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
