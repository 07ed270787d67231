package dev.onceguard.client;

/** How a claim taken with {@link GuardClient#submit} ends. */
public enum Completion {
  /** The effect is applied and durable: the sidecar confirms the claim. */
  OK,
  /**
   * The effect cannot be applied: the sidecar aborts the claim (the entity goes back to its
   * previous state, the ledger row is removed so the event can be submitted again after a fix).
   */
  REJECT
}
