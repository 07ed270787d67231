package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * The reference pipeline's shape, end to end on the real broker, MariaDB and Redis: every order
 * line is fulfilled from two warehouses (a split shipment), and each warehouse's line goes
 * through create, pay, prepare, ship, deliver. The business key has the warehouse, so the ledger
 * keeps both warehouses' records apart; what differs is the entity.
 *
 * <ul>
 *   <li>Entity = the order ({@code /order_id}): the second warehouse's transitions find them
 *       applied already by records with other content. Each one is a distinct fact the entity
 *       cannot hold: escalated as CONFLICTING_FACT, naming the record that applied it; none is
 *       ignored as a duplicate (the silent loss this product exists to prevent).
 *   <li>Entity = the line ({@code [/order_id, /sku_id, /warehouse_id]}): every record of both
 *       warehouses reaches the business, each line in machine order, nothing escalated.
 * </ul>
 */
class SplitShipmentIT {
  static final int ORDERS = 30;
  static final List<String> EVENTS = List.of("create", "pay", "prepare", "ship", "deliver");
  static final List<String> WAREHOUSES = List.of("w-1", "w-2");

  /** Both warehouses' records of each order, interleaved event by event, keyed by order. */
  static List<ProducerRecord<byte[], byte[]>> records(String topic) {
    List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
    for (int o = 0; o < ORDERS; o++) {
      String order = "o-" + o;
      for (String ev : EVENTS) {
        for (String w : WAREHOUSES) {
          String json = """
              {"line_id":"%s/%s","order_id":"%s","sku_id":"s-1","warehouse_id":"%s","batch_no":1,"event":"%s","message_id":"m-%s-%s-%s"}"""
              .formatted(order, w, order, w, ev, order, w, ev);
          out.add(new ProducerRecord<>(topic, order.getBytes(StandardCharsets.UTF_8), json.getBytes(StandardCharsets.UTF_8)));
        }
      }
    }
    return out;
  }

  record Run(Map<String, List<String>> applied, List<ConsumerRecord<byte[], byte[]>> escalated, List<Verdict> duplicates) {}

  static Run run(String name, String entityId) throws Exception {
    try (OneRouteEnv env = new OneRouteEnv(name, 3); RecordingBusiness business = RecordingBusiness.start()) {
      try (InProcessSidecar sidecar = InProcessSidecar.start(env.configWithEntity(entityId, business.target()))) {
        env.kafka.produce(records(env.topic));
        Map<TopicPartition, Long> end = env.kafka.endOffsets(env.topic);
        await().atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofMillis(200))
            .until(() -> env.kafka.committedOffsets(env.group, env.topic).equals(end));
      }
      // per business entity id and warehouse, the events the business applied, in arrival order
      Map<String, List<String>> applied = new TreeMap<>();
      business.calls().stream().filter(Call::answeredOk).sorted(Comparator.comparingLong(Call::receivedAtNanos))
          .forEach(c -> applied.computeIfAbsent(
                  OneRouteEnv.field(c.delivery().getRecord().getValue().toByteArray(), "line_id"), k -> new ArrayList<>())
              .add(c.delivery().getEvent()));
      List<Verdict> duplicates = new ArrayList<>();
      for (ConsumerRecord<byte[], byte[]> r : env.kafka.readAll(env.verdicts)) {
        if ("DUPLICATE_IGNORE".equals(OneRouteEnv.header(r, Headers.DISPOSITION))) {
          duplicates.add(Verdict.parseFrom(r.value()));
        }
      }
      return new Run(applied, env.kafka.readAll(env.escalations), duplicates);
    }
  }

  @Test
  void orderLevelEntity_splitShipment_everySecondWarehouseRecordEscalatedAsConflictingFact_noneIgnored() throws Exception {
    Run r = run("split-order", "/order_id");

    assertThat(r.duplicates()).as("nothing ignored as a duplicate").isEmpty();
    Map<String, Integer> perLine = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> e : r.escalated()) {
      String line = OneRouteEnv.field(e.value(), "line_id");
      assertThat(line).as("only the second warehouse's records are escalated").endsWith("/w-2");
      assertThat(OneRouteEnv.header(e, Headers.REASON)).isEqualTo("CONFLICTING_FACT");
      assertThat(OneRouteEnv.header(e, Headers.DISPOSITION)).isEqualTo("ILLEGAL_TRANSITION_ESCALATE");
      assertThat(OneRouteEnv.header(e, Headers.APPLIED_BUSINESS_KEY)).as("names the applied record").contains("w-1")
          .doesNotContain("w-2");
      assertThat(OneRouteEnv.header(e, Headers.APPLIED_TOPIC)).isNotBlank();
      assertThat(OneRouteEnv.header(e, Headers.APPLIED_OFFSET)).isNotBlank();
      perLine.merge(line, 1, Integer::sum);
    }
    assertThat(perLine).hasSize(ORDERS);
    assertThat(perLine.values()).as("all five events of every second-warehouse line").containsOnly(EVENTS.size());
    for (int o = 0; o < ORDERS; o++) {
      assertThat(r.applied().get("o-" + o + "/w-1")).as("o-%d/w-1 applied in order", o).isEqualTo(EVENTS);
      assertThat(r.applied()).as("o-%d/w-2 never reached the business", o).doesNotContainKey("o-" + o + "/w-2");
    }
  }

  @Test
  void lineLevelEntity_splitShipment_everyRecordOfBothWarehousesReachesTheBusinessInOrder() throws Exception {
    Run r = run("split-line", "[/order_id, /sku_id, /warehouse_id]");

    assertThat(r.escalated()).as("nothing escalated").isEmpty();
    assertThat(r.duplicates()).as("nothing ignored").isEmpty();
    assertThat(r.applied()).hasSize(ORDERS * WAREHOUSES.size());
    r.applied().forEach((line, events) -> assertThat(events).as("%s applied in machine order", line).isEqualTo(EVENTS));
  }
}
