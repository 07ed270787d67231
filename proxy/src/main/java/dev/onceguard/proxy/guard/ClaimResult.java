package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.store.Claim;
import dev.onceguard.v1.Verdict;

/** The outcome of one claim attempt. */
public sealed interface ClaimResult {

  /** The record is this process's to forward; confirm or abort the claim afterwards. */
  record Accepted(Claim claim, Verdict verdict) implements ClaimResult {}

  /** Final: a duplicate to ignore, or a record to escalate. Nothing was written. */
  record Rejected(Verdict verdict) implements ClaimResult {}

  /**
   * Not decidable yet: try again at {@code retryAtMillis}.
   *
   * @param kind why
   * @param ifTimedOut the verdict to give if waiting runs out (e.g. OUT_OF_ORDER)
   */
  record Wait(Kind kind, long retryAtMillis, Verdict ifTimedOut) implements ClaimResult {
    public enum Kind {
      /** The entity has not reached a from-state yet, or does not exist yet. */
      EARLY_ARRIVAL,
      /** Another transition of the entity is between claim and confirm. */
      ENTITY_BUSY,
      /**
       * The same dedup key is claimed by another attempt in this process (another source record or
       * Guard API request): it finishes or gives it up. Other processes answer the same case
       * DUPLICATE_IGNORE/IN_FLIGHT; the pipeline waits like for a busy entity.
       */
      KEY_HELD,
      /**
       * This same source record is claimed by an earlier owner whose lease is still live (Kafka
       * redelivered it after a crash or rebalance): never a duplicate; take over at lease expiry.
       */
      OWN_LEASE_LIVE
    }
  }
}
