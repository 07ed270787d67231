package dev.onceguard.client;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * What {@link GuardClient#submit} returns: the verdict, and for an accepted event the claim to
 * {@linkplain GuardClient#complete complete}. Immutable.
 */
public final class SubmitResult {
  private final Verdict verdict;
  private final String claimToken;
  private final Instant leaseUntil;
  private final String fromState;
  private final String toState;
  private final boolean redelivery;
  private final SubmitOutcome outcome;
  private final Duration retryAfter;
  private final StoredResponse storedResponse;
  private final Instant originalAt;

  /**
   * Creates a result.
   *
   * @param verdict the verdict
   * @param claimToken the claim token, or {@code null} unless accepted
   * @param leaseUntil lease expiry, or {@code null} unless accepted
   * @param fromState state before the transition; empty for a creating event or no machine
   * @param toState state after the transition; empty without a machine
   * @param redelivery whether this claim was taken over from an earlier attempt
   */
  public SubmitResult(
      Verdict verdict, String claimToken, Instant leaseUntil, String fromState, String toState, boolean redelivery) {
    this(verdict, claimToken, leaseUntil, fromState, toState, redelivery,
        verdict.isAccepted() ? SubmitOutcome.PROCEED : SubmitOutcome.UNSPECIFIED, Duration.ZERO, null, null);
  }

  /**
   * Creates a result.
   *
   * @param verdict the verdict
   * @param claimToken the claim token, or {@code null} unless accepted
   * @param leaseUntil lease expiry, or {@code null} unless accepted
   * @param fromState state before the transition; empty for a creating event or no machine
   * @param toState state after the transition; empty without a machine
   * @param redelivery whether this claim was taken over from an earlier attempt
   * @param outcome what the caller does next
   * @param retryAfter with {@link SubmitOutcome#IN_PROGRESS}: the wait before submitting again; else zero
   * @param storedResponse with {@link SubmitOutcome#DUPLICATE}: the original's stored response, or {@code null}
   * @param originalAt when the original was confirmed (claimed, while in progress), or {@code null}
   */
  public SubmitResult(Verdict verdict, String claimToken, Instant leaseUntil, String fromState, String toState, boolean redelivery,
      SubmitOutcome outcome, Duration retryAfter, StoredResponse storedResponse, Instant originalAt) {
    this.outcome = outcome;
    this.retryAfter = retryAfter;
    this.storedResponse = storedResponse;
    this.originalAt = originalAt;
    this.verdict = verdict;
    this.claimToken = claimToken;
    this.leaseUntil = leaseUntil;
    this.fromState = fromState;
    this.toState = toState;
    this.redelivery = redelivery;
  }

  /** {@return the verdict} */
  public Verdict verdict() {
    return verdict;
  }

  /** {@return whether the event was accepted and claimed} */
  public boolean isAccepted() {
    return verdict.isAccepted();
  }

  /** {@return the claim token to pass to {@link GuardClient#complete}, present when accepted} */
  public Optional<String> claimToken() {
    return Optional.ofNullable(claimToken);
  }

  /** {@return when the claim expires unless completed, present when accepted} */
  public Optional<Instant> leaseUntil() {
    return Optional.ofNullable(leaseUntil);
  }

  /** {@return state before the transition; empty for a creating event or a route without a machine} */
  public String fromState() {
    return fromState;
  }

  /** {@return state once the claim is completed OK; empty without a machine} */
  public String toState() {
    return toState;
  }

  /**
   * {@return true when this claim was taken over from an earlier attempt of the same request id}
   * That attempt's effect may or may not have been applied.
   */
  public boolean redelivery() {
    return redelivery;
  }

  /** {@return what the caller does next: proceed, answer as the first time, retry later, or give up} */
  public SubmitOutcome outcome() {
    return outcome;
  }

  /** {@return with {@link SubmitOutcome#IN_PROGRESS}, how long to wait before submitting the same request again; else zero} */
  public Duration retryAfter() {
    return retryAfter;
  }

  /**
   * {@return with {@link SubmitOutcome#DUPLICATE}, the response the original's
   * {@linkplain GuardClient#complete(String, StoredResponse) completion} stored; empty if it stored none}
   */
  public Optional<StoredResponse> storedResponse() {
    return Optional.ofNullable(storedResponse);
  }

  /** {@return with a duplicate or an event in progress, when the original was confirmed (or claimed); empty if not known} */
  public Optional<Instant> originalAt() {
    return Optional.ofNullable(originalAt);
  }

  @Override
  public String toString() {
    return "SubmitResult{verdict=" + verdict + ", outcome=" + outcome + ", claimed=" + (claimToken != null) + ", leaseUntil=" + leaseUntil
        + ", fromState=" + fromState + ", toState=" + toState + ", redelivery=" + redelivery + ", retryAfter=" + retryAfter
        + ", storedResponse=" + storedResponse + ", originalAt=" + originalAt + "}";
  }
}
