package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.wire.Headers;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * The reorder window (DESIGN.md, "Processing one record", step 3): one topic carries every event
 * of an order line, keyed by line so that a line's events share a partition, and some lines
 * arrive swapped in that partition. A swapped pair must heal — applied in machine order, nothing
 * escalated — and a later record must never be let past an earlier one that it would make
 * impossible (a "cancel" behind a waiting "ship"). Records are produced in one batch so that
 * the swaps sit side by side in the partition, as a real upstream reordering would put them.
 */
class ReorderWindowIT {
  static final int LINES_PER_KIND = 40;
  static final int PARTITIONS = 3;

  /** What a line's events look like in the topic, and what must come of them. */
  enum Kind {
    IN_ORDER(List.of("create", "pay", "prepare", "ship", "deliver"), List.of("create", "pay", "prepare", "ship", "deliver")),
    /** "delivered" before "shipped": heals. */
    SWAPPED_PAIR(List.of("create", "pay", "prepare", "deliver", "ship"), List.of("create", "pay", "prepare", "ship", "deliver")),
    /** Three in reverse: heals within a window of 3. */
    REVERSED_TRIPLE(List.of("create", "pay", "deliver", "ship", "prepare"), List.of("create", "pay", "prepare", "ship", "deliver")),
    /** The early "deliver" twice (the copy with a new message id): one applied, one duplicate. */
    EARLY_DUPLICATE(List.of("create", "pay", "prepare", "deliver", "deliver", "ship"),
        List.of("create", "pay", "prepare", "ship", "deliver")),
    /**
     * "ship" waits for "prepare"; the "cancel" behind it must not go first (it would make "ship"
     * impossible); "prepare" may, since "ship" stays possible after it. So: prepare, ship applied,
     * cancel escalated ILLEGAL_TRANSITION — what strict offset order with the missing piece in
     * place would have given.
     */
    CANCEL_BEHIND_WAITING_SHIP(List.of("create", "pay", "ship", "cancel", "prepare"), List.of("create", "pay", "prepare", "ship"));

    final List<String> sent;
    final List<String> applied;

    Kind(List<String> sent, List<String> applied) {
      this.sent = sent;
      this.applied = applied;
    }
  }

  @Test
  void swappedEventsOfOneEntityInOnePartition_healInMachineOrder_andNeverOvertakeIntoAnIllegalOrder() throws Exception {
    try (OneRouteEnv env = new OneRouteEnv("reorder", PARTITIONS);
        RecordingBusiness business = RecordingBusiness.start()) {
      KafkaSupport kafka = env.kafka;
      String topic = env.topic;
      SidecarConfig cfg = env.config(business.target(), "reorder-window: 3", "early-arrival-timeout: 30s", "early-arrival-retry: 2s");

      Map<String, Kind> lines = new LinkedHashMap<>();
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      Random rnd = new Random(5);
      int n = 0;
      for (int i = 0; i < LINES_PER_KIND; i++) {
        for (Kind k : Kind.values()) {
          String line = "L" + (n++);
          lines.put(line, k);
        }
      }
      // interleave the lines, keeping each line's own order (its swaps included)
      Map<String, Integer> nextEvent = new HashMap<>();
      List<String> open = new ArrayList<>(lines.keySet());
      while (!open.isEmpty()) {
        int pick = rnd.nextInt(open.size());
        String line = open.get(pick);
        int e = nextEvent.merge(line, 1, Integer::sum) - 1;
        List<String> sent = lines.get(line).sent;
        records.add(env.record(line, sent.get(e), "m-" + line + "-" + e));
        if (e == sent.size() - 1) {
          open.remove(pick);
        }
      }

      long t0 = System.nanoTime();
      try (InProcessSidecar sidecar = InProcessSidecar.start(cfg)) {
        kafka.produce(records);
        Map<TopicPartition, Long> end = kafka.endOffsets(topic);
        await().atMost(Duration.ofMinutes(3)).pollInterval(Duration.ofMillis(200))
            .until(() -> kafka.committedOffsets(env.group, topic).equals(end));
      } finally {
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("ReorderWindowIT: %d lines, %d records, all committed after %d ms%n", lines.size(), records.size(), ms);
      }

      {
        // what the business applied, per line, in the order it received it
        Map<String, List<String>> applied = new HashMap<>();
        business.calls().stream()
            .filter(Call::answeredOk)
            .sorted(Comparator.comparingLong(Call::receivedAtNanos))
            .forEach(c -> applied.computeIfAbsent(c.delivery().getEntityId(), k -> new ArrayList<>()).add(c.delivery().getEvent()));
        Map<String, String> escalated = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : kafka.readAll(env.escalations)) {
          String line = OneRouteEnv.field(r.value(), "line_id");
          String event = OneRouteEnv.field(r.value(), "event");
          escalated.merge(line, event + ":" + OneRouteEnv.header(r, Headers.REASON), (a, b) -> a + "," + b);
        }
        Map<String, Integer> duplicates = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : kafka.readAll(env.verdicts)) {
          if ("DUPLICATE_IGNORE".equals(OneRouteEnv.header(r, Headers.DISPOSITION))) {
            var v = dev.onceguard.v1.Verdict.parseFrom(r.value());
            duplicates.merge(v.getEntityId(), 1, Integer::sum);
          }
        }

        for (Map.Entry<String, Kind> e : lines.entrySet()) {
          String line = e.getKey();
          Kind k = e.getValue();
          assertThat(applied.get(line)).as("%s (%s): applied by the business, in order", line, k).isEqualTo(k.applied);
          switch (k) {
            case CANCEL_BEHIND_WAITING_SHIP ->
                assertThat(escalated.get(line)).as("%s (%s)", line, k).isEqualTo("cancel:ILLEGAL_TRANSITION");
            case EARLY_DUPLICATE -> {
              assertThat(escalated.get(line)).as("%s (%s)", line, k).isNull();
              assertThat(duplicates.get(line)).as("%s (%s): the second deliver is a duplicate", line, k).isEqualTo(1);
            }
            default -> assertThat(escalated.get(line)).as("%s (%s): nothing escalated", line, k).isNull();
          }
        }
        List<List<Object>> states = env.mysql.rows("SELECT state, COUNT(*) FROM " + env.database + ".og_entity GROUP BY state ORDER BY state");
        assertThat(states).containsExactlyInAnyOrder(
            List.of("delivered", (long) LINES_PER_KIND * 4),
            List.of("shipped", (long) LINES_PER_KIND));
      }
    }
  }
}
