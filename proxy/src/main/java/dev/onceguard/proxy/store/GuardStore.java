package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Verdict;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * L2 (ledger) and L3 (entity state) in one store: the writes of the claim/confirm/abort protocol
 * and the reads that explain a refused claim. The store returns facts ({@link ClaimOutcome}, rows);
 * the guard decides what they mean.
 *
 * <p>Every method is one transaction (or one statement) and non-blocking. Leases and owner
 * liveness are judged by the database clock inside the statements, never by a caller's clock.
 * Failures complete the stage with {@link dev.onceguard.proxy.store.StoreUnavailableException}
 * (the store is down or broken: pause and retry) or
 * {@link dev.onceguard.proxy.store.ContentionException} (a lost race between transactions: retry
 * at once).
 */
public interface GuardStore extends AutoCloseable {

  /**
   * What to claim.
   *
   * @param machine machine name; {@code null} for a route without a machine (L2 only)
   * @param event the machine's event, {@code null} without a machine
   * @param nowMillis the caller's clock, for informational timestamps and the lease estimate only
   */
  record ClaimCommand(
      String route,
      String machine,
      EventConfig event,
      ExtractedEvent extracted,
      Source source,
      String owner,
      long nowMillis,
      long leaseMillis) {}

  /** Inserts the PENDING ledger row and applies the CAS, or reports which of the two refused. */
  CompletionStage<ClaimOutcome> claim(ClaimCommand cmd);

  /**
   * Takes {@code row} over for {@code cmd}: a PENDING row whose claim is not live (or, with
   * {@code force}, one of this owner's own abandoned attempts), fenced on its owner and attempt so
   * that one contender wins (the row is found by its own dedup key, which is not the command's when
   * it is an orphaned claim of the same record made under an earlier business key); or a REJECTED row, which is claimed again like a fresh record (the CAS
   * included). Answers {@link ClaimOutcome.Claimed}, {@link ClaimOutcome.CasLost} or
   * {@link ClaimOutcome.Retry} (the row changed meanwhile).
   */
  CompletionStage<ClaimOutcome> takeOver(ClaimCommand cmd, LedgerRow row, boolean force);

  /**
   * Undoes the entity's pending transition if it is an abandoned Guard API claim whose lease ended
   * more than {@code graceMillis} ago (database time); true if it was undone. The ledger row stays,
   * as REJECTED: the caller was handed the claim, so a later claim of the key is flagged as a
   * redelivery.
   */
  CompletionStage<Boolean> releaseAbandonedApiClaim(String machine, String entityId, String pendingKey, long graceMillis);

  /**
   * The PENDING ledger rows of {@code entityId} under {@code pendingKey} (any route), with their
   * liveness by the database's clock: who holds an entity whose pending claim's lease ended.
   */
  CompletionStage<List<LedgerRow>> pendingRows(String entityId, String pendingKey);

  /**
   * The DONE ledger rows of one entity and event on {@code routes} (the routes of the entity's
   * machine: the ledger has no machine column, and another machine's entity may have the same id
   * and an event of the same name), the ones with {@code fingerprint} first, at most {@code limit}.
   * Read only when a CAS was lost to an applied transition.
   */
  CompletionStage<List<LedgerRow>> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit);

  /** Marks the claim DONE and clears the entity's pending key. False if the claim was lost. */
  default CompletionStage<Boolean> confirm(Claim claim, long nowMillis) {
    return confirm(claim, nowMillis, null);
  }

  /**
   * As {@link #confirm(Claim, long)}, keeping {@code response} with the DONE row in the same
   * statement ({@code null}: none), for {@link #storedResponse} to return.
   */
  CompletionStage<Boolean> confirm(Claim claim, long nowMillis, StoredResponse response);

  /**
   * The response stored with the DONE row of (route, dedup key), with the row's confirm time;
   * {@code null} if the row is not DONE or keeps none. One primary-key read.
   */
  CompletionStage<StoredResponse> storedResponse(String route, String dedupKey);

  /**
   * Undoes the claim and restores the entity's previous state (only if it is still pending on
   * this key). If the business {@code maySeen} the record, the ledger row stays as REJECTED, so a
   * replay of it is claimed again flagged as a redelivery; otherwise the row is deleted. False if
   * the claim was lost.
   */
  CompletionStage<Boolean> abort(Claim claim, boolean maySeen, long nowMillis);

  /** Extends the lease to {@code leaseMillis} from the database's now; false if the claim is no longer this owner's. */
  CompletionStage<Boolean> renew(Claim claim, long leaseMillis);

  /** Records that {@code owner} is alive for {@code ttlMillis} more (database time). */
  CompletionStage<Void> heartbeat(String owner, long ttlMillis);

  /** Declares {@code owner} gone (graceful shutdown): its remaining claims may be taken over at once. */
  CompletionStage<Void> retire(String owner);

  /** Appends a non-accepted verdict to the decision log (best effort). */
  CompletionStage<Void> recordDecision(Verdict verdict, Source source, long nowMillis);

  /** Deletes decisions older than {@code beforeMillis}; returns how many. */
  CompletionStage<Long> purgeDecisions(long beforeMillis);

  /** Ledger rows, entity and recent decisions for a dedup key or an entity. */
  CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit);

  @Override
  void close();
}
