package dev.onceguard.demo;

import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.api.StatefulRedisConnection;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The demo's hands on the outside world: produces the story's records, reads the verdict topic
 * and matches every verdict to the record it is about (by the {@code onceguard-original-*}
 * headers and the verdict's route), deletes the demo's Redis keys, and reads the escalation topic.
 * Single-threaded: everything runs on the caller's thread (the Kafka consumer is polled only
 * while the caller waits).
 */
final class Driver implements AutoCloseable {
  private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(30);

  private final DemoLayout layout;
  private final Settings settings;
  private final Admin admin;
  private KafkaProducer<byte[], byte[]> producer;
  private KafkaConsumer<byte[], byte[]> verdicts;
  private final Map<String, Input> byCoordinates = new HashMap<>();
  private final List<Input> sent = new ArrayList<>();
  private final List<String> strays = new ArrayList<>();
  private int verdictsSeen;

  Driver(DemoLayout layout, Settings settings) {
    this.layout = layout;
    this.settings = settings;
    this.admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, settings.kafkaBootstrap(),
        AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000", AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000"));
  }

  // --------------------------------------------------------------------------------- setup

  /** Creates the source, verdict and escalation topics; existing ones are kept. */
  void createTopics() {
    List<NewTopic> topics = new ArrayList<>();
    DemoLayout.SOURCE_TOPICS.forEach((name, partitions) -> topics.add(new NewTopic(layout.topic(name), partitions, (short) 1)));
    topics.add(new NewTopic(layout.verdictTopic(), 1, (short) 1));
    topics.add(new NewTopic(layout.escalationTopic(), 1, (short) 1));
    admin.createTopics(topics).values().forEach((name, f) -> {
      try {
        f.get(REQUEST_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      } catch (ExecutionException e) {
        if (!(e.getCause() instanceof TopicExistsException)) {
          throw new DemoFailure("cannot create topic " + name + " on " + settings.kafkaBootstrap() + ": " + e.getCause().getMessage(), e);
        }
      } catch (TimeoutException e) {
        throw new DemoFailure("Kafka at " + settings.kafkaBootstrap() + " did not create topic " + name + " within " + REQUEST_TIMEOUT);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new DemoFailure("interrupted");
      }
    });
  }

  /** Deletes every Redis key under the demo's prefix; returns how many. */
  long deleteRedisKeys() {
    RedisClient client = RedisClient.create(settings.redisUri());
    try (StatefulRedisConnection<String, String> conn = client.connect()) {
      long n = 0;
      ScanCursor cursor = ScanCursor.INITIAL;
      do {
        var page = conn.sync().scan(cursor, ScanArgs.Builder.matches(settings.redisPrefix() + "*").limit(1000));
        if (!page.getKeys().isEmpty()) {
          n += conn.sync().del(page.getKeys().toArray(new String[0]));
        }
        cursor = page;
      } while (!cursor.isFinished());
      return n;
    } catch (RuntimeException e) {
      throw new DemoFailure("cannot delete the demo's Redis keys at " + settings.redisUri() + ": " + e.getMessage(), e);
    } finally {
      client.shutdown();
    }
  }

  // --------------------------------------------------------------------------------- run

  /** Opens the producer and the verdict reader (from the verdict topic's beginning). */
  void open() {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, settings.kafkaBootstrap());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    p.put(ProducerConfig.CLIENT_ID_CONFIG, "onceguard-demo-producer");
    producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    verdicts = reader();
    TopicPartition tp = new TopicPartition(layout.verdictTopic(), 0);
    verdicts.assign(List.of(tp));
    verdicts.seekToBeginning(List.of(tp));
  }

  private KafkaConsumer<byte[], byte[]> reader() {
    Properties c = new Properties();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, settings.kafkaBootstrap());
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    c.put(ConsumerConfig.CLIENT_ID_CONFIG, "onceguard-demo-reader");
    return new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  /** Waits until every route's consumer group has a member with partitions: the sidecar consumes. */
  void awaitSidecarConsuming(Duration timeout) {
    List<String> groups = layout.routes().stream().map(DemoLayout.Route::group).toList();
    long deadline = System.nanoTime() + timeout.toNanos();
    List<String> waiting = groups;
    while (System.nanoTime() < deadline) {
      try {
        Map<String, ConsumerGroupDescription> d = admin.describeConsumerGroups(groups).all().get(10, TimeUnit.SECONDS);
        waiting = groups.stream().filter(g -> d.get(g) == null
            || d.get(g).members().stream().allMatch(m -> m.assignment().topicPartitions().isEmpty())).toList();
        if (waiting.isEmpty()) {
          return;
        }
      } catch (ExecutionException | TimeoutException e) {
        // a group the broker does not know yet: keep waiting
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new DemoFailure("interrupted");
      }
      sleep(250);
    }
    throw new DemoFailure("the sidecar did not join its consumer groups within " + timeout.toSeconds() + " s (still waiting: " + waiting
        + "); is it running? see its log");
  }

  /** Produces the inputs in order, waits for every acknowledgement, and records their coordinates. */
  void send(List<Input> inputs) {
    List<Future<RecordMetadata>> acks = new ArrayList<>();
    for (Input in : inputs) {
      ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(layout.topic(in.topic), in.partition, null,
          in.key == null ? null : in.key.getBytes(StandardCharsets.UTF_8), in.value);
      r.headers().add("demo-label", in.label.getBytes(StandardCharsets.UTF_8));
      acks.add(producer.send(r));
    }
    producer.flush();
    for (int i = 0; i < inputs.size(); i++) {
      Input in = inputs.get(i);
      RecordMetadata md;
      try {
        md = acks.get(i).get(REQUEST_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      } catch (ExecutionException | TimeoutException e) {
        throw new DemoFailure("could not produce '" + in.label + "' to " + layout.topic(in.topic) + ": " + e, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new DemoFailure("interrupted");
      }
      in.sentPartition = md.partition();
      in.sentOffset = md.offset();
      in.sentAtMillis = md.timestamp();
      byCoordinates.put(coordinates(md.topic(), md.partition(), md.offset()), in);
      sent.add(in);
    }
  }

  /** Reads verdicts for {@code d}. */
  void poll(Duration d) {
    long until = System.nanoTime() + d.toNanos();
    for (long left = d.toMillis(); left > 0; left = TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime())) {
      for (ConsumerRecord<byte[], byte[]> r : verdicts.poll(Duration.ofMillis(Math.min(left, 100)))) {
        take(r);
      }
    }
  }

  /**
   * Reads verdicts until every route of every input has decided.
   *
   * @throws DemoFailure naming the undecided records when {@code timeout} passes first
   */
  void await(Collection<Input> inputs, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!inputs.stream().allMatch(Input::decided)) {
      if (System.nanoTime() > deadline) {
        String missing = inputs.stream().filter(i -> !i.decided())
            .map(i -> "'" + i.label + "' (" + layout.topic(i.topic) + " p" + i.sentPartition + "@" + i.sentOffset + ", waiting for route(s) "
                + i.routes().stream().filter(r -> !i.decisions.containsKey(r)).collect(Collectors.joining(", ")) + ")")
            .collect(Collectors.joining("; "));
        String hint = verdictsSeen == 0
            ? " (no verdict at all arrived yet: is the sidecar running, and does this build publish to the verdict-topic? see its log)"
            : "";
        throw new DemoFailure("no verdict on " + layout.verdictTopic() + " within " + timeout.toSeconds() + " s for " + missing + hint);
      }
      poll(Duration.ofMillis(100));
    }
  }

  private void take(ConsumerRecord<byte[], byte[]> r) {
    verdictsSeen++;
    Verdict v;
    try {
      v = Verdict.parseFrom(r.value());
    } catch (com.google.protobuf.InvalidProtocolBufferException e) {
      strays.add("unreadable verdict at offset " + r.offset() + ": " + e.getMessage());
      return;
    }
    String topic = header(r, Headers.ORIGINAL_TOPIC);
    String partition = header(r, Headers.ORIGINAL_PARTITION);
    String offset = header(r, Headers.ORIGINAL_OFFSET);
    if (topic == null || partition == null || offset == null) {
      strays.add("verdict at offset " + r.offset() + " lacks the " + Headers.ORIGINAL_TOPIC + "/-partition/-offset headers");
      return;
    }
    if (!v.getDisposition().name().equals(header(r, Headers.DISPOSITION)) || !v.getReason().name().equals(header(r, Headers.REASON))) {
      strays.add("verdict at offset " + r.offset() + ": headers " + header(r, Headers.DISPOSITION) + "/" + header(r, Headers.REASON)
          + " disagree with the value " + v.getDisposition() + "/" + v.getReason());
    }
    Input in = byCoordinates.get(coordinates(topic, Integer.parseInt(partition), Long.parseLong(offset)));
    if (in == null) {
      strays.add("verdict for a record the demo did not send: " + topic + " p" + partition + "@" + offset + " (" + v.getRoute() + ")");
      return;
    }
    if (!in.routes().contains(v.getRoute())) {
      strays.add("verdict from unexpected route " + v.getRoute() + " for '" + in.label + "'");
      return;
    }
    if (in.decisions.containsKey(v.getRoute())) {
      strays.add("second verdict for '" + in.label + "' on route " + v.getRoute() + ": " + v.getDisposition() + "/" + v.getReason());
      return;
    }
    in.decisions.put(v.getRoute(), new Input.Decision(v, r.timestamp()));
  }

  /** Every record of the escalation topic, up to its end offset now. */
  List<ConsumerRecord<byte[], byte[]>> readEscalations() {
    TopicPartition tp = new TopicPartition(layout.escalationTopic(), 0);
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> c = reader()) {
      c.assign(List.of(tp));
      c.seekToBeginning(List.of(tp));
      long end = c.endOffsets(List.of(tp)).get(tp);
      long deadline = System.nanoTime() + REQUEST_TIMEOUT.toNanos();
      while (c.position(tp) < end) {
        if (System.nanoTime() > deadline) {
          throw new DemoFailure("could not read " + layout.escalationTopic() + " to its end (" + end + ")");
        }
        c.poll(Duration.ofMillis(200)).forEach(out::add);
      }
    }
    return out;
  }

  /** The records of {@code escalations} that are {@code in} escalated by {@code route}. */
  List<ConsumerRecord<byte[], byte[]>> escalationsOf(List<ConsumerRecord<byte[], byte[]>> escalations, Input in, String route) {
    return escalations.stream()
        .filter(e -> layout.topic(in.topic).equals(header(e, Headers.ORIGINAL_TOPIC))
            && String.valueOf(in.sentPartition).equals(header(e, Headers.ORIGINAL_PARTITION))
            && String.valueOf(in.sentOffset).equals(header(e, Headers.ORIGINAL_OFFSET))
            && route.equals(header(e, Headers.ROUTE)))
        .toList();
  }

  List<Input> sent() {
    return sent;
  }

  /** Verdicts that matched nothing the demo sent, or came twice. */
  List<String> strays() {
    return strays;
  }

  static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private static String coordinates(String topic, int partition, long offset) {
    return topic + "/" + partition + "@" + offset;
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new DemoFailure("interrupted");
    }
  }

  @Override
  public void close() {
    if (producer != null) {
      producer.close();
    }
    if (verdicts != null) {
      verdicts.close();
    }
    admin.close(Duration.ofSeconds(5));
  }
}
