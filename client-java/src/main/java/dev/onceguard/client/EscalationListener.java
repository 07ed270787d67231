package dev.onceguard.client;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Told about each record of the consumer's route that the sidecar escalated (illegal transition,
 * out of order, conflicting fact, business rejection, unreadable input...), so that a team sees
 * "ILLEGAL_TRANSITION on order o-17" in its own logs without consuming the escalation topic.
 *
 * <p>Set it with {@link OnceGuardConsumer#setEscalationListener} (or the
 * {@value OnceGuardConsumerConfig#ESCALATION_LISTENER_CONFIG} key) before {@code subscribe}; the
 * consumer then asks the sidecar for escalation notices on its stream. Called on the consumer
 * thread, inside {@code poll}, after the escalation topic acknowledged the record. Best effort
 * and informational: with several consumers on one route each notice goes to one of them; a
 * notice sent while no consumer was connected is not kept; nothing is acknowledged; an
 * exception thrown here is logged and ignored. The escalation topic remains the durable record.
 */
@FunctionalInterface
public interface EscalationListener {
  /**
   * One escalated record.
   *
   * @param record the record as consumed (raw key, value and headers; topic, partition, offset)
   * @param verdict why it was escalated: reason, layer, detail, entity, event, current state
   */
  void onEscalation(ConsumerRecord<byte[], byte[]> record, Verdict verdict);
}
