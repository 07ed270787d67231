package dev.onceguard.client;

/**
 * Thrown by handler code to say "this record can never be applied". A
 * {@link MessageHandlerAdapter} answers REJECT: the sidecar aborts the claim (the entity goes
 * back to its previous state) and escalates the record as {@code BUSINESS_REJECTED} with this
 * message in its headers. Do not put payload or secrets in the message.
 */
public class RejectException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param message why the record cannot be applied; ends up in escalation headers
   */
  public RejectException(String message) {
    super(message);
  }

  /**
   * Creates the exception.
   *
   * @param message why the record cannot be applied; ends up in escalation headers
   * @param cause the underlying failure
   */
  public RejectException(String message, Throwable cause) {
    super(message, cause);
  }
}
