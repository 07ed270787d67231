package dev.onceguard.it;

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
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The test side of Kafka: unique topics, producing, and reading back what the sidecar did (the
 * group's committed offsets, the topic's end offsets, every record). Deletes the topics it created
 * on close. Not thread-safe; one per test class or test.
 */
public final class KafkaSupport implements AutoCloseable {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private final String bootstrap;
  private final short replicationFactor;
  private final Admin admin;
  private final List<String> created = new ArrayList<>();

  public KafkaSupport() {
    this(ItEnv.kafkaBootstrap());
  }

  public KafkaSupport(String bootstrap) {
    this(bootstrap, (short) 1);
  }

  /** Topics it creates get {@code replicationFactor} replicas (3 on the local cluster stack). */
  public KafkaSupport(String bootstrap, short replicationFactor) {
    this.bootstrap = bootstrap;
    this.replicationFactor = replicationFactor;
    this.admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
  }

  public String bootstrap() {
    return bootstrap;
  }

  /** Creates {@code <prefix>-<random>} with {@code partitions} partitions and waits until it exists. */
  public String createTopic(String prefix, int partitions) {
    return createTopicNamed(prefix + "-" + ItEnv.uniqueSuffix(), partitions);
  }

  /** Creates exactly {@code name} (deleted on close) and waits until it exists. */
  public String createTopicNamed(String name, int partitions) {
    get(admin.createTopics(List.of(new NewTopic(name, partitions, replicationFactor))).all());
    created.add(name);
    return name;
  }

  /** Whether the broker lists {@code name}. */
  public boolean topicExists(String name) {
    return get(admin.listTopics().names()).contains(name);
  }

  /** Deletes {@code name} now and waits until the broker no longer lists it. */
  public void deleteTopic(String name) throws InterruptedException {
    get(admin.deleteTopics(List.of(name)).all());
    created.remove(name);
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    while (topicExists(name)) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("topic " + name + " still listed " + TIMEOUT + " after its deletion");
      }
      TimeUnit.MILLISECONDS.sleep(100);
    }
  }

  /** Deletes {@code names} on close too (topics something else created, such as the sidecar). */
  public void deleteOnClose(String... names) {
    created.addAll(List.of(names));
  }

  /** A producer with the settings {@link #produce} uses (acks=all, idempotent, one request in flight). */
  public static KafkaProducer<byte[], byte[]> producer(String bootstrap) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    // One request in flight: tests produce right after createTopic, when the broker may not lead
    // every partition yet. With several in flight, a first request can fail NOT_LEADER_OR_FOLLOWER
    // while a later one (higher sequence numbers) is appended once the partition is ready; the
    // retries of the first then fail OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms
    // (KAFKA-14359 / KAFKA-15591; seen here as "Expiring N record(s) ... 120001 ms").
    p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
  }

  /** Sends all records (acks=all, idempotent) and waits for every acknowledgement. */
  public List<RecordMetadata> produce(Collection<ProducerRecord<byte[], byte[]>> records) {
    try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap)) {
      List<Future<RecordMetadata>> fs = new ArrayList<>();
      for (ProducerRecord<byte[], byte[]> r : records) {
        fs.add(producer.send(r));
      }
      producer.flush();
      List<RecordMetadata> out = new ArrayList<>();
      for (Future<RecordMetadata> f : fs) {
        out.add(get(f));
      }
      return out;
    }
  }

  /** The group's committed offsets for the topic's partitions; a partition without a commit is absent. */
  public Map<TopicPartition, Long> committedOffsets(String group, String topic) {
    Map<TopicPartition, OffsetAndMetadata> all = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
    Map<TopicPartition, Long> out = new HashMap<>();
    all.forEach((tp, om) -> {
      if (tp.topic().equals(topic) && om != null) {
        out.put(tp, om.offset());
      }
    });
    return out;
  }

  /** Every consumer group that has an offset committed for a partition of {@code topic}. */
  public List<String> groupsWithOffsetsOn(String topic) {
    List<String> out = new ArrayList<>();
    for (var g : get(admin.listConsumerGroups().all())) {
      if (!committedOffsets(g.groupId(), topic).isEmpty()) {
        out.add(g.groupId());
      }
    }
    return out;
  }

  /** Committed offset of one partition, -1 if none. */
  public long committedOffset(String group, TopicPartition tp) {
    return committedOffsets(group, tp.topic()).getOrDefault(tp, -1L);
  }

  public Map<TopicPartition, Long> endOffsets(String topic) {
    int n = partitionCount(topic);
    Map<TopicPartition, OffsetSpec> req = IntStream.range(0, n).boxed()
        .collect(Collectors.toMap(i -> new TopicPartition(topic, i), i -> OffsetSpec.latest()));
    Map<TopicPartition, Long> out = new HashMap<>();
    get(admin.listOffsets(req).all()).forEach((tp, info) -> out.put(tp, info.offset()));
    return out;
  }

  public int partitionCount(String topic) {
    return get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).partitions().size();
  }

  /** Members of the group that currently own at least one partition. */
  public int activeMembers(String group) {
    ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
    return (int) d.members().stream().filter(m -> !m.assignment().topicPartitions().isEmpty()).count();
  }

  /** Every record of the topic, from the beginning to the end offsets at the time of the call. */
  public List<ConsumerRecord<byte[], byte[]>> readAll(String topic) {
    Map<TopicPartition, Long> end = endOffsets(topic);
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      c.assign(end.keySet());
      c.seekToBeginning(end.keySet());
      long deadline = System.nanoTime() + TIMEOUT.toNanos();
      while (end.entrySet().stream().anyMatch(e -> c.position(e.getKey()) < e.getValue())) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("could not read " + topic + " to its end offsets " + end + " within " + TIMEOUT);
        }
        c.poll(Duration.ofMillis(200)).forEach(out::add);
      }
    }
    return out;
  }

  @Override
  public void close() {
    try {
      if (!created.isEmpty()) {
        admin.deleteTopics(created).all().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (ExecutionException | TimeoutException e) {
      // best effort: the broker is private to this checkout and wiped by `stack.sh down`
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      admin.close(Duration.ofSeconds(10));
    }
  }

  private static <T> T get(Future<T> f) {
    try {
      return f.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    } catch (ExecutionException e) {
      throw new IllegalStateException("Kafka request failed: " + e.getCause(), e.getCause());
    } catch (TimeoutException e) {
      throw new IllegalStateException("Kafka request did not finish within " + TIMEOUT, e);
    }
  }
}
