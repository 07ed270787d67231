package dev.onceguard.client;

import static dev.onceguard.client.TestDeliveries.TOPIC;
import static dev.onceguard.client.TestDeliveries.delivery;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.client.internal.KafkaClientsCompat;
import dev.onceguard.client.internal.PullConsumer;
import dev.onceguard.client.internal.RecordsFactory;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.HandleResult;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A record counts as delivered only once poll has returned it. Each test makes one step of
 * poll throw and checks that no later commit acknowledges a record the application never got,
 * and that the records come back on the next poll.
 */
class PollFailureTest {
  private static final Duration POLL = Duration.ofSeconds(2);
  private static final TopicPartition P0 = new TopicPartition(TOPIC, 0);
  private static final TopicPartition P1 = new TopicPartition(TOPIC, 1);
  /** The value at which an armed deserializer fails: the second record of the batch. */
  private static final String FAIL_AT = "v-1";

  /** The steps of a poll that can throw once records are in the buffer. */
  enum Step {
    /** A key deserializer throws an Error, which is not a deserialization verdict. */
    KEY_DESERIALIZER,
    /** A value deserializer throws an Error, e.g. a LinkageError of its own dependencies. */
    VALUE_DESERIALIZER,
    /** ConsumerRecords cannot be built: the kafka-clients 3.9 NoSuchMethodError of issue 13. */
    CONSUMER_RECORDS,
    /** The rebalance listener throws from onPartitionsAssigned, inside poll. */
    REBALANCE_LISTENER
  }

  private FakeDeliveries sidecar;
  private InProcess grpc;
  private final Failure failure = new Failure();
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

  @ParameterizedTest
  @EnumSource(Step.class)
  void failingStep_commitAfterwardsAcknowledgesNothing_andTheNextPollReturnsTheRecords(Step step) {
    OnceGuardConsumer<String, String> c = consumer(step, false);
    enqueueThree();
    failure.arm(step);

    assertThatThrownBy(() -> c.poll(POLL)).isNotNull();
    assertThat(failure.fired()).as("the injected failure was reached").isTrue();
    c.commitSync();
    c.commitSync(Map.of(P0, new OffsetAndMetadata(100), P1, new OffsetAndMetadata(100)));

    assertThat(sidecar.acks()).as("no record was returned, so none is acknowledged").isEmpty();

    List<ConsumerRecord<String, String>> records = pollAll(c, 3);
    assertThat(records).extracting(ConsumerRecord::value).containsExactlyInAnyOrder("v-0", FAIL_AT, "v-2");
    c.commitSync();
    assertThat(sidecar.acks()).extracting(Ack::getDeliveryId).containsExactlyInAnyOrder("d0", "d1", "d2");
    assertThat(sidecar.acks()).allSatisfy(a -> assertThat(a.getResult().getOutcome()).isEqualTo(HandleResult.Outcome.OK));
  }

  @Test
  void failingConsumerRecords_withAutoCommit_theNextPollCommitsNothingThatWasNotReturned() {
    OnceGuardConsumer<String, String> c = consumer(Step.CONSUMER_RECORDS, true);
    enqueueThree();
    failure.arm(Step.CONSUMER_RECORDS);

    assertThatThrownBy(() -> c.poll(POLL)).isInstanceOf(NoSuchMethodError.class);
    List<ConsumerRecord<String, String>> records = pollAll(c, 3); // its auto-commit finds nothing to acknowledge

    assertThat(sidecar.acks()).isEmpty();
    assertThat(records).hasSize(3);
    c.poll(Duration.ZERO); // auto-commits what the previous poll returned
    assertThat(sidecar.acks()).extracting(Ack::getDeliveryId).containsExactlyInAnyOrder("d0", "d1", "d2");
  }

  @Test
  void failingConsumerRecords_afterARefusal_doesNotSendTheRefusalEither() {
    Deserializer<String> strict = (topic, data) -> {
      String s = new String(data, StandardCharsets.UTF_8);
      if (s.equals("not-json")) {
        throw new SerializationException("not JSON");
      }
      return s;
    };
    OnceGuardConsumer<String, String> c = consumer(Step.CONSUMER_RECORDS, false, strict);
    sidecar.enqueue(delivery("bad", 0, 0, "k", "not-json"), delivery("good", 0, 1, "k", "fine"));
    failure.arm(Step.CONSUMER_RECORDS);

    assertThatThrownBy(() -> c.poll(POLL)).isInstanceOf(NoSuchMethodError.class);
    c.commitSync();
    assertThat(sidecar.acks()).as("the batch was not built: not even the refusal is sent").isEmpty();

    assertThat(pollAll(c, 1)).extracting(ConsumerRecord::value).containsExactly("fine");
    c.commitSync();
    assertThat(sidecar.acks())
        .extracting(a -> a.getDeliveryId() + "=" + a.getResult().getOutcome())
        .containsExactly("bad=REJECT", "good=OK");
  }

  // -------------------------------------------------------------------------------------------

  private void enqueueThree() {
    sidecar.enqueue(
        delivery("d0", 0, 0, "k-0", "v-0"), delivery("d1", 0, 1, "k-1", FAIL_AT), delivery("d2", 1, 0, "k-2", "v-2"));
  }

  private OnceGuardConsumer<String, String> consumer(Step step, boolean autoCommit) {
    return consumer(step, autoCommit, new ArmableDeserializer(failure, Step.VALUE_DESERIALIZER));
  }

  private OnceGuardConsumer<String, String> consumer(Step step, boolean autoCommit, Deserializer<String> value) {
    Map<String, Object> config = new HashMap<>();
    config.put(OnceGuardConsumerConfig.ROUTE_CONFIG, TestDeliveries.ROUTE);
    config.put(OnceGuardConsumerConfig.WINDOW_CONFIG, 10);
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, autoCommit);
    RecordsFactory real = KafkaClientsCompat.forRunningVersion();
    RecordsFactory factory = new RecordsFactory() {
      @Override
      public <K, V> ConsumerRecords<K, V> create(
          Map<TopicPartition, List<ConsumerRecord<K, V>>> records, Map<TopicPartition, OffsetAndMetadata> nextOffsets) {
        failure.maybeThrow(Step.CONSUMER_RECORDS, () -> new NoSuchMethodError(
            "'void org.apache.kafka.clients.consumer.ConsumerRecords.<init>(java.util.Map, java.util.Map)'"));
        return real.create(records, nextOffsets);
      }
    };
    OnceGuardConsumer<String, String> c = new OnceGuardConsumer<>(PullConsumer.create(
        config, grpc.channel, new ArmableDeserializer(failure, Step.KEY_DESERIALIZER), value, factory));
    consumers.add(c);
    c.subscribe(List.of(TOPIC), new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        failure.maybeThrow(Step.REBALANCE_LISTENER, () -> new IllegalStateException("listener failed"));
      }

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}
    });
    return c;
  }

  private static List<ConsumerRecord<String, String>> pollAll(OnceGuardConsumer<String, String> c, int n) {
    List<ConsumerRecord<String, String>> all = new ArrayList<>();
    long deadline = System.nanoTime() + POLL.toNanos();
    while (all.size() < n && System.nanoTime() < deadline) {
      c.poll(Duration.ofMillis(100)).forEach(all::add);
    }
    return all;
  }

  /** One failure, armed for one step, fired once. Used on the test thread only. */
  private static final class Failure {
    private Step armed;
    private boolean fired;

    void arm(Step step) {
      armed = step;
    }

    boolean fired() {
      return fired;
    }

    void maybeThrow(Step step, Supplier<? extends Throwable> failure) {
      if (armed == step) {
        armed = null;
        fired = true;
        Throwable t = failure.get();
        if (t instanceof Error e) {
          throw e;
        }
        throw (RuntimeException) t;
      }
    }
  }

  /** A string deserializer that throws an Error at {@link #FAIL_AT} while its step is armed. */
  private static final class ArmableDeserializer implements Deserializer<String> {
    private final Failure failure;
    private final Step step;

    ArmableDeserializer(Failure failure, Step step) {
      this.failure = failure;
      this.step = step;
    }

    @Override
    public String deserialize(String topic, byte[] data) {
      String s = new String(data, StandardCharsets.UTF_8);
      if (s.equals(FAIL_AT) || s.equals("k-1")) {
        failure.maybeThrow(step, () -> new NoClassDefFoundError("com/example/Money"));
      }
      return s;
    }
  }
}
