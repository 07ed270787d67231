package dev.onceguard.client;

import java.time.Instant;

/**
 * One logged decision, as {@link GuardClient} explains it.
 *
 * @param at when it was taken; {@code null} if unknown
 * @param verdict the verdict
 * @param sourceTopic topic of the source record; empty for a submission
 * @param sourcePartition partition of the source record
 * @param sourceOffset offset of the source record
 */
public record Decision(Instant at, Verdict verdict, String sourceTopic, int sourcePartition, long sourceOffset) {}
