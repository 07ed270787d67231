package dev.onceguard.client;

import com.google.protobuf.ByteString;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Header;
import dev.onceguard.v1.KafkaRecord;
import java.nio.charset.StandardCharsets;

/** Builds deliveries for tests. */
final class TestDeliveries {
  private TestDeliveries() {}

  static final String ROUTE = "orders-shipping";
  static final String TOPIC = "orders";

  /** A delivery of a string record on {@link #TOPIC}. */
  static Delivery delivery(String id, int partition, long offset, String key, String value) {
    return delivery(id, TOPIC, partition, offset, key, value);
  }

  static Delivery delivery(String id, String topic, int partition, long offset, String key, String value) {
    KafkaRecord.Builder record = KafkaRecord.newBuilder()
        .setTopic(topic)
        .setPartition(partition)
        .setOffset(offset)
        .setTimestampMs(1_700_000_000_000L + offset);
    if (key != null) {
      record.setKey(utf8(key));
    }
    if (value != null) {
      record.setValue(utf8(value));
    }
    return Delivery.newBuilder()
        .setRecord(record)
        .setRoute(ROUTE)
        .setEntityId("order-" + key)
        .setEvent("ship")
        .setFromState("packed")
        .setToState("shipped")
        .setDedupKey("dk-" + id)
        .setBusinessKey("order_id=" + key)
        .setAttempt(1)
        .setDeliveryId(id)
        .build();
  }

  static Header header(String key, String value) {
    Header.Builder h = Header.newBuilder().setKey(key);
    if (value != null) {
      h.setValue(utf8(value));
    }
    return h.build();
  }

  static ByteString utf8(String s) {
    return ByteString.copyFrom(s, StandardCharsets.UTF_8);
  }

  static String utf8(byte[] bytes) {
    return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
  }
}
