package dev.onceguard.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.v1.KafkaRecord;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** A business that refuses or is down: records are retried, never lost, and never committed past. */
class RetryIT {

  static List<ProducerRecord<byte[], byte[]>> records(String topic, int partitions, int perPartition) {
    List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
    for (int i = 0; i < partitions * perPartition; i++) {
      out.add(new ProducerRecord<>(topic, i % partitions, ("k" + i).getBytes(StandardCharsets.UTF_8),
          ("v" + i).getBytes(StandardCharsets.UTF_8)));
    }
    return out;
  }

  @Test
  void businessRefusingForAWhile_recordsAreRetriedUntilAccepted_andCommitsNeverPassTheFirstRefused() throws Exception {
    // partition 0: offset 10 gets RETRY, 20 gets UNAVAILABLE, 30 gets RETRY with retry_after_ms;
    // for 6 s from the first refusal. Everything else, and partition 1, is accepted at once.
    Set<Long> refused = Set.of(10L, 20L, 30L);
    long window = TimeUnit.SECONDS.toNanos(6);
    AtomicLong refusingUntil = new AtomicLong();
    try (KafkaSupport kafka = new KafkaSupport(); RecordingBusiness business = RecordingBusiness.start()) {
      String topic = kafka.createTopic("retry", 2);
      String group = "retry-it-" + ItEnv.uniqueSuffix();
      TopicPartition p0 = new TopicPartition(topic, 0);
      TopicPartition p1 = new TopicPartition(topic, 1);
      kafka.produce(records(topic, 2, 50));
      business.behave(d -> {
        KafkaRecord r = d.getRecord();
        if (r.getPartition() == 0 && refused.contains(r.getOffset())) {
          long now = System.nanoTime();
          refusingUntil.compareAndSet(0, now + window);
          if (now < refusingUntil.get()) {
            return r.getOffset() == 20 ? Reply.status(Status.UNAVAILABLE.withDescription("restarting"))
                : Reply.retry("database busy", r.getOffset() == 30 ? 300 : 0);
          }
        }
        return Reply.ok();
      });

      try (Sidecar sidecar = new Sidecar(ForwardConfig.route(topic, group, business.target()).build(), ProcessorFactory.forwarding())) {
        sidecar.start();
        await().atMost(Duration.ofSeconds(20)).until(() -> refusingUntil.get() != 0);

        // while refusing: sample the group's committed offset of partition 0
        List<Long> samples = new ArrayList<>();
        while (System.nanoTime() < refusingUntil.get() - TimeUnit.MILLISECONDS.toNanos(300)) {
          samples.add(kafka.committedOffset(group, p0));
          Thread.sleep(100);
        }
        System.out.printf("RetryIT: %d samples of the committed offset while refusing: %s%n", samples.size(), samples);
        assertThat(samples).hasSizeGreaterThan(5);
        assertThat(samples).as("never past the first refused record").allMatch(o -> o <= 10);
        assertThat(samples).as("but the finished prefix before it was committed").contains(10L);
        assertThat(kafka.committedOffset(group, p1)).as("other partitions go on").isEqualTo(50);

        await().atMost(Duration.ofSeconds(20)).until(() -> business.okCoordinates().size() == 100);
        Map<TopicPartition, Long> end = kafka.endOffsets(topic);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
      }

      // each refused record was called again, with a growing attempt number, then accepted once
      for (long o : refused) {
        List<Call> calls = business.calls().stream()
            .filter(c -> c.delivery().getRecord().getPartition() == 0 && c.delivery().getRecord().getOffset() == o)
            .collect(Collectors.toList());
        assertThat(calls).hasSizeGreaterThan(1);
        assertThat(calls).extracting(c -> c.delivery().getAttempt()).isSorted().startsWith(1, 2);
        assertThat(calls).filteredOn(Call::answeredOk).hasSize(1);
        assertThat(calls.get(calls.size() - 1).answeredOk()).isTrue();
      }
      // the business asked for 300 ms between attempts of offset 30: honoured
      List<Long> at30 = business.calls().stream()
          .filter(c -> c.delivery().getRecord().getPartition() == 0 && c.delivery().getRecord().getOffset() == 30)
          .map(Call::receivedAtNanos).collect(Collectors.toList());
      for (int i = 1; i < at30.size(); i++) {
        assertThat(at30.get(i) - at30.get(i - 1)).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(290));
      }
      // nothing else was delivered twice
      assertThat(business.okDeliveries()).hasSize(100);
    }
  }

  @Test
  void businessNotListeningAtStart_nothingIsCommitted_untilItComesUpAndTakesEverything() throws Exception {
    int port = RecordingBusiness.freePort();
    try (KafkaSupport kafka = new KafkaSupport()) {
      String topic = kafka.createTopic("late-business", 2);
      String group = "late-it-" + ItEnv.uniqueSuffix();
      kafka.produce(records(topic, 2, 20));
      try (Sidecar sidecar = new Sidecar(ForwardConfig.route(topic, group, "127.0.0.1:" + port).build(), ProcessorFactory.forwarding())) {
        sidecar.start();
        await().atMost(Duration.ofSeconds(20)).until(() -> kafka.activeMembers(group) == 1);

        // 3 s of a closed port: the records are polled and retried, and no commit passes offset 0
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        List<Map<TopicPartition, Long>> samples = new ArrayList<>();
        while (System.nanoTime() < until) {
          samples.add(kafka.committedOffsets(group, topic));
          Thread.sleep(100);
        }
        assertThat(samples).allSatisfy(s -> assertThat(s.values()).allMatch(o -> o == 0));

        try (RecordingBusiness business = RecordingBusiness.startOn(port)) {
          long t0 = System.nanoTime();
          await().atMost(Duration.ofSeconds(60)).until(() -> business.okCoordinates().size() == 40);
          long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
          System.out.printf("RetryIT: business up late; all records delivered %d ms after it started%n", tookMs);
          // retries are paced by the route's backoff (max 500 ms), not by gRPC's reconnect backoff (up to
          // 2 min); the bound leaves room for a loaded machine and still tells the two apart
          assertThat(tookMs).isLessThan(30_000);
          Map<TopicPartition, Long> end = kafka.endOffsets(topic);
          await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
          assertThat(business.okDeliveries()).hasSize(40);
          assertThat(business.okDeliveries()).allSatisfy(d -> assertThat(d.getAttempt()).isGreaterThan(1));
        }
      }
    }
  }
}
