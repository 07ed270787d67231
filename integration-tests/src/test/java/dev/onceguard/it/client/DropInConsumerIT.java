package dev.onceguard.it.client;

import static dev.onceguard.it.client.ClientSidecar.coordinates;
import static dev.onceguard.it.client.ClientSidecar.header;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.onceguard.client.OnceGuardConsumer;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.client.ClientSidecar.EntityRow;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The drop-in {@link OnceGuardConsumer} against a real sidecar in pull mode (real Kafka, MariaDB,
 * Redis, gRPC). The proof the issue asks for: one handler class ({@link ShippingHandler}) runs
 * first on a real {@link KafkaConsumer} and then on the drop-in, with only the constructor line
 * changed; Kafka hands it everything, OnceGuard only what the guard accepted. Then the pull
 * contract's failure side: deliveries left unacknowledged by a closed consumer or a broken
 * stream come back, flagged, to the next subscriber, and nothing is lost or doubled.
 */
class DropInConsumerIT {
  private static final int PARTITIONS = 3;
  private static final Duration DEADLINE = Duration.ofSeconds(40);

  private static KafkaSupport kafka;
  private static ClientSidecar sidecar;
  private static String shippingTopic;
  private static String shippingEscalations;
  private static String shippingGroup;
  private static String parcelsTopic;
  private static String parcelsGroup;

  @BeforeAll
  static void startSidecar() throws Exception {
    kafka = new KafkaSupport();
    shippingTopic = kafka.createTopic("dropin-shipping", PARTITIONS);
    shippingEscalations = kafka.createTopic("dropin-shipping-escalate", 1);
    parcelsTopic = kafka.createTopic("dropin-parcels", PARTITIONS);
    String parcelsEscalations = kafka.createTopic("dropin-parcels-escalate", 1);
    shippingGroup = "dropin-shipping-" + UUID.randomUUID();
    parcelsGroup = "dropin-parcels-" + UUID.randomUUID();
    sidecar = ClientSidecar.start("dropin-it", """
          - name: shipping
            topics: [%s]
            group: %s
            machine: order
            entity-id: /order_id
            event: /event
            business-key: [/order_id, /sku_id]
            fingerprint-exclude: [/message_id]
            mode: pull
            escalation-topic: %s
            handler-timeout: 15s
          - name: parcels
            topics: [%s]
            group: %s
            machine: order
            entity-id: /order_id
            event: /event
            business-key: [/order_id, /sku_id]
            mode: pull
            escalation-topic: %s
            handler-timeout: 15s
        """.formatted(shippingTopic, shippingGroup, shippingEscalations, parcelsTopic, parcelsGroup, parcelsEscalations));
  }

  @AfterAll
  static void stopSidecar() {
    try {
      if (sidecar != null) {
        sidecar.close();
      }
    } finally {
      if (kafka != null) {
        kafka.close();
      }
    }
  }

  /** One produced record and what OnceGuard must make of it. */
  private enum Expect { DELIVER, DUPLICATE, ILLEGAL, REJECT }

  private record Sent(String note, ProducerRecord<byte[], byte[]> record, Expect expect) {}

  private static ProducerRecord<byte[], byte[]> order(String topic, String id, String event, String extra) {
    String value = "{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\",\"sku_id\":\"sku-7\",\"message_id\":\"" + UUID.randomUUID()
        + "\"" + extra + "}";
    RecordHeaders h = new RecordHeaders();
    h.add("trace-id", ("trace-" + id + "-" + event).getBytes(StandardCharsets.UTF_8));
    return new ProducerRecord<>(topic, null, id.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8), h);
  }

  /** The same properties for both consumers: Kafka ignores the onceguard.* keys, OnceGuard the Kafka ones. */
  private static Properties properties(String group, String route) {
    Properties p = new Properties();
    p.put("bootstrap.servers", kafka.bootstrap());
    p.put("group.id", group);
    p.put("enable.auto.commit", "false");
    p.put("auto.offset.reset", "earliest");
    p.put("onceguard.target", sidecar.target());
    p.put("onceguard.route", route);
    return p;
  }

  @Test
  void sameHandler_onKafkaConsumerSeesEverything_onDropInSeesOnlyAcceptedRecordsOnce() {
    List<Sent> sent = new ArrayList<>();
    for (int i = 1; i <= 6; i++) {
      sent.add(new Sent("create o-" + i, order(shippingTopic, "o-" + i, "create", ""), Expect.DELIVER));
      sent.add(new Sent("pay o-" + i, order(shippingTopic, "o-" + i, "pay", ""), Expect.DELIVER));
    }
    sent.add(new Sent("create o-7", order(shippingTopic, "o-7", "create", ""), Expect.DELIVER));
    sent.add(new Sent("cancel o-7", order(shippingTopic, "o-7", "cancel", ""), Expect.DELIVER));
    sent.add(new Sent("pay o-7 after cancel", order(shippingTopic, "o-7", "pay", ""), Expect.ILLEGAL));
    sent.add(new Sent("create o-8", order(shippingTopic, "o-8", "create", ""), Expect.DELIVER));
    sent.add(new Sent("pay o-8, discontinued", order(shippingTopic, "o-8", "pay", ",\"discontinued\":true"), Expect.REJECT));
    // exact copies, as a producer retry would send them
    for (int idx : new int[] {0, 3, 13}) {
      ProducerRecord<byte[], byte[]> r = sent.get(idx).record();
      sent.add(new Sent("copy of " + sent.get(idx).note(), new ProducerRecord<>(shippingTopic, null, r.key(), r.value(), r.headers()),
          Expect.DUPLICATE));
    }
    List<RecordMetadata> md = kafka.produce(sent.stream().map(Sent::record).toList());
    Map<String, Sent> byCoordinates = new LinkedHashMap<>();
    for (int i = 0; i < sent.size(); i++) {
      byCoordinates.put(coordinates(md.get(i)), sent.get(i));
    }
    Set<String> toHandler = byCoordinates.entrySet().stream()
        .filter(e -> e.getValue().expect() == Expect.DELIVER || e.getValue().expect() == Expect.REJECT)
        .map(Map.Entry::getKey).collect(Collectors.toSet());

    // run 1: the handler on Kafka's own consumer
    Properties props = properties("dropin-plain-" + UUID.randomUUID(), "shipping");
    ShippingHandler plain = new ShippingHandler();
    try (Consumer<String, String> consumer = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
      plain.run(consumer, shippingTopic, () -> plain.seen.size() >= sent.size());
    }

    // run 2: the same handler class, the same properties; only the constructor differs
    ShippingHandler guarded = new ShippingHandler();
    try (Consumer<String, String> consumer = new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
      guarded.run(consumer, shippingTopic, () -> sidecar.decidedAll(byCoordinates.keySet()));
    }

    // Kafka: every record, copies and the illegal transition included, each once
    assertThat(plain.seen).extracting(ClientSidecar::coordinates).containsExactlyInAnyOrderElementsOf(byCoordinates.keySet());
    assertThat(plain.shipped).as("without a guard the copies are shipped twice").hasSize(sent.size() - 1);
    assertThat(plain.refused).extracting(ClientSidecar::coordinates).containsExactly(coordinates(md.get(16)));

    // OnceGuard: exactly the accepted records, each once, never a copy, never the illegal one
    assertThat(guarded.seen).extracting(ClientSidecar::coordinates).containsExactlyInAnyOrderElementsOf(toHandler);
    assertThat(guarded.refused).extracting(ClientSidecar::coordinates).containsExactly(coordinates(md.get(16)));
    assertThat(guarded.shipped).hasSize(toHandler.size() - 1);
    for (ConsumerRecord<String, String> r : guarded.seen) {
      ProducerRecord<byte[], byte[]> p = byCoordinates.get(coordinates(r)).record();
      assertThat(r.key()).isEqualTo(new String(p.key(), StandardCharsets.UTF_8));
      assertThat(r.value()).isEqualTo(new String(p.value(), StandardCharsets.UTF_8));
      assertThat(header(r, "trace-id")).as("the record's own headers").isEqualTo(header(plainTwin(plain, r), "trace-id"));
      assertThat(header(r, Headers.REDELIVERY)).isEqualTo("false");
      assertThat(header(r, Headers.ATTEMPT)).isEqualTo("1");
      assertThat(header(r, Headers.DEDUP_KEY)).matches("[0-9a-f]{64}");
      assertThat(header(r, Headers.ENTITY_ID)).isEqualTo(r.key());
    }
    assertThat(guarded.seen).extracting(r -> header(r, Headers.DEDUP_KEY)).doesNotHaveDuplicates();

    // every record decided once, as expected
    Map<String, List<Verdict>> verdicts = sidecar.verdicts();
    byCoordinates.forEach((c, s) -> {
      assertThat(verdicts.get(c)).as(s.note()).hasSize(1);
      Verdict v = verdicts.get(c).get(0);
      switch (s.expect()) {
        case DELIVER -> assertThat(v.getDisposition()).as(s.note()).isEqualTo(Disposition.ACCEPTED);
        case DUPLICATE -> {
          assertThat(v.getDisposition()).as(s.note()).isEqualTo(Disposition.DUPLICATE_IGNORE);
          assertThat(v.getLayer()).as(s.note()).isIn(Layer.CACHE, Layer.LEDGER);
        }
        case ILLEGAL -> assertThat(v.getReason()).as(s.note()).isEqualTo(Reason.ILLEGAL_TRANSITION);
        case REJECT -> assertThat(v.getReason()).as(s.note()).isEqualTo(Reason.BUSINESS_REJECTED);
      }
    });

    // the illegal transition and the rejection are on the escalation topic
    Map<String, ConsumerRecord<byte[], byte[]>> escalated = kafka.readAll(shippingEscalations).stream()
        .collect(Collectors.toMap(r -> header(r, Headers.REASON), r -> r));
    assertThat(escalated).containsOnlyKeys("ILLEGAL_TRANSITION", "BUSINESS_REJECTED");
    ConsumerRecord<byte[], byte[]> illegal = escalated.get("ILLEGAL_TRANSITION");
    assertThat(originalCoordinates(illegal)).isEqualTo(coordinates(md.get(14)));
    assertThat(header(illegal, Headers.CURRENT_STATE)).isEqualTo("cancelled");
    assertThat(illegal.value()).isEqualTo(sent.get(14).record().value());
    ConsumerRecord<byte[], byte[]> rejected = escalated.get("BUSINESS_REJECTED");
    assertThat(originalCoordinates(rejected)).isEqualTo(coordinates(md.get(16)));
    assertThat(header(rejected, Headers.DETAIL)).contains("sku discontinued");
    assertThat(header(rejected, Headers.CURRENT_STATE)).isEqualTo("created");
    assertThat(sidecar.entity("o-8")).as("rejection rolled the entity back").isEqualTo(new EntityRow("created", null, 1, null));
    assertThat(sidecar.entity("o-7")).isEqualTo(new EntityRow("cancelled", "created", 2, null));
    for (int i = 1; i <= 6; i++) {
      assertThat(sidecar.entity("o-" + i)).isEqualTo(new EntityRow("paid", "created", 2, null));
    }

    // the sidecar's group commits through to the end, as the plain consumer's group does
    Map<TopicPartition, Long> end = kafka.endOffsets(shippingTopic);
    await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(shippingGroup, shippingTopic)).isEqualTo(end));
    assertThat(kafka.committedOffsets(props.getProperty("group.id"), shippingTopic)).isEqualTo(end);
  }

  private static ConsumerRecord<String, String> plainTwin(ShippingHandler plain, ConsumerRecord<String, String> r) {
    return plain.seen.stream().filter(p -> coordinates(p).equals(coordinates(r))).findFirst().orElseThrow();
  }

  private static String originalCoordinates(ConsumerRecord<byte[], byte[]> escalated) {
    return coordinates(header(escalated, Headers.ORIGINAL_TOPIC), Integer.parseInt(header(escalated, Headers.ORIGINAL_PARTITION)),
        Long.parseLong(header(escalated, Headers.ORIGINAL_OFFSET)));
  }

  /** Polls until {@code enough} holds for what was returned so far; commits nothing. */
  private static List<ConsumerRecord<String, String>> pollUntil(Consumer<String, String> c,
      Predicate<List<ConsumerRecord<String, String>>> enough) {
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    long limit = System.nanoTime() + DEADLINE.toNanos();
    while (!enough.test(got)) {
      assertThat(System.nanoTime()).as("polled %s so far", got.size()).isLessThan(limit);
      c.poll(Duration.ofMillis(100)).forEach(got::add);
    }
    return got;
  }

  /** Counts {@code closed} down once a call's listener (the consumer's stream) has seen its end. */
  private static ClientInterceptor afterClose(CountDownLatch closed) {
    return new ClientInterceptor() {
      @Override
      public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
        return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
          @Override
          public void start(Listener<R> listener, Metadata headers) {
            super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
              @Override
              public void onClose(Status status, Metadata trailers) {
                try {
                  super.onClose(status, trailers);
                } finally {
                  closed.countDown();
                }
              }
            }, headers);
          }
        };
      }
    };
  }

  private static Set<String> coordinatesOf(List<ConsumerRecord<String, String>> rs) {
    return rs.stream().map(ClientSidecar::coordinates).collect(Collectors.toSet());
  }

  @Test
  void unacknowledgedDeliveries_comeBackFlagged_afterCloseWithoutCommit_andAfterABrokenStream_nothingLostNothingDoubled() throws Exception {
    int n = 12;
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 1; i <= n; i++) {
      records.add(order(parcelsTopic, "p-" + i, "create", ""));
    }
    Set<String> all = kafka.produce(records).stream().map(ClientSidecar::coordinates).collect(Collectors.toSet());
    Properties props = properties("unused", "parcels");
    props.put("onceguard.window", "4");

    // A: commits its first batch, polls a second and closes without committing it
    List<ConsumerRecord<String, String>> committedA;
    List<ConsumerRecord<String, String>> heldA;
    try (OnceGuardConsumer<String, String> a = new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
      a.subscribe(List.of(parcelsTopic));
      committedA = pollUntil(a, got -> !got.isEmpty());
      a.commitSync();
      heldA = pollUntil(a, got -> !got.isEmpty());
    }
    assertThat(coordinatesOf(committedA)).doesNotContainAnyElementsOf(coordinatesOf(heldA));

    // B: on a channel of its own, receives A's records again, flagged; then its channel dies mid-stream
    List<ConsumerRecord<String, String>> heldB;
    ManagedChannel channel = Grpc.newChannelBuilder(sidecar.target(), InsecureChannelCredentials.create()).build();
    OnceGuardConsumer<String, String> b = null;
    try {
      Map<String, Object> config = new HashMap<>();
      props.forEach((k, v) -> config.put((String) k, v));
      CountDownLatch streamClosed = new CountDownLatch(1);
      b = new OnceGuardConsumer<>(ClientInterceptors.intercept(channel, afterClose(streamClosed)), config, new StringDeserializer(),
          new StringDeserializer());
      b.subscribe(List.of(parcelsTopic));
      heldB = pollUntil(b, got -> coordinatesOf(got).containsAll(coordinatesOf(heldA)));
      channel.shutdownNow();
      assertThat(streamClosed.await(5, TimeUnit.SECONDS)).as("the consumer's stream saw the break").isTrue();
      OnceGuardConsumer<String, String> broken = b;
      assertThatThrownBy(broken::commitSync).as("a commit after the stream broke fails, as after a lost partition")
          .isInstanceOf(CommitFailedException.class);
    } finally {
      try {
        if (b != null) {
          b.close(Duration.ofSeconds(5));
        }
      } finally {
        channel.shutdownNow();
      }
    }

    // C: a new subscriber finishes the route
    List<ConsumerRecord<String, String>> seenC = new ArrayList<>();
    try (OnceGuardConsumer<String, String> c = new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
      c.subscribe(List.of(parcelsTopic));
      long limit = System.nanoTime() + DEADLINE.toNanos();
      while (!sidecar.decidedAll(all) && System.nanoTime() < limit) {
        c.poll(Duration.ofMillis(100)).forEach(seenC::add);
        c.commitSync();
      }
    }

    // redelivered to the next subscriber, flagged
    Map<String, ConsumerRecord<String, String>> inB = heldB.stream().collect(Collectors.toMap(ClientSidecar::coordinates, r -> r, (x, y) -> x));
    for (String c : coordinatesOf(heldA)) {
      assertThat(header(inB.get(c), Headers.REDELIVERY)).as("A's unacknowledged %s, at B", c).isEqualTo("true");
    }
    Map<String, List<ConsumerRecord<String, String>>> inC = seenC.stream().collect(Collectors.groupingBy(ClientSidecar::coordinates));
    for (String c : coordinatesOf(heldB)) {
      assertThat(inC.get(c)).as("B's unacknowledged %s, at C", c).isNotNull()
          .allSatisfy(r -> assertThat(header(r, Headers.REDELIVERY)).isEqualTo("true"));
    }
    // nothing lost: every record applied (committed) by exactly one subscriber
    List<String> applied = new ArrayList<>();
    committedA.forEach(r -> applied.add(coordinates(r)));
    seenC.forEach(r -> applied.add(coordinates(r)));
    assertThat(applied).as("applied once each").doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(all);
    // nothing doubled: a record is handed out unflagged at most once; acknowledged ones never again
    List<ConsumerRecord<String, String>> everything = new ArrayList<>(committedA);
    everything.addAll(heldA);
    everything.addAll(heldB);
    everything.addAll(seenC);
    assertThat(everything.stream().filter(r -> "false".equals(header(r, Headers.REDELIVERY))).map(ClientSidecar::coordinates).toList())
        .doesNotHaveDuplicates();
    Set<String> afterA = new HashSet<>(coordinatesOf(heldB));
    afterA.addAll(coordinatesOf(seenC));
    assertThat(afterA).as("what A committed never comes back").doesNotContainAnyElementsOf(coordinatesOf(committedA));

    Map<String, List<Verdict>> verdicts = sidecar.verdicts();
    for (String c : all) {
      assertThat(verdicts.get(c)).as(c).hasSize(1).allSatisfy(v -> assertThat(v.getDisposition()).isEqualTo(Disposition.ACCEPTED));
    }
    for (int i = 1; i <= n; i++) {
      assertThat(sidecar.entity("p-" + i)).isEqualTo(new EntityRow("created", null, 1, null));
      assertThat(sidecar.ledger("parcels", "p-" + i)).containsExactly("create DONE 1");
    }
    Map<TopicPartition, Long> end = kafka.endOffsets(parcelsTopic);
    await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(parcelsGroup, parcelsTopic)).isEqualTo(end));
  }
}
