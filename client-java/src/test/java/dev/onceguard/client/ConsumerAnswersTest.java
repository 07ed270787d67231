package dev.onceguard.client;

import static dev.onceguard.client.TestDeliveries.ROUTE;
import static dev.onceguard.client.TestDeliveries.TOPIC;
import static dev.onceguard.client.TestDeliveries.delivery;
import static dev.onceguard.client.TestDeliveries.utf8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.onceguard.client.internal.ConsumerMetrics;
import dev.onceguard.client.internal.PullConsumer;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.Reason;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * What OnceGuardConsumer answers instead of throwing (issue 13, items 4 to 6): committed and
 * position from what was acknowledged and handed out, seek back to unacknowledged records,
 * metrics, escalation notices, and one WARN / one INFO per sidecar outage.
 */
class ConsumerAnswersTest {
  private static final TopicPartition P0 = new TopicPartition(TOPIC, 0);
  private static final TopicPartition P1 = new TopicPartition(TOPIC, 1);

  private FakeDeliveries sidecar;
  private InProcess grpc;
  private final List<OnceGuardConsumer<?, ?>> consumers = new ArrayList<>();

  @BeforeEach
  void start() {
    sidecar = new FakeDeliveries();
    grpc = new InProcess(sidecar);
  }

  @AfterEach
  void stop() {
    for (OnceGuardConsumer<?, ?> c : consumers) {
      c.close(CloseOptions.timeout(Duration.ofSeconds(1)));
    }
    grpc.close();
  }

  private Map<String, Object> config() {
    Map<String, Object> config = new HashMap<>();
    config.put(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE);
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    config.put(ConsumerConfig.CLIENT_ID_CONFIG, "answers");
    config.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, 5L);
    config.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 10L);
    return config;
  }

  private OnceGuardConsumer<String, String> consumer(Map<String, Object> config) {
    OnceGuardConsumer<String, String> c =
        new OnceGuardConsumer<>(grpc.channel, config, new StringDeserializer(), new StringDeserializer());
    consumers.add(c);
    return c;
  }

  private static List<ConsumerRecord<String, String>> poll(OnceGuardConsumer<String, String> c, int n) {
    List<ConsumerRecord<String, String>> all = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (all.size() < n && System.nanoTime() < deadline) {
      c.poll(Duration.ofMillis(100)).forEach(all::add);
    }
    assertThat(all).hasSize(n);
    return all;
  }

  private static List<ConsumerRecord<String, String>> poll0(OnceGuardConsumer<String, String> c) {
    List<ConsumerRecord<String, String>> all = new ArrayList<>();
    c.poll(Duration.ofMillis(50)).forEach(all::add);
    return all;
  }

  private static double metric(OnceGuardConsumer<?, ?> c, String name) {
    Map<MetricName, ? extends Metric> metrics = c.metrics();
    return metrics.entrySet().stream()
        .filter(e -> e.getKey().name().equals(name))
        .map(e -> (Double) e.getValue().metricValue())
        .findFirst()
        .orElseThrow(() -> new AssertionError("no metric " + name + " in " + metrics.keySet()));
  }

  @Test
  void committedAndPosition_answerFromAcknowledgedAndHandedOutRecords() {
    OnceGuardConsumer<String, String> c = consumer(config());
    c.subscribe(List.of(TOPIC));
    // out of offset order, as different entities of a partition may arrive
    sidecar.enqueue(delivery("a", 0, 7, "k7", "v"), delivery("b", 0, 3, "k3", "v"), delivery("c", 1, 10, "k10", "v"));
    poll(c, 3);

    assertThat(c.position(P0)).isEqualTo(8);
    assertThat(c.position(P1)).isEqualTo(11);
    assertThat(c.committed(Set.of(P0, P1))).containsEntry(P0, null).containsEntry(P1, null);

    c.commitSync(Map.of(P0, new OffsetAndMetadata(4))); // acknowledges offset 3 only
    assertThat(c.committed(Set.of(P0))).containsEntry(P0, new OffsetAndMetadata(4));
    assertThat(sidecar.ackedIds()).containsExactly("b");
    c.commitSync();
    assertThat(c.committed(Set.of(P0, P1), Duration.ofSeconds(1)))
        .containsEntry(P0, new OffsetAndMetadata(8))
        .containsEntry(P1, new OffsetAndMetadata(11));
    assertThat(c.committed(P1)).isEqualTo(new OffsetAndMetadata(11));

    TopicPartition other = new TopicPartition(TOPIC, 5);
    assertThatThrownBy(() -> c.position(other))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("assigned");
    assertThat(c.committed(Set.of(other))).containsEntry(other, null);
  }

  @Test
  void position_ofAPartitionAssignedAgainAfterTheStreamBroke_isNotWhereTheLostStreamWas() {
    OnceGuardConsumer<String, String> c = consumer(config());
    List<Long> positionsOnAssignment = new CopyOnWriteArrayList<>();
    // what Spring Kafka's container does on assignment (assignmentCommitOption LATEST_ONLY_NO_TX)
    c.subscribe(List.of(TOPIC), new org.apache.kafka.clients.consumer.ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(java.util.Collection<TopicPartition> partitions) {}

      @Override
      public void onPartitionsAssigned(java.util.Collection<TopicPartition> partitions) {
        if (partitions.contains(P0)) {
          positionsOnAssignment.add(c.position(P0));
        }
      }
    });
    sidecar.enqueue(delivery("a", 0, 7, "k7", "v"));
    poll(c, 1);
    assertThat(c.position(P0)).isEqualTo(8);

    // the stream breaks before offset 7 was acknowledged: the sidecar delivers it again
    sidecar.failCurrentStream(Status.UNAVAILABLE);
    List<ConsumerRecord<String, String>> again = poll(c, 1);

    assertThat(again).extracting(ConsumerRecord::offset).containsExactly(7L);
    assertThat(positionsOnAssignment).as("the next record to be returned is 7").containsExactly(7L, 7L);
    assertThat(c.position(P0)).isEqualTo(8);
  }

  @Test
  void seekBack_returnsUnacknowledgedRecordsAgain_andRefusesOtherMoves() {
    OnceGuardConsumer<String, String> c = consumer(config());
    c.subscribe(List.of(TOPIC));
    sidecar.enqueue(delivery("a", 0, 1, "k1", "v1"), delivery("b", 0, 2, "k2", "v2"), delivery("c", 0, 3, "k3", "v3"));
    poll(c, 3);
    c.commitSync(Map.of(P0, new OffsetAndMetadata(2))); // record 1 is final

    // what Spring Kafka's DefaultErrorHandler does after the listener failed on offset 2
    c.seek(P0, 2);
    assertThat(c.position(P0)).isEqualTo(2);
    List<ConsumerRecord<String, String>> again = poll(c, 2);
    assertThat(again).extracting(ConsumerRecord::offset).containsExactly(2L, 3L);
    assertThat(metric(c, "records-in-flight")).isEqualTo(2.0);

    c.commitSync();
    c.seek(P0, new OffsetAndMetadata(4)); // the position: a no-op
    assertThatThrownBy(() -> c.seek(P0, 1))
        .as("back to an acknowledged record")
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("escalation topic");
    assertThatThrownBy(() -> c.seek(P0, 100))
        .as("forward, past records without a verdict")
        .isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> c.seek(P1, 0)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> c.seekToBeginning(List.of(P0))).isInstanceOf(UnsupportedOperationException.class);

    assertThat(poll0(c)).isEmpty();
    assertThat(sidecar.ackedIds()).containsExactly("a", "b", "c"); // each once
  }

  @Test
  void metrics_countPolledAcknowledgedRejectedInFlightAndReconnects() throws Exception {
    OnceGuardConsumer<String, String> c = consumer(config());
    c.subscribe(List.of(TOPIC));
    sidecar.enqueue(delivery("a", 0, 1, "k1", "v"), delivery("b", 0, 2, "k2", "v"), delivery("c", 0, 3, "k3", "v"));
    List<ConsumerRecord<String, String>> records = poll(c, 3);
    assertThat(metric(c, "records-polled-total")).isEqualTo(3.0);
    assertThat(metric(c, "records-in-flight")).isEqualTo(3.0);
    c.reject(records.get(2), "bad");
    c.commitSync();
    assertThat(metric(c, "records-acknowledged-total")).isEqualTo(2.0);
    assertThat(metric(c, "records-rejected-total")).isEqualTo(1.0);
    assertThat(metric(c, "records-in-flight")).isEqualTo(0.0);
    assertThat(metric(c, "sidecar-reconnects-total")).isEqualTo(0.0);

    sidecar.failCurrentStream(Status.UNAVAILABLE);
    sidecar.enqueue(delivery("d", 0, 4, "k4", "v"));
    poll(c, 1);
    assertThat(metric(c, "sidecar-reconnects-total")).isEqualTo(1.0);
    assertThat(c.metrics().keySet()).allSatisfy(n -> {
      assertThat(n.group()).isEqualTo(ConsumerMetrics.GROUP);
      assertThat(n.tags()).containsEntry("client-id", "answers").containsEntry("route", ROUTE);
    });
    // a metrics reporter reads from its own thread, while the consumer is in use or closed
    Thread reader = new Thread(() -> c.metrics().values().forEach(Metric::metricValue));
    reader.start();
    reader.join();
    c.close();
    assertThat(metric(c, "records-polled-total")).isEqualTo(4.0);
  }

  @Test
  void escalationListener_receivesEachNotice_whichIsNeitherReturnedNorAcknowledged() {
    List<String> heard = new CopyOnWriteArrayList<>();
    Map<String, Object> config = config();
    config.put(OnceGuardConsumerConfig.ESCALATION_LISTENER_CONFIG, (EscalationListener) (record, verdict) -> {
      heard.add(verdict.reason() + " on " + verdict.entityId() + " " + record.topic() + "-" + record.partition() + "@"
          + record.offset() + " " + utf8(record.value()));
      if (heard.size() == 1) {
        throw new IllegalStateException("a listener that throws is logged and ignored");
      }
    });
    OnceGuardConsumer<String, String> c = consumer(config);
    c.subscribe(List.of(TOPIC));
    sidecar.enqueue(delivery("a", 0, 1, "o-1", "pay"));
    poll(c, 1);
    assertThat(sidecar.subscriptions()).singleElement().satisfies(s -> assertThat(s.getEscalations()).isTrue());

    sidecar.sendNotice(notice(0, 2, "o-17", Reason.ILLEGAL_TRANSITION));
    sidecar.sendNotice(notice(1, 9, "o-18", Reason.OUT_OF_ORDER));
    sidecar.enqueue(delivery("b", 0, 3, "o-2", "pay"));
    List<ConsumerRecord<String, String>> records = poll(c, 1);

    assertThat(records).extracting(ConsumerRecord::offset).containsExactly(3L);
    assertThat(heard).containsExactly(
        "ILLEGAL_TRANSITION on o-17 orders-0@2 {\"event\":\"pay\"}", "OUT_OF_ORDER on o-18 orders-1@9 {\"event\":\"pay\"}");
    assertThat(c.assignment()).as("a notice does not assign its partition").containsExactly(P0);
    c.commitSync();
    assertThat(sidecar.ackedIds()).containsExactly("a", "b");
    assertThat(metric(c, "escalation-notices-total")).isEqualTo(2.0);
  }

  @Test
  void withoutEscalationListener_theSubscriptionDoesNotAskForNotices() {
    OnceGuardConsumer<String, String> c = consumer(config());
    c.setEscalationListener((r, v) -> {});
    c.setEscalationListener(null);
    c.subscribe(List.of(TOPIC));
    c.poll(Duration.ofMillis(50));
    assertThat(sidecar.subscriptions()).singleElement().satisfies(s -> assertThat(s.getEscalations()).isFalse());
  }

  private static Delivery notice(int partition, long offset, String entity, Reason reason) {
    Delivery d = delivery("unused", partition, offset, entity, "{\"event\":\"pay\"}");
    return d.toBuilder()
        .setDeliveryId("")
        .setEscalation(dev.onceguard.v1.Verdict.newBuilder()
            .setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE)
            .setReason(reason)
            .setEntityId(entity)
            .setRoute(ROUTE))
        .build();
  }

  @Test
  void sidecarAway_logsOneWarn_thenOneInfoWithTheRetryCount() throws Exception {
    Logger logger = (Logger) LoggerFactory.getLogger(PullConsumer.class);
    ListAppender<ILoggingEvent> appender = new ListAppender<>();
    appender.start();
    Level before = logger.getLevel();
    logger.setLevel(Level.INFO);
    logger.addAppender(appender);
    try {
      OnceGuardConsumer<String, String> c = consumer(config());
      c.subscribe(List.of(TOPIC));
      sidecar.enqueue(delivery("a", 0, 1, "k1", "v"));
      poll(c, 1);
      c.commitSync();

      sidecar.refuseSubscriptions(Status.UNAVAILABLE.withDescription("sidecar restarting"));
      sidecar.failCurrentStream(Status.UNAVAILABLE.withDescription("connection reset"));
      long until = System.nanoTime() + Duration.ofMillis(400).toNanos();
      while (System.nanoTime() < until) {
        c.poll(Duration.ofMillis(20));
      }
      int refused = sidecar.subscriptions().size() - 1;
      assertThat(refused).as("resubscriptions tried while the sidecar was away").isGreaterThanOrEqualTo(5);

      sidecar.refuseSubscriptions(null);
      // no delivery: an idle stream counts as back once it stayed connected for a while
      c.poll(Duration.ofMillis(900));

      List<ILoggingEvent> events = List.copyOf(appender.list);
      Map<Level, List<String>> byLevel = events.stream().collect(
          Collectors.groupingBy(ILoggingEvent::getLevel, Collectors.mapping(ILoggingEvent::getFormattedMessage, Collectors.toList())));
      assertThat(byLevel.get(Level.WARN)).singleElement().asString()
          .contains("broke").contains("UNAVAILABLE").contains("connection reset");
      assertThat(byLevel.get(Level.INFO)).singleElement().asString()
          .contains("is back after " + refused + " failed resubscription(s)");
      assertThat(events).allSatisfy(e -> assertThat(e.getThrowableProxy()).as("no stack trace").isNull());
      assertThat(new HashSet<>(sidecar.ackedIds())).containsExactly("a");
    } finally {
      logger.detachAppender(appender);
      logger.setLevel(before);
    }
  }
}
