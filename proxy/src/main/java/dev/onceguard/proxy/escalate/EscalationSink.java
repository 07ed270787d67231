package dev.onceguard.proxy.escalate;

import dev.onceguard.v1.Verdict;
import java.util.concurrent.CompletionStage;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Where escalated records and published verdicts go ({@link Escalator} in production). Each stage
 * completes only once the write is acknowledged, exceptionally if it failed (the caller retries).
 * Thread-safe; never blocks the calling thread.
 */
public interface EscalationSink {

  /** Copies {@code source} to {@code topic} with the verdict's {@code onceguard-*} headers. */
  CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis);

  /**
   * As {@link #escalate(String, ConsumerRecord, Verdict, long)}, with the escalation's W3C
   * {@code traceparent} (the record's {@code onceguard.escalate} span) in place of the source's, so
   * that whoever handles the escalation continues the record's trace; {@code null} keeps the
   * source's headers as they are.
   */
  default CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis,
      String traceparent) {
    return escalate(topic, source, v, nowMillis);
  }

  /** Publishes a verdict on the verdict topic. */
  CompletionStage<Void> publishVerdict(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v);
}
