package dev.onceguard.it.scenario;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.wire.Headers;
import java.io.ByteArrayOutputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * Hostile records through the packaged sidecar on real Kafka, MariaDB and Redis (the unit-level
 * fuzzing is {@code GuardedProcessorFuzzTest}): JSON nested 10,000 deep, invalid UTF-8 in the
 * entity id, a null value (tombstone) and a duplicate key, between two valid records of one
 * partition. Each bad one lands on the escalation topic with its reason and detail, the valid ones
 * reach the business, and the partition's committed offset moves past all of them.
 */
class NastyRecordsIT {

  private static byte[] nested(int depth) {
    StringBuilder sb = new StringBuilder("{\"line_id\":\"n-deep\",\"event\":\"create\",\"x\":");
    sb.append("[".repeat(depth)).append("1").append("]".repeat(depth)).append('}');
    return sb.toString().getBytes(UTF_8);
  }

  private static byte[] invalidUtf8() {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.writeBytes("{\"line_id\":\"n".getBytes(UTF_8));
    b.writeBytes(new byte[] {(byte) 0xC0, (byte) 0xAD}); // an overlong '-': "n-utf" to a lenient decoder
    b.writeBytes("utf\",\"order_id\":\"o\",\"sku_id\":\"s\",\"warehouse_id\":\"w\",\"batch_no\":1,\"event\":\"create\"}".getBytes(UTF_8));
    return b.toByteArray();
  }

  @Test
  void deepJson_invalidUtf8_nullValue_duplicateKey_areEscalatedWithTheirReason_andThePartitionMovesOn() throws Exception {
    try (OneRouteEnv env = new OneRouteEnv("nasty", 1);
        RecordingBusiness business = RecordingBusiness.start().behave(d -> Reply.ok())) {
      int grpcPort = RecordingBusiness.freePort();
      String yaml = env.yaml("/line_id", business.target(), dev.onceguard.it.ItEnv.redisUri(), grpcPort, "");
      byte[] key = "n".getBytes(UTF_8);
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      records.add(env.record("n-1", "create", "m-1"));
      records.add(new ProducerRecord<>(env.topic, key, nested(10_000)));
      records.add(new ProducerRecord<>(env.topic, key, invalidUtf8()));
      records.add(new ProducerRecord<>(env.topic, key, null));
      records.add(new ProducerRecord<>(env.topic, key,
          "{\"line_id\":\"n-2\",\"line_id\":\"n-3\",\"order_id\":\"o\",\"event\":\"create\"}".getBytes(UTF_8)));
      records.add(env.record("n-4", "create", "m-4"));
      env.kafka.produce(records);

      try (SidecarProcess sidecar = SidecarProcess.start("nasty", yaml, grpcPort)) {
        sidecar.awaitServing(Duration.ofSeconds(90));
        TopicPartition tp = new TopicPartition(env.topic, 0);
        Awaitility.await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> env.kafka.committedOffset(env.group, tp) >= records.size());

        // two entities: the sidecar keeps order per entity, not across them
        assertThat(business.okDeliveries()).extracting(d -> d.getEntityId()).containsExactlyInAnyOrder("n-1", "n-4");
        List<ConsumerRecord<byte[], byte[]>> escalated = env.kafka.readAll(env.escalations);
        assertThat(escalated).extracting(r -> OneRouteEnv.header(r, Headers.ORIGINAL_OFFSET)).containsExactly("1", "2", "3", "4");
        assertThat(escalated).extracting(r -> OneRouteEnv.header(r, Headers.REASON)).containsOnly("MALFORMED");
        Map<String, String> details = new java.util.LinkedHashMap<>();
        escalated.forEach(r -> details.put(OneRouteEnv.header(r, Headers.ORIGINAL_OFFSET), OneRouteEnv.header(r, Headers.DETAIL)));
        assertThat(details.get("1")).contains("not valid JSON", "nesting depth");
        assertThat(details.get("2")).contains("not valid UTF-8");
        assertThat(details.get("3")).contains("null (tombstone)");
        assertThat(details.get("4")).contains("duplicate key");
        assertThat(escalated).as("the escalated record is the original, byte for byte")
            .extracting(ConsumerRecord::value).containsExactly(records.get(1).value(), records.get(2).value(), null, records.get(4).value());
        assertThat(sidecar.alive()).isTrue();
      }
    }
  }
}
