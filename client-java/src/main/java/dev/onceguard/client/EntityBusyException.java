package dev.onceguard.client;

import io.grpc.StatusRuntimeException;

/**
 * The entity has another transition in flight ({@code ABORTED}): submit again later. Not a
 * verdict; nothing was claimed.
 */
public final class EntityBusyException extends OnceGuardException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param cause the {@code ABORTED} status exception
   */
  public EntityBusyException(StatusRuntimeException cause) {
    super(cause);
  }
}
