package dev.onceguard.proxy.dispatch;

import java.time.Duration;

/**
 * What one attempt to hand a delivery to the business produced.
 *
 * @param retryAfter minimum wait the business asked for before the next attempt (zero: none)
 * @param maybeDelivered for RETRY: whether the business may have received (and even applied) this
 *     attempt — true after a deadline, a broken connection or any transport failure, false only
 *     when the business itself answered RETRY. A later attempt after an ambiguous one is flagged
 *     {@code redelivery}.
 * @param businessDown for RETRY: the business could not be reached at all (no connection: nothing
 *     listens, the pod restarts). Such attempts do not count towards {@code retry.max-attempts}:
 *     a business that is down pauses its records like a store outage does, instead of turning
 *     each of them into a BUSINESS_REJECTED escalation.
 */
public record DispatchResult(Kind kind, String message, Duration retryAfter, boolean maybeDelivered, boolean businessDown) {

  /** An answer the business gave itself (not ambiguous). */
  public DispatchResult(Kind kind, String message, Duration retryAfter) {
    this(kind, message, retryAfter, kind != Kind.RETRY, false);
  }
  public enum Kind {
    /** Applied: confirm. */
    OK,
    /** Transient: try again later (business RETRY, UNAVAILABLE, DEADLINE_EXCEEDED, …). */
    RETRY,
    /** Permanent: abort and escalate as BUSINESS_REJECTED. */
    REJECT
  }

  public static DispatchResult ok() {
    return new DispatchResult(Kind.OK, "", Duration.ZERO);
  }

  /** A transport-level retry: the business may have seen the attempt. */
  public static DispatchResult retry(String message) {
    return new DispatchResult(Kind.RETRY, message, Duration.ZERO, true, false);
  }

  /** The business could not be reached: retried without bound; it cannot have seen the attempt. */
  public static DispatchResult businessDown(String message) {
    return new DispatchResult(Kind.RETRY, message, Duration.ZERO, false, true);
  }

  /**
   * The business answered RETRY: try again after at least {@code retryAfter} (zero: the caller's
   * backoff). Not ambiguous: the business says it did not apply the record.
   */
  public static DispatchResult retry(String message, Duration retryAfter) {
    return new DispatchResult(Kind.RETRY, message, retryAfter, false, false);
  }

  public static DispatchResult reject(String message) {
    return new DispatchResult(Kind.REJECT, message, Duration.ZERO);
  }
}
