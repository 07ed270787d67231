package dev.onceguard.proxy.dispatch;

import java.time.Duration;

/**
 * What one attempt to hand a delivery to the business produced.
 *
 * @param retryAfter minimum wait the business asked for before the next attempt (zero: none)
 */
public record DispatchResult(Kind kind, String message, Duration retryAfter) {
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

  public static DispatchResult retry(String message) {
    return new DispatchResult(Kind.RETRY, message, Duration.ZERO);
  }

  /** A retry after at least {@code retryAfter}, as the business asked (zero: the caller's backoff). */
  public static DispatchResult retry(String message, Duration retryAfter) {
    return new DispatchResult(Kind.RETRY, message, retryAfter);
  }

  public static DispatchResult reject(String message) {
    return new DispatchResult(Kind.REJECT, message, Duration.ZERO);
  }
}
