package dev.onceguard.demo;

import static dev.onceguard.demo.DemoLayout.ORDERS_CANCELLED;
import static dev.onceguard.demo.DemoLayout.ORDERS_CREATED;
import static dev.onceguard.demo.DemoLayout.ORDERS_DELIVERED;
import static dev.onceguard.demo.DemoLayout.ORDERS_PAID;
import static dev.onceguard.demo.DemoLayout.ORDERS_SHIPPED;
import static dev.onceguard.demo.DemoLayout.ORDERS_TO_SHIP;
import static dev.onceguard.demo.DemoLayout.SHIPMENTS;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.onceguard.v1.Reason;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * The records of the demo and what must become of them, scene by scene: the normal path, then
 * DESIGN.md's three production incidents, an out-of-order pair, an illegal transition, bad input
 * and a business refusal. Each step produces its records, waits for their verdicts, and prints them.
 *
 * <p>The machine's entity is the fulfilment line (order_id + sku_id + warehouse_id), as in
 * {@code examples/order-fulfilment.yaml}: one order may ship one sku from two warehouses, and each
 * line goes through each state exactly once. Most orders have one line, sku-1 from w-1.
 */
final class Story {
  private static final Duration VERDICT_TIMEOUT = Duration.ofSeconds(20);
  /** The business's delay in scene 3, long enough to keep the first copy in flight. */
  private static final int SLOW_BUSINESS_MS = 1500;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String DEFAULT_SKU = "sku-1";
  private static final String DEFAULT_WAREHOUSE = "w-1";
  /** o-102's sku-2 is split between two warehouses: two lines, two entities. */
  private static final List<String> SPLIT_WAREHOUSES = List.of("w-1", "w-2");

  private final Driver driver;
  private final Report report;
  private final DemoLayout layout;
  private int messageSeq;

  Story(Driver driver, Report report, DemoLayout layout) {
    this.driver = driver;
    this.report = report;
    this.layout = layout;
  }

  void run() {
    normalPath();
    lateCompensation();
    narrowIndex();
    concurrentCopies();
    outOfOrder();
    illegalTransition();
    badInputAndRefusal();
  }

  // ------------------------------------------------------------------------------------ scenes

  private void normalPath() {
    report.scene("0. The normal path",
        "One topic and one consumer group per state node (as in examples/order-fulfilment.yaml), all driving one shared",
        "order machine: created -> paid -> to_ship -> shipped -> delivered, and cancel from the first three states.",
        "Its entity is the fulfilment LINE, entity-id [/order_id, /sku_id, /warehouse_id]: one order may ship a sku from",
        "several warehouses, and it is the line that goes through each state exactly once. Lines are sku-1 from w-1",
        "unless the label says otherwise. o-101 goes all the way; the other lines are brought to the state their scene",
        "needs; o-102 has sku-2 in two warehouses (a split shipment, scene 2).");
    List<Input> shown = new ArrayList<>();
    shown.addAll(step(List.of("o-101", "o-301", "o-302", "o-401", "o-402", "o-501", "o-601"), "create", ORDERS_CREATED, true));
    List<Input> pays = step(List.of("o-101", "o-301", "o-302", "o-401", "o-402", "o-501"), "pay", ORDERS_PAID, true);
    shown.addAll(pays);
    shown.addAll(step(List.of("o-101", "o-301", "o-302", "o-401"), "prepare", ORDERS_TO_SHIP, true));
    shown.addAll(step(List.of("o-101"), "ship", ORDERS_SHIPPED, false));
    shown.addAll(step(List.of("o-101"), "deliver", ORDERS_DELIVERED, false));
    Input firstPay = pays.get(0);
    Input replay = new Input("o-101 pay (same bytes)", "a producer retry / upstream replay", ORDERS_PAID, null, firstPay.key, firstPay.value)
        .expect(layout.routesOf(ORDERS_PAID), Reason.CACHE_HIT);
    shown.addAll(run(replay));
    report.rows(shown);
    report.say("-> every legal step reached the business once; the plain replay was answered by Redis (L1) without");
    report.say("   touching MySQL.");
  }

  private void lateCompensation() {
    report.scene("1. Incident 1: the idempotency key expired before a late compensation arrived",
        "Production: a compensation arrived 9 days late, after its 7-day idempotency key had expired, and created a second",
        "shipping record. Here: a shipment of o-101 is recorded and re-sent at once; then the demo deletes its Redis keys",
        "(as if their TTL had run out) and the compensation re-sends the same shipment once more.");
    List<String> routes = layout.routesOf(SHIPMENTS);
    Input first = shipment("o-101", "sku-1", "w-1", 1, "shipment recorded").expect(routes, Reason.NONE);
    Input again = shipment("o-101", "sku-1", "w-1", 1, "re-sent at once (new message_id)").expect(routes, Reason.CACHE_HIT);
    report.rows(run(first));
    report.rows(run(again));
    long deleted = driver.deleteRedisKeys();
    report.say(".. deleted " + deleted + " Redis key(s) of this demo: \"9 days pass\", every L1 entry is gone ..");
    Input late = shipment("o-101", "sku-1", "w-1", 1, "compensation, 9 days late").expect(routes, Reason.LEDGER_HIT);
    report.rows(run(late));
    report.say("-> the cache forgot, the ledger did not: UNIQUE(route, dedup_key) has no TTL, so the late copy is a");
    report.say("   DUPLICATE_IGNORE and the business holds one shipment, not two.");
  }

  private void narrowIndex() {
    report.scene("2. Incident 2: a unique index without warehouse_id",
        "Production: the index was on (order_id, sku_id); a cross-warehouse transfer produced two legitimate shipping",
        "records that differ only by warehouse_id; the index treated them as one and a shipment was silently lost.",
        "Here: route 'shipments' keys on order_id+sku_id+warehouse_id+batch_no; route 'shipments-narrow' reads the same",
        "topic with the old index's key, order_id+sku_id.");
    Input w1 = shipment("o-102", "sku-2", "w-1", 1, "from warehouse w-1")
        .expectOn("shipments", Reason.NONE).expectOn("shipments-narrow", Reason.NONE);
    Input w2 = shipment("o-102", "sku-2", "w-2", 1, "from warehouse w-2 (transfer)")
        .expectOn("shipments", Reason.NONE).expectOn("shipments-narrow", Reason.KEY_COLLISION);
    report.rows(run(w1, w2));
    report.say("-> with the full key both records are accepted. With the narrow key the second one is not dropped as a");
    report.say("   'duplicate': same key, different content (fingerprint) -> KEY_COLLISION, escalated so that someone fixes");
    report.say("   the key instead of losing the shipment.");
    report.say("The same split on the order machine: o-102's sku-2 ships from w-1 and from w-2. With the order as entity the");
    report.say("second 'ship' would find o-102 already shipped: the same loss one layer down (OnceGuard escalates it as");
    report.say("CONFLICTING_FACT rather than drop it). With the line as entity they are two entities, each shipped once.");
    Input[] ships = SPLIT_WAREHOUSES.stream().map(w -> splitLine(w, "ship", ORDERS_SHIPPED)).toArray(Input[]::new);
    report.rows(run(ships));
    report.say("-> both lines reach the business, each as its own entity (Delivery.entity_id o-102|sku-2|w-1 and");
    report.say("   o-102|sku-2|w-2): the entity model holds both facts instead of one absorbing the other.");
  }

  private void concurrentCopies() {
    report.scene("3. Incident 3: two copies checked 'to_ship' at the same time",
        "Production: two concurrent copies both read 'to_ship', both passed the state check, both wrote.",
        "Here: each pair is produced at the same moment to partitions 0 and 1 of orders.shipped, so the sidecar works on",
        "both at once; the business takes " + SLOW_BUSINESS_MS + " ms per call (delay_ms) so the first copy is still in flight.",
        "o-301: the very same record twice. o-302: a second 'ship' of the line, with batch_no 2, so the dedup keys differ.",
        "Re-send or new fact? The routes fingerprint the whole value except message_id and sent_at, so batch_no is content:",
        "batch 2 is not the batch-1 record sent again (that would be o-301's case) but a second shipment of a line that",
        "ships once. OnceGuard cannot hold it, and must not drop it either.");
    List<String> routes = layout.routesOf(ORDERS_SHIPPED);
    Input a0 = order("o-301", "ship", ORDERS_SHIPPED, 0, "a copy on partition 0", n -> n.put("delay_ms", SLOW_BUSINESS_MS));
    Input a1 = new Input("o-301 ship", "the same bytes on partition 1", ORDERS_SHIPPED, 1, a0.key, a0.value);
    Input b0 = order("o-302", "ship", ORDERS_SHIPPED, 0, "batch 1 on partition 0", n -> n.put("delay_ms", SLOW_BUSINESS_MS));
    Input b1 = order("o-302", "ship", ORDERS_SHIPPED, 1, "batch 2 (a second shipment), on partition 1",
        n -> n.put("batch_no", 2).put("delay_ms", SLOW_BUSINESS_MS));
    for (Input in : List.of(a0, a1)) {
      in.expect(routes, Reason.NONE, Reason.IN_FLIGHT, Reason.LEDGER_HIT, Reason.CACHE_HIT);
    }
    for (Input in : List.of(b0, b1)) {
      in.expect(routes, Reason.NONE, Reason.CONFLICTING_FACT);
    }
    report.rows(run(a0, a1, b0, b1));
    report.expectExactlyOneAccepted("order-shipped", a0, a1);
    report.expectExactlyOneAccepted("order-shipped", b0, b1);
    report.say("-> same key: the ledger's unique row admits one claim; the other copy is IN_FLIGHT (or a ledger/cache hit).");
    report.say("   Different keys: only the state machine can tell. Its single CAS (UPDATE ... WHERE state IN ('to_ship')");
    report.say("   AND pending_key IS NULL) lets one win; the other waits for that transition, then finds the line already");
    report.say("   shipped. No read-check-write window, no lock wait. Its fingerprint matches no applied 'ship' of the line, so");
    report.say("   it is a distinct fact: CONFLICTING_FACT, escalated with the winner's business key (onceguard-applied-*");
    report.say("   headers). Only a record with the applied content (a re-send whose key changed) would be ALREADY_APPLIED.");
  }

  private void outOfOrder() {
    report.scene("4. Out of order: 'deliver' overtakes 'ship'",
        "Every state node has its own topic, so nothing orders events across topics. o-401 (to_ship) gets 'deliver' before",
        "'ship'; o-402 (paid) gets a 'deliver' whose 'ship' never comes. The demo's early-arrival-timeout is 5 s.");
    List<String> delivered = layout.routesOf(ORDERS_DELIVERED);
    Input early = order("o-401", "deliver", ORDERS_DELIVERED, null, "arrives before its ship", n -> { })
        .expect(delivered, Reason.NONE);
    Input never = order("o-402", "deliver", ORDERS_DELIVERED, null, "its ship never comes", n -> { })
        .expect(delivered, Reason.OUT_OF_ORDER);
    driver.send(List.of(early, never));
    driver.poll(Duration.ofSeconds(2));
    if (early.decided() || never.decided()) {
      report.problem("a 'deliver' was decided before its order was shipped; both should wait as early arrivals");
    }
    report.say(".. 2 s later: " + (early.decided() || never.decided() ? "UNEXPECTED, a verdict already came" : "no verdict for either 'deliver':")
        + " both wait as early arrivals ..");
    Input ship = order("o-401", "ship", ORDERS_SHIPPED, null, "the late 'ship'", n -> { })
        .expect(layout.routesOf(ORDERS_SHIPPED), Reason.NONE);
    driver.send(List.of(ship));
    driver.await(List.of(ship, early), VERDICT_TIMEOUT);
    if (early.decisions.get("order-delivered").atMillis() < ship.decisions.get("order-shipped").atMillis()) {
      report.problem("o-401 'deliver' was decided before its 'ship'");
    }
    report.rows(List.of(early, ship));
    driver.await(List.of(never), VERDICT_TIMEOUT);
    report.rows(List.of(never));
    report.say("-> o-401 healed: 'ship' applied, then the waiting 'deliver'. o-402 waited 5 s for a 'ship' that never");
    report.say("   came and was escalated as OUT_OF_ORDER.");
  }

  private void illegalTransition() {
    report.scene("5. An illegal transition: ship after cancel",
        "o-501 (paid) is cancelled; then a 'ship' for it arrives.");
    Input cancel = order("o-501", "cancel", ORDERS_CANCELLED, null, "customer cancels", n -> { })
        .expect(layout.routesOf(ORDERS_CANCELLED), Reason.NONE);
    report.rows(run(cancel));
    Input ship = order("o-501", "ship", ORDERS_SHIPPED, null, "ship after cancel", n -> { })
        .expect(layout.routesOf(ORDERS_SHIPPED), Reason.ILLEGAL_TRANSITION);
    report.rows(run(ship));
    report.say("-> 'cancelled' is terminal, no event leaves it: ILLEGAL_TRANSITION_ESCALATE, written to the escalation topic");
    report.say("   with onceguard-current-state=cancelled and onceguard-expected-from=to_ship.");
  }

  private void badInputAndRefusal() {
    report.scene("6. Bad input, and a business that says no",
        "A truncated record, an event the machine does not know, and a payment the business refuses (reject=true);",
        "then the payment is re-driven after the fix.");
    Input garbage = new Input("o-9 (truncated JSON)", "cut off mid-record", ORDERS_CREATED, null, "o-9",
        "{\"order_id\":\"o-9\",\"event\":\"cre".getBytes(StandardCharsets.UTF_8))
        .expect(layout.routesOf(ORDERS_CREATED), Reason.MALFORMED);
    Input unknown = order("o-601", "refund", ORDERS_PAID, null, "not an event of the machine", n -> { })
        .expect(layout.routesOf(ORDERS_PAID), Reason.UNKNOWN_EVENT);
    Input refused = order("o-601", "pay", ORDERS_PAID, null, "the business answers REJECT",
        n -> n.put("reject", true).put("reject_reason", "card declined"))
        .expect(layout.routesOf(ORDERS_PAID), Reason.BUSINESS_REJECTED);
    report.rows(run(garbage, unknown, refused));
    Input fixed = order("o-601", "pay", ORDERS_PAID, null, "re-driven after the fix", n -> { })
        .expect(layout.routesOf(ORDERS_PAID), Reason.NONE);
    report.rows(run(fixed));
    report.say("-> bad input never reaches the business. A REJECT aborts the claim: the order is back in 'created' and the");
    report.say("   ledger row is gone, so the same payment, re-driven, is accepted.");
  }

  // ------------------------------------------------------------------------------------ helpers

  /** Sends the inputs together and waits for all their verdicts. */
  private List<Input> run(Input... inputs) {
    List<Input> l = List.of(inputs);
    driver.send(l);
    driver.await(l, VERDICT_TIMEOUT);
    return l;
  }

  /**
   * One event per order's default line, plus (with {@code splitLines}) for each of o-102's two lines,
   * sent together, each expected to be accepted.
   */
  private List<Input> step(List<String> ids, String event, String topic, boolean splitLines) {
    List<Input> l = new ArrayList<>(ids.stream().map(id -> order(id, event, topic)).toList());
    if (splitLines) {
      SPLIT_WAREHOUSES.forEach(w -> l.add(splitLine(w, event, topic)));
    }
    return run(l.toArray(new Input[0]));
  }

  private Input splitLine(String warehouse, String event, String topic) {
    return line("o-102", "sku-2", warehouse, event, topic, null, "", n -> { }).expect(layout.routesOf(topic), Reason.NONE);
  }

  private Input order(String id, String event, String topic) {
    return order(id, event, topic, null, "", n -> { }).expect(layout.routesOf(topic), Reason.NONE);
  }

  /** An event of the order's default line (sku-1 from w-1); {@code tweak} adds or changes fields. */
  private Input order(String id, String event, String topic, Integer partition, String note, Consumer<ObjectNode> tweak) {
    return line(id, DEFAULT_SKU, DEFAULT_WAREHOUSE, event, topic, partition, note, tweak);
  }

  /**
   * A line event as every state node emits it; {@code tweak} adds or changes fields. The Kafka key is
   * the order id, so all lines of an order share a partition.
   */
  private Input line(String orderId, String sku, String warehouse, String event, String topic, Integer partition, String note,
      Consumer<ObjectNode> tweak) {
    ObjectNode n = JSON.createObjectNode()
        .put("order_id", orderId)
        .put("event", event)
        .put("sku_id", sku)
        .put("warehouse_id", warehouse)
        .put("batch_no", 1);
    tweak.accept(n);
    stamp(n);
    boolean defaultLine = sku.equals(DEFAULT_SKU) && warehouse.equals(DEFAULT_WAREHOUSE);
    String label = defaultLine ? orderId + " " + event : orderId + " " + sku + "@" + warehouse + " " + event;
    return new Input(label, note, topic, partition, orderId, bytes(n));
  }

  /** A shipping record (append-only: no state machine). */
  private Input shipment(String orderId, String sku, String warehouse, int batch, String note) {
    ObjectNode n = JSON.createObjectNode()
        .put("order_id", orderId)
        .put("sku_id", sku)
        .put("warehouse_id", warehouse)
        .put("batch_no", batch)
        .put("qty", 2);
    stamp(n);
    return new Input(orderId + " " + sku + "@" + warehouse, note, SHIPMENTS, null, orderId, bytes(n));
  }

  /** The volatile fields upstream changes on every send (excluded from the fingerprint). */
  private void stamp(ObjectNode n) {
    n.put("message_id", "m-" + (++messageSeq));
    n.put("sent_at", Instant.now().truncatedTo(ChronoUnit.MILLIS).toString());
  }

  private static byte[] bytes(ObjectNode n) {
    return n.toString().getBytes(StandardCharsets.UTF_8);
  }
}
