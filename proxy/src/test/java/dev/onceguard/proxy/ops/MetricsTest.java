package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class MetricsTest {

  @Test
  void scrape_overHttp_countsVerdictsByRouteDispositionLayerReason_andReadsGauges() throws Exception {
    AtomicLong failures = new AtomicLong(3);
    try (Metrics m = new Metrics()) {
      int port = m.serve("127.0.0.1:0");
      m.gauge("onceguard.l1.failures", "test gauge", failures::get);
      Verdict hit = Verdict.newBuilder().setRoute("orders").setDisposition(Disposition.DUPLICATE_IGNORE)
          .setLayer(Layer.CACHE).setReason(Reason.CACHE_HIT).build();
      Verdict ok = Verdict.newBuilder().setRoute("orders").setDisposition(Disposition.ACCEPTED)
          .setLayer(Layer.STATE_MACHINE).setReason(Reason.NONE).build();
      m.onVerdict(null, hit, false);
      m.onVerdict(null, hit, false);
      m.onVerdict(null, ok, true);
      failures.set(5);

      HttpResponse<String> r = HttpClient.newHttpClient().send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics")).build(), HttpResponse.BodyHandlers.ofString());

      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.body())
          .containsPattern("onceguard_verdicts_total\\{[^}]*disposition=\"DUPLICATE_IGNORE\"[^}]*reason=\"CACHE_HIT\"[^}]*} 2\\.0")
          .containsPattern("onceguard_verdicts_total\\{[^}]*disposition=\"ACCEPTED\"[^}]*} 1\\.0")
          .contains("onceguard_l1_failures 5.0")
          .contains("jvm_memory_used_bytes");
      assertThat(m.snapshot()).isEqualTo("orders ACCEPTED/STATE_MACHINE/NONE=1, orders DUPLICATE_IGNORE/CACHE/CACHE_HIT=2");
    }
  }

  @Test
  void recordAgeAndRouteGauges_areScraped() throws Exception {
    AtomicLong inFlight = new AtomicLong(7);
    try (Metrics m = new Metrics()) {
      m.gauge("onceguard.route.in.flight", "test gauge", "orders", inFlight::get);
      Verdict ok = Verdict.newBuilder().setRoute("orders").setDisposition(Disposition.ACCEPTED)
          .setLayer(Layer.STATE_MACHINE).setReason(Reason.NONE).build();
      // produced 1.5 s ago: its age at the verdict is about 1.5 s
      long created = System.currentTimeMillis() - 1_500;
      m.onVerdict(new org.apache.kafka.clients.consumer.ConsumerRecord<>("orders", 0, 0L, created,
          org.apache.kafka.common.record.TimestampType.CREATE_TIME, 0, 0, null, null, new org.apache.kafka.common.header.internals.RecordHeaders(),
          java.util.Optional.empty()), ok, true);

      String text = m.scrape();
      assertThat(text).containsPattern("onceguard_route_in_flight\\{route=\"orders\"} 7\\.0");
      assertThat(text).containsPattern("onceguard_record_age_seconds_count\\{disposition=\"ACCEPTED\",route=\"orders\"} 1");
      assertThat(text).containsPattern("onceguard_record_age_seconds_bucket\\{disposition=\"ACCEPTED\",route=\"orders\",le=\"[0-9.]+\"}");
      java.util.regex.Matcher sum = java.util.regex.Pattern
          .compile("onceguard_record_age_seconds_sum\\{disposition=\"ACCEPTED\",route=\"orders\"} ([0-9.]+)").matcher(text);
      assertThat(sum.find()).isTrue();
      assertThat(Double.parseDouble(sum.group(1))).isBetween(1.4, 30.0);
    }
  }

  @Test
  void partitionGauges_haveARowPerCurrentPartition_andDropPartitionsThatAreGone() {
    java.util.concurrent.atomic.AtomicReference<java.util.Map<org.apache.kafka.common.TopicPartition, Number>> rows =
        new java.util.concurrent.atomic.AtomicReference<>(java.util.Map.of(
            new org.apache.kafka.common.TopicPartition("orders", 0), 12, new org.apache.kafka.common.TopicPartition("orders", 1), 0));
    try (Metrics m = new Metrics()) {
      m.partitionGauge("onceguard.partition.uncommitted.records", "test gauge", null, "orders", rows::get);
      m.partitionGauge("onceguard.partition.oldest.unfinished.age", "test gauge", "seconds", "orders",
          () -> java.util.Map.of(new org.apache.kafka.common.TopicPartition("orders", 0), 4.5));

      String text = m.scrape();
      assertThat(text)
          .containsPattern("onceguard_partition_uncommitted_records\\{partition=\"0\",route=\"orders\",topic=\"orders\"} 12\\.0")
          .containsPattern("onceguard_partition_uncommitted_records\\{partition=\"1\",route=\"orders\",topic=\"orders\"} 0\\.0")
          .containsPattern("onceguard_partition_oldest_unfinished_age_seconds\\{partition=\"0\",route=\"orders\",topic=\"orders\"} 4\\.5");
      rows.set(java.util.Map.of(new org.apache.kafka.common.TopicPartition("orders", 1), 3));
      assertThat(m.scrape())
          .doesNotContainPattern("onceguard_partition_uncommitted_records\\{partition=\"0\"")
          .containsPattern("onceguard_partition_uncommitted_records\\{partition=\"1\",route=\"orders\",topic=\"orders\"} 3\\.0");
    }
  }
}
