package dev.onceguard.client;

import java.time.Instant;

/**
 * The state of one entity of a state machine, as {@link GuardClient} explains it.
 *
 * @param machine state machine name
 * @param entityId entity id
 * @param state current state
 * @param version applied transitions
 * @param pendingKey dedup key of the transition in flight; empty if none
 * @param pendingUntil when the transition in flight expires; {@code null} if none
 * @param updatedAt last change; {@code null} if unknown
 */
public record EntityState(
    String machine,
    String entityId,
    String state,
    long version,
    String pendingKey,
    Instant pendingUntil,
    Instant updatedAt) {}
