package dev.onceguard.proxy.store;

/**
 * Two transactions collided in the store (MySQL 1213 deadlock, 1205 lock-wait timeout, a Galera
 * certification conflict reported as 1213 at COMMIT) and the store's own immediate retries did not
 * get through. Not an outage: nothing is down, the work lost a race. The pipeline retries the step
 * at once with jitter and never pauses a partition for it; the Guard API answers {@code ABORTED}
 * (retry the call), never {@code UNAVAILABLE}.
 */
public final class ContentionException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public ContentionException(String message, Throwable cause) {
    super(message, cause);
  }
}
