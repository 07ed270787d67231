package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

class KeyAuditTest {
  static final SidecarConfig CONFIG = new ConfigReader(Map.of()).parse("""
      sidecar:
        instance-id: test-1
        grpc-listen: 127.0.0.1:0
      kafka:
        bootstrap-servers: 127.0.0.1:9
      mysql:
        database: test
      machines:
        line:
          states: [to_ship, shipped, delivered, cancelled]
          terminal: [delivered, cancelled]
          events:
            prepare: { to: to_ship }
            ship:    { from: [to_ship], to: shipped }
            deliver: { from: [shipped], to: delivered }
            cancel:  { from: [to_ship], to: cancelled }
        order:
          states: [to_ship, shipped]
          events:
            prepare: { to: to_ship }
            ship:    { from: [to_ship], to: shipped }
      routes:
        - name: shipments
          topics: [shipments]
          business-key: [/order_id, /sku_id, /warehouse_id]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:7000
        - name: lines
          topics: [lines]
          machine: line
          entity-id: [/order_id, /sku_id, /warehouse_id]
          event: /event
          business-key: [/order_id, /sku_id, /warehouse_id]
          fingerprint-exclude: [/message_id]
          early-arrival-timeout: 10s
          target: 127.0.0.1:7000
        - name: lines-by-order
          topics: [lines-by-order]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /sku_id, /warehouse_id]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:7000
      """, "test.yaml");

  private static long offset;

  static ConsumerRecord<byte[], byte[]> rec(long timestamp, String json) {
    return new ConsumerRecord<>("shipments", 0, offset++, timestamp, TimestampType.CREATE_TIME, 0, 0, null,
        json.getBytes(StandardCharsets.UTF_8), new org.apache.kafka.common.header.internals.RecordHeaders(), java.util.Optional.empty());
  }

  static String line(String warehouse, String messageId, int qty) {
    return "{\"order_id\":\"o-1\",\"sku_id\":\"s-9\",\"warehouse_id\":\"" + warehouse + "\",\"qty\":" + qty + ",\"message_id\":\""
        + messageId + "\"}";
  }

  @Test
  void narrowKey_collidesOnTheTwoWarehouses_namingWarehouseId_andTheFullKeyIsSound() {
    List<ConsumerRecord<byte[], byte[]>> records = List.of(rec(1_000, line("W1", "m-1", 2)), rec(2_000, line("W2", "m-2", 2)),
        rec(61_000, line("W1", "m-3", 2)));
    KeyAudit narrow = new KeyAudit(CandidateKey.apply(CONFIG.routes().get(0), List.of("/order_id", "/sku_id"), null), null, 5);
    records.forEach(narrow::add);
    KeyAudit.Report n = narrow.report();

    assertThat(n.sound()).isFalse();
    assertThat(n.collisions().records()).isEqualTo(1);
    assertThat(n.collisions().differingFields()).containsOnlyKeys("/warehouse_id");
    assertThat(n.collisions().examples()).singleElement()
        .satisfies(x -> assertThat(x.first()).isEqualTo("shipments/0@" + (offset - 3)));
    assertThat(n.duplicates().records()).as("W1 again, message id excluded").isEqualTo(1);
    assertThat(n.duplicates().ages().maxMs()).isEqualTo(60_000);
    assertThat(n.text()).contains("differing field /warehouse_id: in 1 collision(s)").contains("NOT sound");

    KeyAudit full = new KeyAudit(CONFIG.routes().get(0), null, 5);
    records.forEach(full::add);
    KeyAudit.Report f = full.report();
    assertThat(f.sound()).isTrue();
    assertThat(f.collisions().records()).isZero();
    assertThat(f.distinctKeys()).isEqualTo(2);
    assertThat(f.text()).contains("the key is sound");
  }

  @Test
  void missingOrBlankKeyField_isCounted_andMakesTheKeyUnsound() {
    KeyAudit a = new KeyAudit(CONFIG.routes().get(0), null, 5);
    a.add(rec(1, "{\"order_id\":\"o-1\",\"sku_id\":\" \",\"warehouse_id\":\"W1\"}"));
    a.add(rec(1, "{\"order_id\":\"o-1\",\"warehouse_id\":\"W1\"}"));
    a.add(rec(1, "not json"));

    KeyAudit.Report r = a.report();
    assertThat(r.missing().records()).isEqualTo(2);
    assertThat(r.missing().byField()).containsKeys("field 'sku_id' (/sku_id) is blank (whitespace only)",
        "field 'sku_id' (/sku_id) is missing or null");
    assertThat(r.unreadable().byReason()).containsEntry("MALFORMED", 1L);
    assertThat(r.sound()).isFalse();
  }

  static String ev(String warehouse, String event, int qty) {
    return "{\"order_id\":\"o-1\",\"sku_id\":\"s-9\",\"warehouse_id\":\"" + warehouse + "\",\"event\":\"" + event + "\",\"qty\":" + qty + "}";
  }

  @Test
  void machineRoute_swappedPairHeals_lateOneIsEscalated_refusedTransitionsAndConflictingFactsAreNamed() {
    KeyAudit a = new KeyAudit(CONFIG.routes().get(1), CONFIG.machines().get("line"), 10);
    // W1: ship arrives before prepare and heals; then deliver; then cancel is refused (terminal)
    a.add(rec(1_000, ev("W1", "ship", 1)));
    a.add(rec(2_000, ev("W1", "prepare", 1)));
    a.add(rec(3_000, ev("W1", "deliver", 1)));
    a.add(rec(4_000, ev("W1", "cancel", 1)));
    // W2: ship waits 30 s for prepare, longer than early-arrival-timeout 10s
    a.add(rec(5_000, ev("W2", "ship", 1)));
    a.add(rec(35_000, ev("W2", "prepare", 1)));
    // W3: deliver never gets its ship
    a.add(rec(36_000, ev("W3", "prepare", 1)));
    a.add(rec(37_000, ev("W3", "deliver", 1)));

    KeyAudit.MachineFindings m = a.report().machine();
    assertThat(m.entities()).isEqualTo(3);
    assertThat(m.outOfOrder()).isEqualTo(3);
    assertThat(m.outOfOrderEntities()).isEqualTo(3);
    assertThat(m.healed()).isEqualTo(1);
    assertThat(m.escalatedOutOfOrder()).isEqualTo(2);
    assertThat(m.refused()).containsExactly(Map.entry("'cancel' from 'delivered'", 1L));
    assertThat(m.conflictingFacts()).isZero();
    assertThat(a.report().sound()).as("order problems are reported, the key itself is sound").isTrue();
  }

  @Test
  void machineRoute_entityCoarserThanTheFacts_reportsConflictingFacts() {
    KeyAudit a = new KeyAudit(CONFIG.routes().get(2), CONFIG.machines().get("order"), 10);
    a.add(rec(1_000, ev("W1", "prepare", 1)));
    a.add(rec(2_000, ev("W2", "prepare", 1)));

    KeyAudit.Report r = a.report();
    assertThat(r.machine().conflictingFacts()).isEqualTo(1);
    assertThat(r.sound()).isFalse();
    assertThat(r.text()).contains("the entity should be finer");
  }
}
