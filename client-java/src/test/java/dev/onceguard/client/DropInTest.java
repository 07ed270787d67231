package dev.onceguard.client;

import static dev.onceguard.client.TestDeliveries.ROUTE;
import static dev.onceguard.client.TestDeliveries.TOPIC;
import static dev.onceguard.client.TestDeliveries.delivery;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.HandleResult;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * The same record-handling code, written against {@link Consumer}, runs on Kafka's own
 * {@link MockConsumer} and on {@link OnceGuardConsumer}: only the construction differs.
 */
class DropInTest {

  /** Typical handler code: poll, apply each record, commit what was applied. */
  static final class Shipper {
    private final Consumer<String, String> consumer;
    final List<String> shipped = new ArrayList<>();

    Shipper(Consumer<String, String> consumer) {
      this.consumer = consumer;
    }

    void run(int expected) {
      consumer.subscribe(List.of(TOPIC));
      long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (shipped.size() < expected && System.nanoTime() < deadline) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
          shipped.add(record.key() + "=" + record.value());
        }
        consumer.commitSync();
      }
    }
  }

  @Test
  void sameHandlerCode_onMockConsumerAndOnOnceGuardConsumer_shipsTheSameRecordsAndCommitsThem() {
    TopicPartition p0 = new TopicPartition(TOPIC, 0);

    MockConsumer<String, String> kafka = new MockConsumer<>("earliest");
    kafka.schedulePollTask(() -> {
      kafka.rebalance(List.of(p0));
      kafka.updateBeginningOffsets(Map.of(p0, 0L));
      kafka.addRecord(new ConsumerRecord<>(TOPIC, 0, 0, "o-1", "packed"));
      kafka.addRecord(new ConsumerRecord<>(TOPIC, 0, 1, "o-2", "packed"));
    });
    Shipper onKafka = new Shipper(kafka);
    onKafka.run(2);

    FakeDeliveries sidecar = new FakeDeliveries();
    sidecar.enqueue(delivery("d1", 0, 0, "o-1", "packed"), delivery("d2", 0, 1, "o-2", "packed"));
    try (InProcess grpc = new InProcess(sidecar);
        OnceGuardConsumer<String, String> onceGuard = new OnceGuardConsumer<>(
            grpc.channel,
            Map.of(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE, ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false),
            new StringDeserializer(),
            new StringDeserializer())) {
      Shipper onSidecar = new Shipper(onceGuard);
      onSidecar.run(2);

      assertThat(onSidecar.shipped).isEqualTo(onKafka.shipped).containsExactly("o-1=packed", "o-2=packed");
      assertThat(kafka.committed(java.util.Set.of(p0))).containsEntry(p0, new OffsetAndMetadata(2));
      assertThat(sidecar.acks()).extracting(a -> a.getResult().getOutcome())
          .containsExactly(HandleResult.Outcome.OK, HandleResult.Outcome.OK);
    }
  }
}
