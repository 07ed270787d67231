package dev.onceguard.client;

import java.time.Duration;

/**
 * Thrown by handler code to say "transient trouble, deliver this record again later". A
 * {@link MessageHandlerAdapter} answers RETRY; the sidecar calls again with the same delivery
 * (attempt + 1), up to its retry bound, after which the record is escalated as
 * {@code BUSINESS_REJECTED}.
 */
public class RetryableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Minimum wait before the next attempt; zero lets the sidecar choose. */
  private final Duration retryAfter;

  /**
   * Asks for a retry after a delay the sidecar chooses.
   *
   * @param message why, copied into the RETRY result (no payload)
   */
  public RetryableException(String message) {
    this(message, null, Duration.ZERO);
  }

  /**
   * Asks for a retry after a delay the sidecar chooses.
   *
   * @param message why, copied into the RETRY result (no payload)
   * @param cause the underlying failure
   */
  public RetryableException(String message, Throwable cause) {
    this(message, cause, Duration.ZERO);
  }

  /**
   * Asks for a retry no sooner than {@code retryAfter}.
   *
   * @param message why, copied into the RETRY result (no payload)
   * @param cause the underlying failure, or {@code null}
   * @param retryAfter minimum wait before the next attempt; zero lets the sidecar choose
   */
  public RetryableException(String message, Throwable cause, Duration retryAfter) {
    super(message, cause);
    if (retryAfter == null || retryAfter.isNegative()) {
      throw new IllegalArgumentException("retryAfter must be zero or positive: " + retryAfter);
    }
    this.retryAfter = retryAfter;
  }

  /** {@return minimum wait before the next attempt; zero lets the sidecar choose} */
  public Duration retryAfter() {
    return retryAfter;
  }
}
