package dev.onceguard.proxy.pipeline;

import java.util.ArrayList;
import java.util.List;

/**
 * A one-way flag telling in-flight work to give up (partition revoked, sidecar stopping). Work
 * checks it between steps and before sleeping; listeners run once, on the cancelling thread.
 * Thread-safe.
 */
public final class Cancellation {
  private final List<Runnable> listeners = new ArrayList<>();
  private boolean cancelled;

  public synchronized boolean isCancelled() {
    return cancelled;
  }

  /** Cancels; returns false if it was already cancelled. */
  public boolean cancel() {
    List<Runnable> toRun;
    synchronized (this) {
      if (cancelled) {
        return false;
      }
      cancelled = true;
      toRun = new ArrayList<>(listeners);
      listeners.clear();
    }
    toRun.forEach(Runnable::run);
    return true;
  }

  /** Runs {@code r} on cancellation, or now if already cancelled. */
  public void onCancel(Runnable r) {
    synchronized (this) {
      if (!cancelled) {
        listeners.add(r);
        return;
      }
    }
    r.run();
  }

  /** Thrown (as the cause of an exceptional completion) when work stopped because of a cancel. */
  public static final class CancelledException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public CancelledException(String what) {
      super("cancelled: " + what, null, false, false);
    }
  }
}
