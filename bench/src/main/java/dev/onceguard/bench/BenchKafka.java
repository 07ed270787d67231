package dev.onceguard.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Topics and producers of the benchmark; {@link #close()} deletes the topics it created. */
final class BenchKafka implements AutoCloseable {
  private final Admin admin;
  private final KafkaProducer<byte[], byte[]> producer;
  private final List<String> created = new ArrayList<>();

  BenchKafka(String bootstrap) {
    Properties a = new Properties();
    a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    admin = Admin.create(a);
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "2");
    // fresh topics: see the integration tests' KafkaSupport (KAFKA-14359)
    p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
    producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
  }

  String createTopic(String prefix, int partitions) throws Exception {
    return createTopicNamed(prefix + "-" + UUID.randomUUID().toString().substring(0, 8), partitions);
  }

  String createTopicNamed(String name, int partitions) throws Exception {
    admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
    created.add(name);
    return name;
  }

  /** Sends everything and waits until the broker acknowledged it. */
  void produce(String topic, List<byte[][]> records) {
    for (byte[][] r : records) {
      producer.send(new ProducerRecord<>(topic, r[0], r[1]));
    }
    producer.flush();
  }

  /** Sends at {@code perSecond}, on a fixed schedule (a late send does not shift the next). */
  Acks producePaced(String topic, List<byte[][]> records, int perSecond) throws InterruptedException {
    long start = System.nanoTime();
    long every = TimeUnit.SECONDS.toNanos(1) / perSecond;
    AtomicLongArray ackMicros = new AtomicLongArray(records.size());
    for (int i = 0; i < records.size(); i++) {
      long due = start + i * every;
      long wait = due - System.nanoTime();
      if (wait > 0) {
        TimeUnit.NANOSECONDS.sleep(wait);
      }
      long sentAt = System.nanoTime();
      int k = i;
      producer.send(new ProducerRecord<>(topic, records.get(i)[0], records.get(i)[1]),
          (meta, err) -> ackMicros.set(k, err == null ? Math.max(1, (System.nanoTime() - sentAt) / 1_000) : -1));
    }
    producer.flush();
    long[] micros = new long[ackMicros.length()];
    for (int i = 0; i < micros.length; i++) {
      micros[i] = ackMicros.get(i);
    }
    return Acks.of(micros);
  }

  /**
   * How long a paced window's records waited for their acknowledgement, from {@code send} to the
   * callback ({@code acks=all}: the producer client and the broker together). A record's age
   * includes this, whatever consumes it.
   *
   * @param p99Ms 99th percentile, ms
   * @param maxMs the slowest, ms
   */
  record Acks(double p99Ms, double maxMs) {
    /** From each record's acknowledgement time in µs; a record without one (0 or negative) is left out. */
    static Acks of(long[] micros) {
      double[] ms = java.util.Arrays.stream(micros).filter(v -> v > 0).sorted().mapToDouble(v -> v / 1000.0).toArray();
      return new Acks(Completions.pct(ms, 0.99), ms.length == 0 ? Double.NaN : ms[ms.length - 1]);
    }
  }

  @Override
  public void close() {
    producer.close(Duration.ofSeconds(10));
    try {
      admin.deleteTopics(created).all().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      System.err.println("could not delete the benchmark topics: " + e);
    } finally {
      admin.close(Duration.ofSeconds(10));
    }
  }
}
