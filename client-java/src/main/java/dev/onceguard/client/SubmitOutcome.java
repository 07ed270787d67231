package dev.onceguard.client;

/**
 * What the caller of {@link GuardClient#submit} does next. Mirrors
 * {@code onceguard.v1.SubmitResponse.Outcome}; derived from the verdict when the sidecar predates it.
 */
public enum SubmitOutcome {
  /** A sidecar newer than this client answered with an outcome it does not know: read the verdict. */
  UNSPECIFIED,
  /** Accepted: the caller holds the claim; do the work, then {@link GuardClient#complete}. */
  PROCEED,
  /** Done before with the same content: answer as the first time, with the stored response if any. */
  DUPLICATE,
  /** Another caller (or a Kafka record) holds the same key now: submit again after {@link SubmitResult#retryAfter()}. */
  IN_PROGRESS,
  /** The same key with different content: terminal; the verdict names the differing fields. */
  CONFLICT,
  /** Any other escalation (illegal transition, missing field, unreadable value): terminal. */
  ESCALATED
}
