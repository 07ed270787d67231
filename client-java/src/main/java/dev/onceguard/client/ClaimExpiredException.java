package dev.onceguard.client;

import io.grpc.StatusRuntimeException;

/**
 * {@code Complete} was called for a claim the sidecar no longer holds ({@code NOT_FOUND}): its
 * lease expired, so the claim may have been taken over by a redelivery. Whether the effect
 * counts is decided by that new owner; do not assume this completion was applied.
 */
public final class ClaimExpiredException extends OnceGuardException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param cause the {@code NOT_FOUND} status exception
   */
  public ClaimExpiredException(StatusRuntimeException cause) {
    super(cause);
  }
}
