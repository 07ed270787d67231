package dev.onceguard.proxy.pipeline;

import com.google.protobuf.ByteString;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Header;
import dev.onceguard.v1.KafkaRecord;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Builds the wire form of consumed records. Every processor (forwarding now, guarded later) goes
 * through here, so that what the business receives about a record is defined once: the raw key,
 * value and headers exactly as consumed (null stays absent, header order and repeats are kept).
 * Stateless; thread-safe.
 */
public final class Deliveries {
  private Deliveries() {}

  /** The raw record: coordinates, timestamp, key, value, headers. Copies the bytes. */
  public static KafkaRecord toKafkaRecord(ConsumerRecord<byte[], byte[]> r) {
    KafkaRecord.Builder b = KafkaRecord.newBuilder()
        .setTopic(r.topic())
        .setPartition(r.partition())
        .setOffset(r.offset())
        .setTimestampMs(r.timestamp());
    if (r.key() != null) {
      b.setKey(ByteString.copyFrom(r.key()));
    }
    if (r.value() != null) {
      b.setValue(ByteString.copyFrom(r.value()));
    }
    for (org.apache.kafka.common.header.Header h : r.headers()) {
      Header.Builder hb = Header.newBuilder().setKey(h.key());
      if (h.value() != null) {
        hb.setValue(ByteString.copyFrom(h.value()));
      }
      b.addHeaders(hb);
    }
    return b.build();
  }

  /**
   * A delivery of {@code r} for {@code route} with the record filled in; the caller sets the
   * attempt, the delivery id, the redelivery flag and, with a guard, entity, event, from/to states
   * and dedup key.
   */
  public static Delivery.Builder fromRecord(String route, ConsumerRecord<byte[], byte[]> r) {
    return Delivery.newBuilder().setRoute(route).setRecord(toKafkaRecord(r));
  }
}
