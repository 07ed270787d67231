package dev.onceguard.proxy.store;

/**
 * A store the guard cannot do without (MySQL) failed or timed out. Transient by nature: the
 * caller pauses and retries; it never turns into a verdict.
 */
public final class StoreUnavailableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public StoreUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
