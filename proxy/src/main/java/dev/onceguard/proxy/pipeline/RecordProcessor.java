package dev.onceguard.proxy.pipeline;

import java.util.concurrent.CompletionStage;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Carries one consumed record to its end: forwarded and confirmed, ignored as a duplicate, or
 * escalated. The Kafka pipeline owns polling, ordering, offsets and commits; the processor owns
 * the decision (the guard) and the call to the business. One instance per route.
 *
 * <p>Threading: {@link #orderingKey} is called on the route's poll thread and must be cheap and
 * never block. {@link #process} may be called concurrently for records of different ordering
 * keys; for one ordering key within one partition the pipeline calls it in offset order, the next
 * only after the previous stage completed or parked itself through its {@link OrderSlot} (then
 * several records of the key may be in process at once, up to the route's reorder window, each
 * only where {@link #mayOvertake} lets it go before the parked ones).
 */
public interface RecordProcessor {

  /**
   * The key records are serialised on within a partition (the entity id for routes with a
   * machine). Records with different keys may run concurrently. Never null, never throws: a
   * record whose key cannot be read gets some stable key of its own (its offset will do).
   */
  String orderingKey(ConsumerRecord<byte[], byte[]> record);

  /**
   * Whether {@code later}, a record of the same ordering key and partition after {@code parked},
   * may be applied before {@code parked}, which is parked in its {@link OrderSlot}: false when
   * applying it first would make {@code parked} impossible. Pure: a function of the two records
   * only, cheap, never blocks, never throws; called on the route's poll thread. Processors that
   * impose no order among a key's records keep the default, true.
   */
  default boolean mayOvertake(ConsumerRecord<byte[], byte[]> parked, ConsumerRecord<byte[], byte[]> later) {
    return true;
  }

  /**
   * Processes the record. The stage completes normally once the record is finished and its
   * offset may be committed. It completes exceptionally only when {@code cancel} was triggered
   * (revocation, shutdown) before the record was finished: then the offset must not be committed
   * and Kafka will redeliver the record. Transient failures (store down, business down) are
   * retried inside, with backoff, for as long as it takes; they never complete the stage.
   */
  CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> record, Cancellation cancel);

  /**
   * As {@link #process(ConsumerRecord, Cancellation)}, with the record's {@link OrderSlot}, through
   * which a record that waits for a later one of its key lets that one start. Processors that
   * never wait for a successor need not override it.
   */
  default CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> record, Cancellation cancel, OrderSlot slot) {
    return process(record, cancel);
  }
}
