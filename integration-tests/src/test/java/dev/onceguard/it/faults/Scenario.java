package dev.onceguard.it.faults;

import dev.onceguard.it.faults.Business.Answer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * A short stream of one partition and how the business answers it: what every schedule of the
 * fault model runs.
 *
 * @param route the route that consumes it
 * @param events the events of the stream in offset order; on a machine route they all concern one
 *     entity, on an append-only route each is a line id
 * @param script the business's answer to the n-th delivery of a key, by event (or line id)
 * @param toState the state each event leads to (empty on an append-only route)
 * @param allowed escalation reasons a record may end with besides BUSINESS_REJECTED, by offset
 */
record Scenario(String name, String route, List<String> events, BiFunction<String, Integer, Answer> script,
    Map<String, String> toState, Map<Long, Set<String>> allowed) {

  boolean machine() {
    return !toState.isEmpty();
  }

  /** Steps whose event starts with this come through the Guard API (Submit, then Complete), not Kafka. */
  static final String API = "api:";

  /** Whether step {@code i} comes through the Guard API. */
  boolean viaApi(long i) {
    return events.get((int) i).startsWith(API);
  }

  /** The stream for run {@code run}: its own entity ids, so runs never share rows. */
  List<ConsumerRecord<byte[], byte[]>> records(String topic, String run) {
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    for (int i = 0; i < events.size(); i++) {
      String e = events.get(i).startsWith(API) ? events.get(i).substring(API.length()) : events.get(i);
      String value = machine()
          ? "{\"order_id\":\"o-" + run + "\",\"event\":\"" + e + "\",\"sent_at\":" + i + "}"
          : "{\"line_id\":\"" + e + "-" + run + "\",\"qty\":1,\"sent_at\":" + i + "}";
      byte[] key = (machine() ? "o-" + run : e + "-" + run).getBytes(StandardCharsets.UTF_8);
      out.add(new ConsumerRecord<>(topic, 0, i, key, value.getBytes(StandardCharsets.UTF_8)));
    }
    return out;
  }

  /** The event (or line) of a delivery, as the script knows it. */
  static String scriptKey(String event, String lineId) {
    return event.isEmpty() ? lineId.substring(0, lineId.indexOf('-')) : event;
  }

  static final Scenario APPLY_AND_RESEND = new Scenario("apply-and-resend", "orders", List.of("create", "pay", "pay"),
      (e, n) -> Answer.OK, Map.of("create", "created", "pay", "paid"), Map.of());

  /** The business rejects pay once; the same pay, re-driven later, is applied. */
  static final Scenario REJECT_THEN_REDRIVE = new Scenario("reject-then-redrive", "orders", List.of("create", "pay", "pay"),
      (e, n) -> e.equals("pay") && n == 1 ? Answer.REJECT : Answer.OK, Map.of("create", "created", "pay", "paid"), Map.of());

  /** The business asks for a retry of create once. */
  static final Scenario BUSINESS_RETRY = new Scenario("business-retry", "orders", List.of("create", "pay"),
      (e, n) -> e.equals("create") && n == 1 ? Answer.RETRY : Answer.OK, Map.of("create", "created", "pay", "paid"), Map.of());

  /**
   * Append-only lines (two business attempts at most): l1 applied and re-sent; l2 always refused;
   * l3 applied at its second attempt.
   */
  static final Scenario LINES = new Scenario("append-only", "lines", List.of("l1", "l1", "l2", "l3"),
      (e, n) -> switch (e) {
        case "l2" -> Answer.REJECT;
        case "l3" -> n == 1 ? Answer.RETRY : Answer.OK;
        default -> Answer.OK;
      }, Map.of(), Map.of());

  /**
   * The same facts through both doors: pay submitted through the Guard API and refused by its
   * caller (Complete REJECT), then its Kafka copy, applied; ship from Kafka, refused once by the
   * business, then re-driven through the API and applied by its caller; create through the API
   * once more (a duplicate).
   */
  static final Scenario API_AND_KAFKA = new Scenario("api-and-kafka", "orders",
      List.of("create", API + "pay", "pay", "ship", API + "ship", API + "create"),
      (e, n) -> (e.equals("ship") || e.equals("pay")) && n == 1 ? Answer.REJECT : Answer.OK,
      Map.of("create", "created", "pay", "paid", "ship", "shipped"), Map.of());

  /** {@link #REJECT_THEN_REDRIVE} on a pull route: the business acknowledges over the Deliveries stream. */
  static final Scenario PULL = new Scenario("pull-reject-then-redrive", "pulled", REJECT_THEN_REDRIVE.events(),
      REJECT_THEN_REDRIVE.script(), REJECT_THEN_REDRIVE.toState(), Map.of());

  static final List<Scenario> ALL = List.of(APPLY_AND_RESEND, REJECT_THEN_REDRIVE, BUSINESS_RETRY, LINES, API_AND_KAFKA, PULL);
}
