package dev.onceguard.client.internal;

import java.util.ConcurrentModificationException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Detects use of a single-threaded object from two threads at once, the way
 * {@code KafkaConsumer} does: not a lock (it never blocks), but a fail-fast check that throws
 * {@link ConcurrentModificationException}. Re-entrant for the owning thread, so a rebalance
 * listener or commit callback may call back into the consumer.
 */
public final class SingleThreadAccess {
  private static final long NO_THREAD = -1L;

  private final String what;
  private final AtomicLong owner = new AtomicLong(NO_THREAD);
  private int depth; // touched by the owning thread only

  /**
   * Creates a guard.
   *
   * @param what name of the guarded object, for the exception message
   */
  public SingleThreadAccess(String what) {
    this.what = what;
  }

  /** Marks the current thread as the user; throws if another thread is inside. */
  @SuppressWarnings("deprecation") // Thread.getId(): threadId() needs Java 19
  public void acquire() {
    long id = Thread.currentThread().getId();
    if (id != owner.get() && !owner.compareAndSet(NO_THREAD, id)) {
      throw new ConcurrentModificationException(what + " is not safe for multi-threaded access");
    }
    depth++;
  }

  /** Ends the current thread's use started by {@link #acquire()}. */
  public void release() {
    if (--depth == 0) {
      owner.set(NO_THREAD);
    }
  }
}
