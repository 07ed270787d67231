package dev.onceguard.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Header;
import dev.onceguard.v1.KafkaRecord;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/** The walking skeleton end to end: Kafka → sidecar → business, everything delivered once and committed. */
class ForwardIT {
  private static final int N = 2000;
  private static final int PARTITIONS = 4;

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** Distinct keys, values and headers; record 0 has a null key, 1 a null-valued header, 2 a null value. */
  static List<ProducerRecord<byte[], byte[]>> records(String topic) {
    List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      RecordHeaders h = new RecordHeaders();
      h.add("seq", utf8(Integer.toString(i)));
      h.add("trace", utf8("trace-" + i));
      if (i == 1) {
        h.add("nullable", null);
      }
      if (i % 7 == 0) {
        h.add("trace", utf8("second-trace-" + i)); // repeated header key: order must be kept
      }
      byte[] key = i == 0 ? null : utf8("key-" + i);
      byte[] value = i == 2 ? null : utf8("{\"n\":" + i + ",\"text\":\"value " + i + "\"}");
      out.add(new ProducerRecord<>(topic, i % PARTITIONS, key, value, h));
    }
    return out;
  }

  private static KafkaRecord expected(ConsumerRecord<byte[], byte[]> r) {
    KafkaRecord.Builder b = KafkaRecord.newBuilder().setTopic(r.topic()).setPartition(r.partition()).setOffset(r.offset())
        .setTimestampMs(r.timestamp());
    if (r.key() != null) {
      b.setKey(ByteString.copyFrom(r.key()));
    }
    if (r.value() != null) {
      b.setValue(ByteString.copyFrom(r.value()));
    }
    r.headers().forEach(h -> {
      Header.Builder hb = Header.newBuilder().setKey(h.key());
      if (h.value() != null) {
        hb.setValue(ByteString.copyFrom(h.value()));
      }
      b.addHeaders(hb);
    });
    return b.build();
  }

  @Test
  void everyRecordIsDeliveredOnceExactlyAsProduced_andTheGroupCommitsToTheEnd() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport(); RecordingBusiness business = RecordingBusiness.start()) {
      String topic = kafka.createTopic("forward", PARTITIONS);
      String group = "forward-it-" + ItEnv.uniqueSuffix();
      kafka.produce(records(topic));

      ForwardConfig config = ForwardConfig.route(topic, group, business.target());
      Sidecar sidecar = new Sidecar(config.build(), ProcessorFactory.forwarding());
      long t0 = System.nanoTime();
      try {
        sidecar.start();
        assertThat(health(sidecar.grpcPort())).isEqualTo(ServingStatus.SERVING);

        await().atMost(Duration.ofSeconds(45)).until(() -> business.okCoordinates().size() >= N);
        System.out.printf("ForwardIT: %d records delivered in %d ms%n", N, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));

        // exactly as produced: compare with the records read back from the topic
        Map<String, KafkaRecord> expected = kafka.readAll(topic).stream()
            .map(ForwardIT::expected)
            .collect(Collectors.toMap(RecordingBusiness::coordinatesOf, Function.identity()));
        assertThat(expected).hasSize(N);
        List<Delivery> delivered = business.okDeliveries();
        assertThat(business.calls()).as("one call per record, none repeated").hasSize(N);
        Map<String, Delivery> byCoordinates = new HashMap<>();
        for (Delivery d : delivered) {
          assertThat(byCoordinates.put(RecordingBusiness.coordinatesOf(d.getRecord()), d)).as("delivered twice").isNull();
        }
        assertThat(byCoordinates.keySet()).isEqualTo(expected.keySet());
        for (Delivery d : delivered) {
          assertThat(d.getRecord()).isEqualTo(expected.get(RecordingBusiness.coordinatesOf(d.getRecord())));
          assertThat(d.getRoute()).isEqualTo(config.routeName());
          assertThat(d.getAttempt()).isEqualTo(1);
          assertThat(d.getRedelivery()).isFalse();
        }
        assertThat(delivered.stream().map(Delivery::getDeliveryId).distinct().count()).isEqualTo(N);
        // the special records really went through
        assertThat(delivered).anySatisfy(d -> assertThat(d.getRecord().hasKey()).isFalse());
        assertThat(delivered).anySatisfy(d -> assertThat(d.getRecord().hasValue()).isFalse());
        assertThat(delivered).anySatisfy(d -> assertThat(d.getRecord().getHeadersList())
            .anySatisfy(h -> assertThat(h.getKey().equals("nullable") && !h.hasValue()).isTrue()));

        Map<?, Long> end = kafka.endOffsets(topic);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
      } finally {
        long c0 = System.nanoTime();
        sidecar.close();
        System.out.printf("ForwardIT: sidecar closed in %d ms%n", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - c0));
      }
      assertThat(business.calls()).hasSize(N);
    }
  }

  static ServingStatus health(int port) throws InterruptedException {
    ManagedChannel ch = Grpc.newChannelBuilderForAddress("127.0.0.1", port, InsecureChannelCredentials.create()).build();
    try {
      return HealthGrpc.newBlockingStub(ch).withDeadlineAfter(5, TimeUnit.SECONDS)
          .check(HealthCheckRequest.newBuilder().setService(Sidecar.HEALTH_SERVICE).build()).getStatus();
    } finally {
      ch.shutdownNow();
      ch.awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}
