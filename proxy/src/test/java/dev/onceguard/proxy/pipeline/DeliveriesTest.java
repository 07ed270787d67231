package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.KafkaRecord;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

class DeliveriesTest {

  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void toKafkaRecord_copiesCoordinatesKeyValueAndHeadersInOrder() {
    RecordHeaders h = new RecordHeaders();
    h.add("trace", b("t1"));
    h.add("empty", null);
    h.add("trace", b("t2"));
    ConsumerRecord<byte[], byte[]> r = new ConsumerRecord<>("orders", 3, 77L, 1_700_000_000_123L, TimestampType.CREATE_TIME,
        3, 5, b("key"), b("{\"a\":1}"), h, Optional.empty());
    KafkaRecord k = Deliveries.toKafkaRecord(r);
    assertThat(k.getTopic()).isEqualTo("orders");
    assertThat(k.getPartition()).isEqualTo(3);
    assertThat(k.getOffset()).isEqualTo(77);
    assertThat(k.getTimestampMs()).isEqualTo(1_700_000_000_123L);
    assertThat(k.getKey().toStringUtf8()).isEqualTo("key");
    assertThat(k.getValue().toStringUtf8()).isEqualTo("{\"a\":1}");
    assertThat(k.getHeadersList()).extracting(x -> x.getKey()).containsExactly("trace", "empty", "trace");
    assertThat(k.getHeaders(0).getValue().toStringUtf8()).isEqualTo("t1");
    assertThat(k.getHeaders(1).hasValue()).isFalse();
    assertThat(k.getHeaders(2).getValue().toStringUtf8()).isEqualTo("t2");
  }

  @Test
  void toKafkaRecord_nullKeyAndValue_areAbsentNotEmpty() {
    KafkaRecord k = Deliveries.toKafkaRecord(new ConsumerRecord<>("t", 0, 0, null, null));
    assertThat(k.hasKey()).isFalse();
    assertThat(k.hasValue()).isFalse();
  }

  @Test
  void toKafkaRecord_emptyKey_isPresentAndEmpty() {
    KafkaRecord k = Deliveries.toKafkaRecord(new ConsumerRecord<>("t", 0, 0, new byte[0], null));
    assertThat(k.hasKey()).isTrue();
    assertThat(k.getKey().isEmpty()).isTrue();
  }

  @Test
  void fromRecord_setsRouteAndRecord_leavesGuardFieldsEmpty() {
    Delivery d = Deliveries.fromRecord("orders", new ConsumerRecord<>("t", 1, 9, b("k"), b("v"))).build();
    assertThat(d.getRoute()).isEqualTo("orders");
    assertThat(d.getRecord().getOffset()).isEqualTo(9);
    assertThat(d.getEntityId()).isEmpty();
    assertThat(d.getDedupKey()).isEmpty();
  }
}
