package dev.onceguard.proxy.pipeline;

import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Issues {@code Delivery.delivery_id}s: a random prefix chosen once per sidecar run plus a
 * counter, so ids never repeat within a run and are unlikely to repeat across runs. Every attempt
 * gets its own id (a pull-mode acknowledgement then names exactly one attempt). Thread-safe.
 */
public final class DeliveryIds {
  private final String prefix;
  private final AtomicLong next = new AtomicLong();

  public DeliveryIds(String prefix) {
    this.prefix = prefix;
  }

  /** A fresh random prefix (12 hex digits). */
  public static DeliveryIds random() {
    return new DeliveryIds(UUID.randomUUID().toString().replace("-", "").substring(0, 12));
  }

  public String next() {
    return prefix + "-" + next.incrementAndGet();
  }
}
