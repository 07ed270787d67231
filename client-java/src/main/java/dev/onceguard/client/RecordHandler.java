package dev.onceguard.client;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Business code that applies one accepted record, for {@link MessageHandlerAdapter}.
 *
 * <p>Return normally only when the effect is durable: the sidecar then confirms the record and
 * never delivers it again (except after a sidecar crash, flagged
 * {@link DeliveryInfo#redelivery()}). Throw to fail; see {@link MessageHandlerAdapter} for how
 * exceptions map to RETRY and REJECT.
 *
 * <p>Called concurrently from gRPC server threads, so implementations must be thread-safe. For
 * one entity the sidecar sends one record at a time, in machine order.
 *
 * @param <K> record key type
 * @param <V> record value type
 */
@FunctionalInterface
public interface RecordHandler<K, V> {
  /**
   * Applies one record.
   *
   * @param record the record as a Kafka consumer would have returned it, plus
   *     the delivery headers of {@link dev.onceguard.wire.Headers}
   * @param info what the sidecar knows about the record (entity, transition, dedup key)
   * @throws Exception to fail the delivery; mapped to RETRY or REJECT
   */
  void handle(ConsumerRecord<K, V> record, DeliveryInfo info) throws Exception;
}
