package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.guard.Claim;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Source;
import dev.onceguard.proxy.guard.StateMachine;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Verdict;
import java.util.concurrent.CompletionStage;

/**
 * L2 (ledger) and L3 (entity state) in one store: the claim/confirm/abort protocol of DESIGN.md.
 * Every method is one transaction (or one statement) and non-blocking. Store failures complete
 * the stage with {@link dev.onceguard.proxy.guard.StoreUnavailableException}; verdicts are data.
 */
public interface GuardStore extends AutoCloseable {

  /**
   * What to claim.
   *
   * @param machine {@code null} for a route without a machine (L2 only)
   * @param event the machine's event, {@code null} without a machine
   * @param ownAttemptActive whether this process is still working on an earlier attempt of the
   *     same dedup key; if not, a live claim of this same source by this same owner is an
   *     abandoned attempt (revoked, cancelled) and is taken back at once instead of waiting
   */
  record ClaimCommand(
      String route,
      StateMachine machine,
      EventConfig event,
      ExtractedEvent extracted,
      Source source,
      String owner,
      long nowMillis,
      long leaseMillis,
      long earlyArrivalRetryMillis,
      boolean ownAttemptActive) {}

  /** Inserts the PENDING ledger row and applies the CAS, or classifies why not. */
  CompletionStage<ClaimResult> claim(ClaimCommand cmd);

  /** Marks the claim DONE and clears the entity's pending key. False if the claim was lost. */
  CompletionStage<Boolean> confirm(Claim claim, long nowMillis);

  /**
   * Undoes the claim: deletes the ledger row and restores the entity's previous state (only if it
   * is still pending on this key). False if the claim was lost.
   */
  CompletionStage<Boolean> abort(Claim claim, long nowMillis);

  /** Extends the lease; false if the claim is no longer this owner's (do not forward it). */
  CompletionStage<Boolean> renew(Claim claim, long leaseUntilMillis);

  /** Appends a non-accepted verdict to the decision log (best effort). */
  CompletionStage<Void> recordDecision(Verdict verdict, Source source, long nowMillis);

  /** Deletes decisions older than {@code beforeMillis}; returns how many. */
  CompletionStage<Long> purgeDecisions(long beforeMillis);

  /** Ledger rows, entity and recent decisions for a dedup key or an entity. */
  CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit);

  @Override
  void close();
}
