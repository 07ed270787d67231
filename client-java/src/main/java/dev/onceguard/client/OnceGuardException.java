package dev.onceguard.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * A call to the sidecar failed with a gRPC status. Verdicts (duplicate, illegal transition) are
 * never exceptions: they are data in the response. This type carries transient or caller
 * trouble, read back from the status as {@code Status.fromThrowable} would.
 *
 * <p>Subclasses name the statuses a caller usually handles separately:
 * {@link EntityBusyException} ({@code ABORTED}), {@link SidecarUnavailableException}
 * ({@code UNAVAILABLE}), {@link SidecarBusyException} ({@code RESOURCE_EXHAUSTED}, with the
 * sidecar's retry-after) and {@link ClaimExpiredException} ({@code NOT_FOUND} from
 * {@code Complete}). Every other status is a plain {@code OnceGuardException};
 * {@link #isRetriable()} tells whether the same call may succeed later.
 */
public class OnceGuardException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The status code of the failed call. */
  private final Status.Code code;
  /** The status description, or {@code null}. */
  private final String description;

  /**
   * Creates an exception for a failed call.
   *
   * @param cause the status exception the call failed with
   */
  public OnceGuardException(StatusRuntimeException cause) {
    super(message(cause.getStatus()), cause);
    this.code = cause.getStatus().getCode();
    this.description = cause.getStatus().getDescription();
  }

  /** {@return the gRPC status code the sidecar answered with} */
  public Status.Code code() {
    return code;
  }

  /** {@return the status description the sidecar sent, or {@code null} if it sent none} */
  public String description() {
    return description;
  }

  /**
   * Whether repeating the same call later may succeed.
   *
   * @return true for {@code ABORTED},
   *     {@code UNAVAILABLE}, {@code DEADLINE_EXCEEDED} and {@code RESOURCE_EXHAUSTED}. A
   *     {@link MessageHandlerAdapter} answers RETRY for a retriable exception that escapes the
   *     handler.
   */
  public boolean isRetriable() {
    switch (code) {
      case ABORTED:
      case UNAVAILABLE:
      case DEADLINE_EXCEEDED:
      case RESOURCE_EXHAUSTED:
        return true;
      default:
        return false;
    }
  }

  private static String message(Status status) {
    return status.getDescription() == null
        ? status.getCode().name()
        : status.getCode() + ": " + status.getDescription();
  }
}
