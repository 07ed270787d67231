package dev.onceguard.client;

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

  @Override
  public String toString() {
    return "SubmitResult{verdict=" + verdict + ", claimed=" + (claimToken != null) + ", leaseUntil=" + leaseUntil
        + ", fromState=" + fromState + ", toState=" + toState + ", redelivery=" + redelivery + "}";
  }
}
