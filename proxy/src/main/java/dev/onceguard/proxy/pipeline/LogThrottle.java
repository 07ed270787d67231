package dev.onceguard.proxy.pipeline;

import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * Lets one event through per interval and counts the ones held back, so that a business outage
 * (hundreds of records retrying at once) produces one WARN line every few seconds, not one per
 * record. Thread-safe.
 */
final class LogThrottle {
  private final long intervalNanos;
  private final LongSupplier nanoTime;
  private long nextAt;
  private boolean started;
  private int suppressed;

  LogThrottle(Duration interval, LongSupplier nanoTime) {
    this.intervalNanos = interval.toNanos();
    this.nanoTime = nanoTime;
  }

  /**
   * @return -1 if this event should not be logged (it is counted), otherwise the number of events
   *     held back since the last one that was let through
   */
  synchronized int tryAcquire() {
    long now = nanoTime.getAsLong();
    if (started && now - nextAt < 0) {
      suppressed++;
      return -1;
    }
    started = true;
    nextAt = now + intervalNanos;
    int n = suppressed;
    suppressed = 0;
    return n;
  }
}
