package dev.onceguard.client;

import java.util.List;

/**
 * The decision on one record or submission, as the sidecar took it.
 *
 * @param disposition what upstream should do
 * @param layer which layer decided
 * @param reason why
 * @param currentState the entity's state when the verdict was taken; empty if unknown or no
 *     state machine
 * @param currentVersion applied transitions of the entity when the verdict was taken; 0 if none
 * @param expectedFromStates states the event may be applied from, as configured
 * @param dedupKey lower-case hex SHA-256 of the canonical business key; empty if extraction
 *     failed
 * @param detail human-readable explanation, safe to log (no payload)
 * @param route route that decided
 * @param entityId entity id, if extracted
 * @param event event name, if extracted
 */
public record Verdict(
    Disposition disposition,
    Layer layer,
    Reason reason,
    String currentState,
    long currentVersion,
    List<String> expectedFromStates,
    String dedupKey,
    String detail,
    String route,
    String entityId,
    String event) {

  /**
   * Creates a verdict; copies {@code expectedFromStates}, so the record is immutable.
   *
   * @param disposition what upstream should do
   * @param layer which layer decided
   * @param reason why
   * @param currentState the entity's state when the verdict was taken
   * @param currentVersion applied transitions of the entity when the verdict was taken
   * @param expectedFromStates states the event may be applied from
   * @param dedupKey lower-case hex dedup key
   * @param detail human-readable explanation
   * @param route route that decided
   * @param entityId entity id
   * @param event event name
   */
  public Verdict {
    expectedFromStates = List.copyOf(expectedFromStates);
  }

  /** {@return whether the record was accepted (forwarded, or claimed for {@code Complete})} */
  public boolean isAccepted() {
    return disposition == Disposition.ACCEPTED;
  }

  /** What upstream should do with the record. Mirrors {@code onceguard.v1.Disposition}. */
  public enum Disposition {
    /** Absent, or a value this client version does not know. */
    UNSPECIFIED,
    /** Passed every layer; forwarded to the business (one owner at a time). */
    ACCEPTED,
    /** A replay of something already applied or in flight: safe to ignore. */
    DUPLICATE_IGNORE,
    /** Cannot be applied: needs a human or an upstream fix; on the escalation topic. */
    ILLEGAL_TRANSITION_ESCALATE
  }

  /** Which layer decided. Mirrors {@code onceguard.v1.Layer}. */
  public enum Layer {
    /** Absent, or a value this client version does not know. */
    UNSPECIFIED,
    /** Field extraction, before any store was asked (bad input). */
    EXTRACT,
    /** L1: Redis idempotency cache. */
    CACHE,
    /** L2: MySQL ledger. */
    LEDGER,
    /** L3: MySQL state machine. */
    STATE_MACHINE,
    /** The business container (REJECT). */
    BUSINESS,
    /** An operator through the admin command line (decision log entries only). */
    OPERATOR
  }

  /** Why. Mirrors {@code onceguard.v1.Reason}. */
  public enum Reason {
    /** Absent, or a value this client version does not know. */
    UNSPECIFIED,
    /** Accepted; no rejection reason. */
    NONE,
    /** L1 hit: the dedup key was confirmed before. */
    CACHE_HIT,
    /** L2 hit: a confirmed ledger row with the same fingerprint exists. */
    LEDGER_HIT,
    /** L2: another source record holds a live claim on the same dedup key. */
    IN_FLIGHT,
    /** L3: the entity is already in (or past) the target state. */
    ALREADY_APPLIED,
    /** L3: the entity did not reach the from-state within the early-arrival timeout. */
    OUT_OF_ORDER,
    /** L3: the event is not allowed from the entity's current state. */
    ILLEGAL_TRANSITION,
    /** L2: same dedup key, different fingerprint: the business key is under-specified. */
    KEY_COLLISION,
    /** Extract: a configured key field is missing. */
    MISSING_FIELD,
    /** Extract: the value cannot be parsed. */
    MALFORMED,
    /** Extract: the event is not one of the machine's events. */
    UNKNOWN_EVENT,
    /** The business answered REJECT (or retries were exhausted). */
    BUSINESS_REJECTED,
    /**
     * L3: the transition was applied already by a record with different content: a distinct
     * fact the entity model cannot hold (escalated, never ignored).
     */
    CONFLICTING_FACT,
    /** Operator: {@code onceguard reset-entity} set the entity's state (decision log entries only). */
    OPERATOR_RESET
  }
}
