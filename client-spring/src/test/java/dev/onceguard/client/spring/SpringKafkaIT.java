package dev.onceguard.client.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.client.GuardClient;
import dev.onceguard.client.LedgerEntry;
import dev.onceguard.client.OnceGuardConsumerConfig;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.kafka.listener.AcknowledgingMessageListener;
import org.springframework.kafka.listener.BatchMessageListener;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.ContainerProperties.AckMode;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.util.backoff.FixedBackOff;

/**
 * A real Spring Kafka {@link ConcurrentMessageListenerContainer} over {@link OnceGuardConsumerFactory},
 * against a real sidecar process, Kafka, MariaDB and Redis. Run by two Failsafe executions: with
 * spring-kafka 4.x on kafka-clients 4.x, and with spring-kafka 3.3 on kafka-clients 3.9.
 */
class SpringKafkaIT {
  private static final Duration DEADLINE = Duration.ofSeconds(60);
  private static final String S = SidecarProcess.SUFFIX;
  private static final String[] ROUTES = {"batch", "record", "manual"};

  private static SidecarProcess sidecar;
  private static GuardClient guard;

  @BeforeAll
  static void start() throws Exception {
    String expected = System.getProperty("spring.kafka.expected", "");
    String running = org.springframework.kafka.core.ConsumerFactory.class.getPackage().getImplementationVersion();
    assertThat(running).as("the spring-kafka this execution put on the classpath").startsWith(expected);
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", SidecarProcess.bootstrap()))) {
      List<NewTopic> topics = new ArrayList<>();
      for (String r : ROUTES) {
        topics.add(new NewTopic(topic(r), 2, (short) 1));
        topics.add(new NewTopic(topic(r) + ".escalate", 1, (short) 1));
      }
      admin.createTopics(topics).all().get();
    }
    StringBuilder routes = new StringBuilder();
    for (String r : ROUTES) {
      routes.append("""
            - name: %s
              topics: [%s]
              machine: order
              entity-id: /order_id
              event: /event
              business-key: [/order_id]
              mode: pull
              handler-timeout: 60s
              retry: {max-attempts: 3}
          """.formatted(r, topic(r)));
    }
    sidecar = SidecarProcess.start(routes.toString());
    guard = GuardClient.forTarget(sidecar.target());
  }

  @AfterAll
  static void stop() throws Exception {
    if (guard != null) {
      guard.close();
    }
    if (sidecar != null) {
      sidecar.close();
    }
  }

  private static String topic(String route) {
    return "spring-" + route + "-" + S;
  }

  private static String order(String route, int i) {
    return route + "-" + S + "-" + i;
  }

  private static String value(String route, int i, String event) {
    return "{\"order_id\":\"" + order(route, i) + "\",\"event\":\"" + event + "\"}";
  }

  /**
   * Produces the standard stream: orders 1, 2, 4 created and paid, order 3 created and
   * cancelled, an exact copy of two records (duplicates), and "pay" after "cancel" on order 3 (an
   * illegal transition). Returns the
   * values the listener must see, each once.
   */
  private static List<String> produceStandard(String route, List<ProducerRecord<String, String>> extra) {
    List<ProducerRecord<String, String>> records = new ArrayList<>();
    List<String> accepted = new ArrayList<>();
    for (int i = 1; i <= 4; i++) {
      for (String event : List.of("create", i == 3 ? "cancel" : "pay")) {
        records.add(new ProducerRecord<>(topic(route), order(route, i), value(route, i, event)));
        accepted.add(value(route, i, event));
      }
    }
    records.add(new ProducerRecord<>(topic(route), order(route, 1), value(route, 1, "create")));
    records.add(new ProducerRecord<>(topic(route), order(route, 2), value(route, 2, "pay")));
    records.add(new ProducerRecord<>(topic(route), order(route, 3), value(route, 3, "pay"))); // after cancel
    records.addAll(extra);
    produce(records);
    return accepted;
  }

  private static void produce(List<ProducerRecord<String, String>> records) {
    Map<String, Object> p = Map.of("bootstrap.servers", SidecarProcess.bootstrap(), "acks", "all");
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (ProducerRecord<String, String> r : records) {
        producer.send(r);
        producer.flush(); // in order: pay after create, cancel after pay
      }
    }
  }

  private static OnceGuardConsumerFactory<String, String> factory(String route, List<String> escalations) {
    Map<String, Object> config = new HashMap<>();
    config.put(OnceGuardConsumerConfig.TARGET_CONFIG, sidecar.target());
    config.put(OnceGuardConsumerConfig.ROUTE_CONFIG, route);
    OnceGuardConsumerFactory<String, String> f =
        new OnceGuardConsumerFactory<>(config, new StringDeserializer(), new StringDeserializer());
    f.setEscalationListener((record, verdict) -> escalations.add(verdict.reason() + " " + verdict.entityId() + " "
        + verdict.event()));
    return f;
  }

  private static ConcurrentMessageListenerContainer<String, String> container(
      OnceGuardConsumerFactory<String, String> factory, String route, AckMode ackMode, Object listener) {
    ContainerProperties props = new ContainerProperties(topic(route));
    props.setAckMode(ackMode);
    props.setMessageListener(listener);
    props.setPollTimeout(200);
    props.setGroupId("spring-it-" + route); // ignored by OnceGuard: the route's group is the sidecar's
    ConcurrentMessageListenerContainer<String, String> c = new ConcurrentMessageListenerContainer<>(factory, props);
    c.setConcurrency(2);
    return c;
  }

  private static void await(String what, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("not within " + DEADLINE + ": " + what + "; sidecar log:\n" + sidecar.tail());
      }
      Thread.sleep(100);
    }
  }

  /** {@code event status} of the entity's ledger rows. */
  private static Set<String> ledger(String route, int i) {
    return guard.explainEntity(route, order(route, i)).ledger().stream()
        .map(e -> e.event() + " " + e.status())
        .collect(Collectors.toSet());
  }

  private static List<LedgerEntry> ledgerRows(String route, int i) {
    return guard.explainEntity(route, order(route, i)).ledger();
  }

  private static List<ConsumerRecord<byte[], byte[]>> escalationTopic(String route, int expected) throws InterruptedException {
    Properties p = new Properties();
    p.put("bootstrap.servers", SidecarProcess.bootstrap());
    p.put("group.id", "spring-it-esc-" + S + "-" + route + "-" + System.nanoTime()); // reads from the start each time
    p.put("auto.offset.reset", "earliest");
    p.put("enable.auto.commit", "false");
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      c.subscribe(List.of(topic(route) + ".escalate"));
      long deadline = System.nanoTime() + DEADLINE.toNanos();
      while (out.size() < expected && System.nanoTime() < deadline) {
        c.poll(Duration.ofMillis(200)).forEach(out::add);
      }
    }
    return out;
  }

  private static String header(ConsumerRecord<?, ?> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  /** The checks every ack mode shares: each accepted fact once, duplicates dropped, the illegal one escalated. */
  private static void assertStandardOutcome(String route, List<String> received, List<String> accepted, List<String> escalations)
      throws InterruptedException {
    assertThat(received).as("each accepted fact exactly once, no duplicate").containsExactlyInAnyOrderElementsOf(accepted);
    await("escalation listener heard the illegal pay", () -> escalations.contains(
        "ILLEGAL_TRANSITION " + order(route, 3) + " pay"));
    for (int i = 1; i <= 4; i++) {
      int n = i;
      Set<String> done = Set.of("create DONE", (i == 3 ? "cancel" : "pay") + " DONE");
      await("ledger of " + order(route, i) + " " + done, () -> ledger(route, n).equals(done));
    }
    List<ConsumerRecord<byte[], byte[]>> esc = escalationTopic(route, 1);
    assertThat(esc).anySatisfy(r -> {
      assertThat(header(r, Headers.REASON)).isEqualTo("ILLEGAL_TRANSITION");
      assertThat(new String(r.value(), StandardCharsets.UTF_8)).isEqualTo(value(route, 3, "pay"));
    });
  }

  @Test
  void ackModeBatch_eachAcceptedFactOnce_duplicatesDropped_illegalEscalated() throws Exception {
    String route = "batch";
    List<String> received = new CopyOnWriteArrayList<>();
    List<String> escalations = new CopyOnWriteArrayList<>();
    var container = container(factory(route, escalations), route, AckMode.BATCH,
        (BatchMessageListener<String, String>) batch -> batch.forEach(r -> received.add(r.value())));
    container.start();
    try {
      List<String> accepted = produceStandard(route, List.of());
      await("8 accepted records", () -> received.size() >= accepted.size());
      assertStandardOutcome(route, received, accepted, escalations);
    } finally {
      container.stop();
    }
  }

  @Test
  void ackModeRecord_aRecordTheListenerCannotParse_isRetriedBySeekThenRejectedAndEscalated() throws Exception {
    String route = "record";
    List<String> received = new CopyOnWriteArrayList<>();
    List<String> escalations = new CopyOnWriteArrayList<>();
    List<String> failures = new CopyOnWriteArrayList<>();
    var container = container(factory(route, escalations), route, AckMode.RECORD,
        (MessageListener<String, String>) r -> {
          Header priority = r.headers().lastHeader("x-priority");
          if (priority != null) {
            failures.add(r.value());
            Integer.parseInt(new String(priority.value(), StandardCharsets.UTF_8)); // "urgent!": cannot parse
          }
          received.add(r.value());
        });
    // the documented treatment of bad input the application cannot read: retry, then reject
    container.setCommonErrorHandler(new DefaultErrorHandler(OnceGuardConsumerFactory.rejectingRecoverer(), new FixedBackOff(0, 1)));
    container.start();
    try {
      ProducerRecord<String, String> unreadable = new ProducerRecord<>(topic(route), order(route, 5), value(route, 5, "create"));
      unreadable.headers().add("x-priority", "urgent!".getBytes(StandardCharsets.UTF_8));
      List<String> accepted = produceStandard(route, List.of(unreadable));
      await("8 accepted records", () -> received.size() >= accepted.size());
      assertStandardOutcome(route, received, accepted, escalations);

      await("the unreadable record rejected", () -> ledger(route, 5).equals(Set.of("create REJECTED")));
      assertThat(failures).as("delivered, then returned again by the error handler's seek").containsExactly(
          value(route, 5, "create"), value(route, 5, "create"));
      await("escalation listener heard the rejection", () -> escalations.contains("BUSINESS_REJECTED " + order(route, 5) + " create"));
      assertThat(escalationTopic(route, 2)).anySatisfy(r -> {
        assertThat(header(r, Headers.REASON)).isEqualTo("BUSINESS_REJECTED");
        assertThat(header(r, Headers.DETAIL)).contains("urgent!");
        assertThat(header(r, "x-priority")).isEqualTo("urgent!");
      });
    } finally {
      container.stop();
    }
  }

  @Test
  void ackModeManual_unacknowledgedRecordStaysPending_andComesBackAfterContainerRestart() throws Exception {
    String route = "manual";
    List<String> received = new CopyOnWriteArrayList<>();
    List<String> redelivered = new CopyOnWriteArrayList<>();
    List<String> escalations = new CopyOnWriteArrayList<>();
    List<Boolean> holdBack = new CopyOnWriteArrayList<>(List.of(true));
    String held = value(route, 9, "create");
    var container = container(factory(route, escalations), route, AckMode.MANUAL,
        (AcknowledgingMessageListener<String, String>) (r, ack) -> {
          if ("true".equals(header(r, Headers.REDELIVERY))) {
            redelivered.add(r.value());
          }
          received.add(r.value());
          if (!(holdBack.get(0) && r.value().equals(held))) {
            ack.acknowledge();
          }
        });
    container.start();
    List<String> accepted;
    try {
      // the held record is the last one produced: no later acknowledgement of its partition covers it
      accepted = produceStandard(route, List.of(new ProducerRecord<>(topic(route), order(route, 9), held)));
      await("9 accepted records", () -> received.size() >= accepted.size() + 1);
      assertStandardOutcome(route, received.stream().filter(v -> !v.equals(held)).toList(), accepted, escalations);
      assertThat(ledger(route, 9)).as("not acknowledged: still claimed").isEqualTo(Set.of("create PENDING"));
    } finally {
      container.stop();
    }
    assertThat(ledgerRows(route, 9)).singleElement().satisfies(e -> assertThat(e.status()).isEqualTo("PENDING"));

    // stop/start: the unacknowledged record comes back, flagged, and nothing else is repeated
    holdBack.set(0, false);
    container.start();
    try {
      await("the held record redelivered", () -> redelivered.contains(held));
      await("the held record DONE", () -> ledger(route, 9).equals(Set.of("create DONE")));
      Thread.sleep(500); // anything else redelivered would show up by now
      Map<String, Long> counts = received.stream().collect(Collectors.groupingBy(v -> v, Collectors.counting()));
      assertThat(counts).as("only the held record was seen twice").containsEntry(held, 2L);
      assertThat(counts.entrySet().stream().filter(e -> !e.getKey().equals(held)).map(Map.Entry::getValue))
          .allMatch(n -> n == 1L);
      assertThat(redelivered).containsExactly(held);
    } finally {
      container.stop();
    }
  }

  @Test
  void factory_appliesContainerOverrides_andTellsListeners() {
    List<String> escalations = new ArrayList<>();
    OnceGuardConsumerFactory<String, String> f = factory("batch", escalations);
    List<String> added = new ArrayList<>();
    f.addListener(new org.springframework.kafka.core.ConsumerFactory.Listener<>() {
      @Override
      public void consumerAdded(String id, org.apache.kafka.clients.consumer.Consumer<String, String> consumer) {
        added.add(id);
      }
    });
    Properties overrides = new Properties();
    overrides.setProperty("enable.auto.commit", "false");
    try (var consumer = f.createConsumer("group", "client", "-0", overrides)) {
      assertThat(consumer).isInstanceOf(dev.onceguard.client.OnceGuardConsumer.class);
      assertThat(consumer.metrics().keySet()).allSatisfy(n -> assertThat(n.tags()).containsEntry("client-id", "client-0"));
    }
    assertThat(added).containsExactly("client-0");
    assertThat(f.isAutoCommit()).isTrue();
    assertThat(f.getConfigurationProperties()).containsEntry(OnceGuardConsumerConfig.ROUTE_CONFIG, "batch");
  }
}
