package dev.onceguard.proxy.guard;

import dev.onceguard.v1.Verdict;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Told about every final verdict on a consumed record (metrics, audit, the demo's printout).
 * Called on I/O threads: must be fast, must not block, must not throw.
 */
@FunctionalInterface
public interface VerdictListener {
  /** {@code forwarded} is true for an accepted record once the business confirmed it. */
  void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict verdict, boolean forwarded);

  VerdictListener NONE = (r, v, f) -> {};
}
