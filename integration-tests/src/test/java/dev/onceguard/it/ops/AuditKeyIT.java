package dev.onceguard.it.ops;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.proxy.ops.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code onceguard audit-key} on the narrow-index incident, against the real broker: an order
 * line shipped from two warehouses (same order and SKU, different warehouse) fails the audit of
 * the key {@code (order_id, sku_id)} naming {@code /warehouse_id}; the full key passes; and the
 * audit commits nothing for any group.
 */
class AuditKeyIT {
  private static final String TOPIC = "audit-shipments-" + UUID.randomUUID().toString().substring(0, 8);
  static KafkaSupport kafka;

  @TempDir
  static Path dir;

  @BeforeAll
  static void seed() {
    kafka = new KafkaSupport();
    kafka.createTopicNamed(TOPIC, 2);
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    // the incident: o-7 / sku-3 ships two units from W1 and two from W2, two legitimate records
    records.add(shipment(0, "o-7", "sku-3", "W1", 2, "m-1"));
    records.add(shipment(0, "o-7", "sku-3", "W2", 2, "m-2"));
    // other lines, one of them re-sent by the producer with a new message id
    records.add(shipment(1, "o-8", "sku-1", "W1", 2, "m-3"));
    records.add(shipment(1, "o-9", "sku-1", "W1", 5, "m-4"));
    records.add(shipment(1, "o-8", "sku-1", "W1", 2, "m-5"));
    kafka.produce(records);
  }

  @AfterAll
  static void tearDown() {
    kafka.close();
  }

  static ProducerRecord<byte[], byte[]> shipment(int partition, String order, String sku, String warehouse, int qty, String messageId) {
    String v = "{\"order_id\":\"" + order + "\",\"sku_id\":\"" + sku + "\",\"warehouse_id\":\"" + warehouse + "\",\"qty\":" + qty
        + ",\"message_id\":\"" + messageId + "\",\"sent_at\":\"2026-12-02T10:00:00Z\"}";
    return new ProducerRecord<>(TOPIC, partition, order.getBytes(StandardCharsets.UTF_8), v.getBytes(StandardCharsets.UTF_8));
  }

  record Run(int code, String out, String err) {}

  static Run cli(String... args) throws Exception {
    Path config = dir.resolve("onceguard.yaml");
    Files.writeString(config, """
        kafka:
          bootstrap-servers: %s
        mysql:
          database: test
        routes:
          - name: shipments
            topics: [%s]
            business-key: [/order_id, /sku_id, /warehouse_id]
            fingerprint-exclude: [/message_id, /sent_at]
            target: 127.0.0.1:1
        """.formatted(ItEnv.kafkaBootstrap(), TOPIC));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    List<String> all = new ArrayList<>(List.of("audit-key", "--config=" + config, "--route", "shipments"));
    all.addAll(List.of(args));
    int code = new CommandLine(new Main()).setOut(new PrintWriter(out))
        .setErr(new PrintWriter(err)).execute(all.toArray(String[]::new));
    return new Run(code, out.toString(), err.toString());
  }

  @Test
  void narrowKey_failsNamingWarehouseId_fullKeyPasses_andNothingIsCommitted() throws Exception {
    Run narrow = cli("--business-key", "/order_id,/sku_id", "--json");
    assertThat(narrow.code()).as(narrow.err()).isEqualTo(2);
    JsonNode n = new ObjectMapper().readTree(narrow.out());
    assertThat(n.path("sound").asBoolean()).isFalse();
    assertThat(n.path("records").asLong()).isEqualTo(5);
    assertThat(n.path("collisions").path("records").asLong()).isEqualTo(1);
    assertThat(n.path("collisions").path("differingFields").fieldNames()).toIterable().containsExactly("/warehouse_id");
    JsonNode example = n.path("collisions").path("examples").get(0);
    assertThat(example.path("first").asText()).isEqualTo(TOPIC + "/0@0");
    assertThat(example.path("other").asText()).isEqualTo(TOPIC + "/0@1");
    assertThat(example.path("differingFields").get(0).asText()).isEqualTo("/warehouse_id");
    assertThat(example.path("businessKey").asText()).isEqualTo("order_id=o-7, sku_id=sku-3");
    assertThat(n.path("duplicates").path("records").asLong()).as("o-8 re-sent, message id excluded").isEqualTo(1);

    Run text = cli("--business-key", "/order_id,/sku_id");
    assertThat(text.code()).isEqualTo(2);
    assertThat(text.out()).contains("differing field /warehouse_id: in 1 collision(s)")
        .contains("e.g. " + TOPIC + "/0@0 and " + TOPIC + "/0@1, both order_id=o-7, sku_id=sku-3, differ at /warehouse_id")
        .contains("verdict: the key is NOT sound");

    Run full = cli("--json");
    assertThat(full.code()).as(full.out() + full.err()).isZero();
    JsonNode f = new ObjectMapper().readTree(full.out());
    assertThat(f.path("sound").asBoolean()).isTrue();
    assertThat(f.path("businessKey").toString()).isEqualTo("[\"/order_id\",\"/sku_id\",\"/warehouse_id\"]");
    assertThat(f.path("collisions").path("records").asLong()).isZero();
    assertThat(f.path("distinctKeys").asLong()).isEqualTo(4);

    Run last = cli("--business-key", "/order_id,/sku_id", "--last", "1");
    assertThat(last.code()).as("only o-7's W2 record and o-8's re-send: no collision among them").isZero();

    assertThat(kafka.groupsWithOffsetsOn(TOPIC)).as("read-only: no group committed anything on the topic").isEmpty();
  }

  @Test
  void badCandidateKey_isAConfigErrorNamingTheOption() throws Exception {
    Run bad = cli("--business-key", "/order_id,sku_id");
    assertThat(bad.code()).isEqualTo(2);
    assertThat(bad.err()).contains("config error: --business-key[1]: 'sku_id' is not a field source");
  }
}
