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
 */
final class Story {
  private static final Duration VERDICT_TIMEOUT = Duration.ofSeconds(20);
  /** The business's delay in scene 3, long enough to keep the first copy in flight. */
  private static final int SLOW_BUSINESS_MS = 1500;
  private static final ObjectMapper JSON = new ObjectMapper();

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
        "o-101 goes all the way; the other orders are brought to the state their scene needs.");
    List<Input> shown = new ArrayList<>();
    shown.addAll(step(List.of("o-101", "o-301", "o-302", "o-401", "o-402", "o-501", "o-601"), id -> order(id, "create", ORDERS_CREATED)));
    List<Input> pays = step(List.of("o-101", "o-301", "o-302", "o-401", "o-402", "o-501"), id -> order(id, "pay", ORDERS_PAID));
    shown.addAll(pays);
    shown.addAll(step(List.of("o-101", "o-301", "o-302", "o-401"), id -> order(id, "prepare", ORDERS_TO_SHIP)));
    shown.addAll(step(List.of("o-101"), id -> order(id, "ship", ORDERS_SHIPPED)));
    shown.addAll(step(List.of("o-101"), id -> order(id, "deliver", ORDERS_DELIVERED)));
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
  }

  private void concurrentCopies() {
    report.scene("3. Incident 3: two copies checked 'to_ship' at the same time",
        "Production: two concurrent copies both read 'to_ship', both passed the state check, both wrote.",
        "Here: each pair is produced at the same moment to partitions 0 and 1 of orders.shipped, so the sidecar works on",
        "both at once; the business takes " + SLOW_BUSINESS_MS + " ms per call (delay_ms) so the first copy is still in flight.",
        "o-301: the very same record twice. o-302: upstream re-sent it with a new batch_no, so the dedup keys differ.");
    List<String> routes = layout.routesOf(ORDERS_SHIPPED);
    Input a0 = order("o-301", "ship", ORDERS_SHIPPED, 0, "a copy on partition 0", n -> n.put("delay_ms", SLOW_BUSINESS_MS));
    Input a1 = new Input("o-301 ship", "the same bytes on partition 1", ORDERS_SHIPPED, 1, a0.key, a0.value);
    Input b0 = order("o-302", "ship", ORDERS_SHIPPED, 0, "batch 1 on partition 0", n -> n.put("delay_ms", SLOW_BUSINESS_MS));
    Input b1 = order("o-302", "ship", ORDERS_SHIPPED, 1, "re-sent as batch 2, on partition 1",
        n -> n.put("batch_no", 2).put("delay_ms", SLOW_BUSINESS_MS));
    for (Input in : List.of(a0, a1)) {
      in.expect(routes, Reason.NONE, Reason.IN_FLIGHT, Reason.LEDGER_HIT, Reason.CACHE_HIT);
    }
    for (Input in : List.of(b0, b1)) {
      in.expect(routes, Reason.NONE, Reason.ALREADY_APPLIED);
    }
    report.rows(run(a0, a1, b0, b1));
    report.expectExactlyOneAccepted("order-shipped", a0, a1);
    report.expectExactlyOneAccepted("order-shipped", b0, b1);
    report.say("-> same key: the ledger's unique row admits one claim; the other copy is IN_FLIGHT (or a ledger/cache hit).");
    report.say("   Different keys: only the state machine can tell. Its single CAS (UPDATE ... WHERE state IN ('to_ship')");
    report.say("   AND pending_key IS NULL) lets one win; the other waits for that transition, then finds the order already");
    report.say("   shipped: ALREADY_APPLIED. No read-check-write window, no lock wait.");
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

  /** One event per order, sent together, each expected to be accepted. */
  private List<Input> step(List<String> ids, java.util.function.Function<String, Input> make) {
    List<Input> l = ids.stream().map(make).toList();
    return run(l.toArray(new Input[0]));
  }

  private Input order(String id, String event, String topic) {
    return order(id, event, topic, null, "", n -> { }).expect(layout.routesOf(topic), Reason.NONE);
  }

  /** An order event as every state node emits it; {@code tweak} adds or changes fields. */
  private Input order(String id, String event, String topic, Integer partition, String note, Consumer<ObjectNode> tweak) {
    ObjectNode n = JSON.createObjectNode()
        .put("order_id", id)
        .put("event", event)
        .put("sku_id", "sku-1")
        .put("warehouse_id", "w-1")
        .put("batch_no", 1);
    tweak.accept(n);
    stamp(n);
    return new Input(id + " " + event, note, topic, partition, id, bytes(n));
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
