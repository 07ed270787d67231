package dev.onceguard.client;

import io.grpc.StatusRuntimeException;

/**
 * The sidecar could not be reached, or one of its stores (MySQL) is down
 * ({@code UNAVAILABLE}): retry later with the same request.
 */
public final class SidecarUnavailableException extends OnceGuardException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param cause the {@code UNAVAILABLE} status exception
   */
  public SidecarUnavailableException(StatusRuntimeException cause) {
    super(cause);
  }
}
