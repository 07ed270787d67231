package dev.onceguard.proxy.api;

import dev.onceguard.proxy.guard.Claim;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Source;
import dev.onceguard.proxy.guard.Verdicts;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link GuardStore} for routes without a machine: every claim is accepted for the command's
 * lease, every confirm and abort succeeds, unless the test queued another answer. Records the
 * claim commands and the confirmed claims. Thread-safe.
 */
final class FakeGuardStore implements GuardStore {
  final List<ClaimCommand> claims = new CopyOnWriteArrayList<>();
  final List<Claim> confirmed = new CopyOnWriteArrayList<>();
  /** Answers for the next claims, in order; then claims are accepted. */
  final Queue<CompletionStage<ClaimResult>> claimAnswers = new ConcurrentLinkedQueue<>();
  /** Answers for the next confirms, in order; then confirms succeed. */
  final Queue<CompletionStage<Boolean>> confirmAnswers = new ConcurrentLinkedQueue<>();

  @Override
  public CompletionStage<ClaimResult> claim(ClaimCommand cmd) {
    claims.add(cmd);
    CompletionStage<ClaimResult> scripted = claimAnswers.poll();
    if (scripted != null) {
      return scripted;
    }
    var e = cmd.extracted();
    Claim c = new Claim(cmd.route(), e.dedupKey(), e.businessKey(), e.fingerprint(), null, null, null, null, null, cmd.owner(),
        cmd.nowMillis() + cmd.leaseMillis(), 1, false, cmd.source());
    Verdict v = Verdicts.of(Verdicts.base(cmd.route(), e), Disposition.ACCEPTED, Layer.LEDGER, Reason.NONE, "claimed");
    return CompletableFuture.completedFuture(new ClaimResult.Accepted(c, v));
  }

  @Override
  public CompletionStage<Boolean> confirm(Claim claim, long nowMillis) {
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
  public CompletionStage<Boolean> abort(Claim claim, long nowMillis) {
    return CompletableFuture.completedFuture(true);
  }

  @Override
  public CompletionStage<Boolean> renew(Claim claim, long leaseUntilMillis) {
    return CompletableFuture.completedFuture(true);
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
