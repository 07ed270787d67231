package dev.onceguard.it.client;

import static dev.onceguard.it.client.ClientSidecar.coordinates;
import static dev.onceguard.it.client.ClientSidecar.header;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.client.DeliveryInfo;
import dev.onceguard.client.MessageHandlerAdapter;
import dev.onceguard.client.RejectException;
import dev.onceguard.client.RetryableException;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.client.ClientSidecar.EntityRow;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * Push mode with the business served by {@link MessageHandlerAdapter}: a
 * {@code ConsumerRecord<String, String>} lambda on a real gRPC server, a real sidecar calling it.
 * Exceptions map by the adapter's documented rule: environment trouble and unclassified bugs are
 * retried by the sidecar (attempt + 1, {@code retryAfter} honoured) until the handler succeeds;
 * a {@link RejectException} aborts the claim and escalates the record as BUSINESS_REJECTED.
 */
class PushAdapterIT {
  private static final Duration DEADLINE = Duration.ofSeconds(30);
  private static final Duration RETRY_AFTER = Duration.ofMillis(400);

  /** One handler call as the business saw it. */
  private record Call(ConsumerRecord<String, String> record, DeliveryInfo info, long atNanos) {
    String order() {
      return info.entityId() + " " + info.event();
    }
  }

  private static ProducerRecord<byte[], byte[]> order(String topic, String id, String event, String extra) {
    String value = "{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\",\"sku_id\":\"sku-7\",\"message_id\":\"" + UUID.randomUUID()
        + "\"" + extra + "}";
    RecordHeaders h = new RecordHeaders();
    h.add("trace-id", ("trace-" + id + "-" + event).getBytes(StandardCharsets.UTF_8));
    return new ProducerRecord<>(topic, null, id.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8), h);
  }

  @Test
  void adapterLambda_retryKindExceptionsAreRetriedUntilSuccess_rejectExceptionIsEscalatedBusinessRejected() throws Exception {
    List<Call> calls = new CopyOnWriteArrayList<>();
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter
        .builder(new StringDeserializer(), new StringDeserializer(), (ConsumerRecord<String, String> record, DeliveryInfo info) -> {
          calls.add(new Call(record, info, System.nanoTime()));
          if (record.value().contains("\"discontinued\":true")) {
            throw new RejectException("sku discontinued");
          }
          if (info.entityId().equals("r-1") && info.event().equals("pay")) {
            if (info.attempt() == 1) {
              throw new IOException("warehouse API timed out"); // environment: RETRY
            }
            if (info.attempt() == 2) {
              throw new IllegalStateException("unexpected bug"); // unclassified: RETRY by default
            }
          }
          if (info.entityId().equals("t-1") && info.event().equals("create") && info.attempt() == 1) {
            throw new RetryableException("rate limited", null, RETRY_AFTER);
          }
        })
        .build();
    Server business = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), InsecureServerCredentials.create())
        .addService(adapter)
        .build()
        .start();
    try (KafkaSupport kafka = new KafkaSupport()) {
      String topic = kafka.createTopic("push-orders", 2);
      String escalations = kafka.createTopic("push-orders-escalate", 1);
      String group = "push-adapter-it-" + UUID.randomUUID();
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (String id : List.of("o-1", "o-2", "o-3", "o-4", "r-1", "t-1", "x-1")) {
        records.add(order(topic, id, "create", ""));
        records.add(order(topic, id, "pay", id.equals("x-1") ? ",\"discontinued\":true" : ""));
      }
      List<RecordMetadata> md = kafka.produce(records);
      Map<String, ProducerRecord<byte[], byte[]>> byCoordinates = new LinkedHashMap<>();
      for (int i = 0; i < records.size(); i++) {
        byCoordinates.put(coordinates(md.get(i)), records.get(i));
      }

      try (ClientSidecar sidecar = ClientSidecar.start("push-adapter-it", """
            - name: push-orders
              topics: [%s]
              group: %s
              machine: order
              entity-id: /order_id
              event: /event
              business-key: [/order_id, /sku_id]
              fingerprint-exclude: [/message_id]
              target: 127.0.0.1:%d
              escalation-topic: %s
              handler-timeout: 5s
              retry: {initial-backoff: 50ms, max-backoff: 500ms, max-attempts: 5}
          """.formatted(topic, group, business.getPort(), escalations))) {
        await().atMost(DEADLINE).pollInterval(Duration.ofMillis(100)).until(() -> sidecar.decidedAll(byCoordinates.keySet()));

        // one final verdict per record: all accepted but the rejected pay
        Map<String, List<Verdict>> verdicts = sidecar.verdicts();
        assertThat(verdicts.keySet()).isEqualTo(byCoordinates.keySet());
        byCoordinates.forEach((c, r) -> {
          String what = new String(r.value(), StandardCharsets.UTF_8);
          assertThat(verdicts.get(c)).as(what).hasSize(1);
          Verdict v = verdicts.get(c).get(0);
          if (what.contains("discontinued")) {
            assertThat(v.getReason()).as(what).isEqualTo(Reason.BUSINESS_REJECTED);
          } else {
            assertThat(v.getDisposition()).as(what).isEqualTo(Disposition.ACCEPTED);
          }
        });

        // what the lambda saw: records as a Kafka consumer returns them, plus the guard's metadata
        for (Call call : calls) {
          ConsumerRecord<String, String> r = call.record();
          ProducerRecord<byte[], byte[]> sent = byCoordinates.get(coordinates(r));
          assertThat(sent).as("a produced record: %s", coordinates(r)).isNotNull();
          assertThat(r.key()).isEqualTo(new String(sent.key(), StandardCharsets.UTF_8));
          assertThat(r.value()).isEqualTo(new String(sent.value(), StandardCharsets.UTF_8));
          assertThat(header(r, "trace-id")).isEqualTo("trace-" + call.info().entityId() + "-" + call.info().event());
          assertThat(header(r, Headers.DEDUP_KEY)).isEqualTo(call.info().dedupKey()).matches("[0-9a-f]{64}");
          assertThat(header(r, Headers.ENTITY_ID)).isEqualTo(call.info().entityId());
          assertThat(header(r, Headers.EVENT)).isEqualTo(call.info().event());
          assertThat(header(r, Headers.ATTEMPT)).isEqualTo(Integer.toString(call.info().attempt()));
          assertThat(header(r, Headers.REDELIVERY)).isEqualTo("false");
          assertThat(call.info().route()).isEqualTo("push-orders");
          assertThat(call.info().redelivery()).isFalse();
        }
        Map<String, List<Call>> byOrder = new LinkedHashMap<>();
        calls.forEach(c -> byOrder.computeIfAbsent(c.order(), k -> new ArrayList<>()).add(c));
        for (String id : List.of("o-1", "o-2", "o-3", "o-4", "x-1")) {
          assertThat(byOrder.get(id + " create")).as("%s create: one call", id).hasSize(1);
        }
        for (String id : List.of("o-1", "o-2", "o-3", "o-4")) {
          assertThat(byOrder.get(id + " pay")).as("%s pay: one call", id).hasSize(1);
          assertThat(sidecar.entity(id)).isEqualTo(new EntityRow("paid", "created", 2, null));
        }

        // IOException, then an unclassified bug, then success: three attempts of one claim
        List<Call> retried = byOrder.get("r-1 pay");
        assertThat(retried).extracting(c -> c.info().attempt()).containsExactly(1, 2, 3);
        assertThat(retried).extracting(c -> c.info().dedupKey()).containsOnly(retried.get(0).info().dedupKey());
        assertThat(retried).extracting(c -> coordinates(c.record())).containsOnly(coordinates(retried.get(0).record()));
        assertThat(sidecar.entity("r-1")).as("applied once the handler succeeded").isEqualTo(new EntityRow("paid", "created", 2, null));
        assertThat(sidecar.ledger("push-orders", "r-1")).containsExactly("create DONE 1", "pay DONE 1");

        // RetryableException with retryAfter: the next attempt waits at least that long (the
        // route's max-backoff, which caps a business's wait, is above it)
        List<Call> later = byOrder.get("t-1 create");
        assertThat(later).extracting(c -> c.info().attempt()).containsExactly(1, 2);
        assertThat(TimeUnit.NANOSECONDS.toMillis(later.get(1).atNanos() - later.get(0).atNanos()))
            .as("retryAfter honoured").isGreaterThanOrEqualTo(RETRY_AFTER.toMillis() - 20);
        assertThat(byOrder.get("t-1 pay")).hasSize(1);
        assertThat(sidecar.entity("t-1")).isEqualTo(new EntityRow("paid", "created", 2, null));

        // RejectException: one call, claim aborted, record escalated with the handler's reason
        assertThat(byOrder.get("x-1 pay")).as("a rejection is not retried").hasSize(1);
        assertThat(sidecar.entity("x-1")).as("back to its previous state").isEqualTo(new EntityRow("created", null, 1, null));
        assertThat(sidecar.ledger("push-orders", "x-1")).as("kept as rejected: a replay of it is flagged")
            .containsExactly("create DONE 1", "pay REJECTED 1");
        List<ConsumerRecord<byte[], byte[]>> escalated = kafka.readAll(escalations);
        assertThat(escalated).hasSize(1);
        ConsumerRecord<byte[], byte[]> e = escalated.get(0);
        String rejectedAt = coordinates(md.get(records.size() - 1));
        assertThat(coordinates(header(e, Headers.ORIGINAL_TOPIC), Integer.parseInt(header(e, Headers.ORIGINAL_PARTITION)),
            Long.parseLong(header(e, Headers.ORIGINAL_OFFSET)))).isEqualTo(rejectedAt);
        assertThat(e.value()).isEqualTo(records.get(records.size() - 1).value());
        assertThat(header(e, Headers.DISPOSITION)).isEqualTo("ILLEGAL_TRANSITION_ESCALATE");
        assertThat(header(e, Headers.REASON)).isEqualTo("BUSINESS_REJECTED");
        assertThat(header(e, Headers.LAYER)).isEqualTo("BUSINESS");
        assertThat(header(e, Headers.ENTITY_ID)).isEqualTo("x-1");
        assertThat(header(e, Headers.CURRENT_STATE)).isEqualTo("created");
        assertThat(header(e, Headers.DETAIL)).contains("sku discontinued");
        assertThat(header(e, "trace-id")).isEqualTo("trace-x-1-pay");

        Map<TopicPartition, Long> end = kafka.endOffsets(topic);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
      }
    } finally {
      business.shutdown();
      if (!business.awaitTermination(5, TimeUnit.SECONDS)) {
        business.shutdownNow();
      }
    }
  }
}
