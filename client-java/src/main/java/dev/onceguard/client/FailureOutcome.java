package dev.onceguard.client;

/** What the sidecar is told when record handling fails. */
public enum FailureOutcome {
  /**
   * Transient: the sidecar delivers the record again later (attempt + 1), up to its retry
   * bound, then escalates it as {@code BUSINESS_REJECTED}.
   */
  RETRY,
  /**
   * Permanent: the sidecar aborts the claim (the entity goes back to its previous state) and
   * escalates the record as {@code BUSINESS_REJECTED} at once.
   */
  REJECT
}
