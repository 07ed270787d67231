package dev.onceguard.proxy.store;

/**
 * What one claim step found in the store: facts, not verdicts. The guard classifies them
 * ({@code dev.onceguard.proxy.guard.ClaimPolicy}) and decides what to do next.
 */
public sealed interface ClaimOutcome {

  /**
   * The ledger row is this claim's and, on a route with a machine, the entity's CAS applied.
   *
   * @param fromState the entity's state before the transition ({@code null} for a creating event or
   *     no machine)
   * @param leaseUntilMillis the lease's end by the caller's clock (an estimate: the store keeps the
   *     authoritative end in database time, and the estimate is never later than it when clocks agree)
   * @param attempts how many times the ledger row has been claimed, this claim included
   * @param takenOver the row was claimed before (an expired or abandoned claim, or a rejected record)
   * @param dedupKey the claimed row's dedup key when it is not the command's (an orphaned claim of
   *     the same record made under an earlier business key); {@code null}: the command's
   */
  record Claimed(String fromState, long leaseUntilMillis, int attempts, boolean takenOver, String dedupKey) implements ClaimOutcome {
    /** A claim of the command's own dedup key. */
    public Claimed(String fromState, long leaseUntilMillis, int attempts, boolean takenOver) {
      this(fromState, leaseUntilMillis, attempts, takenOver, null);
    }
  }

  /** The (route, dedup key) row exists already; nothing was written. */
  record LedgerConflict(LedgerRow row) implements ClaimOutcome {}

  /**
   * The ledger row was free (or reclaimable) but the entity's CAS did not apply; nothing of the
   * claim was kept (its transaction rolled back, or in a group its ledger row deleted again before
   * the COMMIT). Both rows are read right after, in one statement (one consistent read).
   *
   * @param entity the entity, {@code null} if it has no row
   * @param keyRow the ledger row of the claim's own (route, dedup key), {@code null} if none: a row
   *     here was written by another record after this claim's was rolled back (a same-key copy on
   *     another partition that won the entity first), and it decides as a refused INSERT would
   */
  record CasLost(EntityRow entity, LedgerRow keyRow) implements ClaimOutcome {
    /** A lost CAS with no ledger row under the claim's key. */
    public CasLost(EntityRow entity) {
      this(entity, null);
    }
  }

  /** The facts went stale before they could be read (a row vanished, a takeover lost): claim again. */
  record Retry(String why) implements ClaimOutcome {}
}
