package dev.onceguard.proxy.guard;

import dev.onceguard.v1.Verdict;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Told about every final verdict on a consumed record (metrics, audit, the demo's printout), and,
 * if it cares, how long each step of the way took. Called on I/O threads: must be fast, must not
 * block, must not throw.
 */
@FunctionalInterface
public interface VerdictListener {
  /** {@code forwarded} is true for an accepted record once the business confirmed it. */
  void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict verdict, boolean forwarded);

  /** The steps of a guarded record whose durations {@link #onStep} reports. */
  enum Step {
    /** L1 lookup and the claim in the store (its wait for a claim group included), per attempt. */
    CLAIM,
    /** One call to the business, from sending it to its answer. */
    HANDLE,
    /** The confirm in the store (its wait for a confirm group included), once it was taken. */
    CONFIRM
  }

  /**
   * One step of a record on {@code route} took {@code nanos}: the parts of a record's age that the
   * sidecar spends (the rest is the time before it was consumed and the waits between steps). Only
   * steps that got an answer are reported; a store failure that is retried is not. Ignored unless
   * overridden.
   */
  default void onStep(String route, Step step, long nanos) {}

  VerdictListener NONE = (r, v, f) -> {};
}
