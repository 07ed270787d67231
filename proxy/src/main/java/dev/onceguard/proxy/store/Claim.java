package dev.onceguard.proxy.store;

/**
 * An accepted claim: this process owns the (route, dedup key) ledger row and, on a route with a
 * machine, the entity's pending transition, until {@link #leaseUntilMillis()}. Whoever holds it
 * must confirm or abort it; if it does neither, the lease expires and another owner may take it
 * over. Immutable; a renewed lease is a new instance.
 *
 * @param machine machine name, or {@code null} on a route without one
 * @param fromState state before the transition ({@code null} for a creating event or no machine)
 * @param attempts how many times this ledger row has been claimed (1 for a fresh claim)
 * @param redelivery true if the claim was taken over from an earlier owner
 */
public record Claim(
    String route,
    String dedupKey,
    String businessKey,
    String fingerprint,
    String machine,
    String entityId,
    String event,
    String fromState,
    String toState,
    String owner,
    long leaseUntilMillis,
    int attempts,
    boolean redelivery,
    Source source) {

  public Claim withLeaseUntil(long until) {
    return new Claim(route, dedupKey, businessKey, fingerprint, machine, entityId, event, fromState, toState, owner, until, attempts, redelivery, source);
  }
}
