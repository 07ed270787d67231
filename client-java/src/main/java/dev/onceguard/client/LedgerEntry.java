package dev.onceguard.client;

import java.time.Instant;

/**
 * One ledger row, as {@link GuardClient} explains it.
 *
 * @param route route
 * @param dedupKey lower-case hex dedup key
 * @param businessKey readable business key
 * @param fingerprint content fingerprint, to tell replays from key collisions
 * @param entityId entity id; empty without a machine
 * @param event event name
 * @param fromState state before the transition
 * @param toState state after the transition
 * @param status {@code PENDING} or {@code DONE}
 * @param owner id of the process holding a pending claim
 * @param leaseUntil when a pending claim expires; {@code null} if none
 * @param attempts delivery attempts so far
 * @param sourceTopic topic of the source record
 * @param sourcePartition partition of the source record
 * @param sourceOffset offset of the source record
 * @param createdAt when the row was written; {@code null} if unknown
 * @param completedAt when it was confirmed; {@code null} while pending
 */
public record LedgerEntry(
    String route,
    String dedupKey,
    String businessKey,
    String fingerprint,
    String entityId,
    String event,
    String fromState,
    String toState,
    String status,
    String owner,
    Instant leaseUntil,
    int attempts,
    String sourceTopic,
    int sourcePartition,
    long sourceOffset,
    Instant createdAt,
    Instant completedAt) {}
