package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

class MetricsTest {
  private static final Verdict ACCEPTED = Verdict.newBuilder().setRoute("orders").setDisposition(Disposition.ACCEPTED)
      .setLayer(Layer.STATE_MACHINE).setReason(Reason.NONE).build();
  private static final Verdict CACHE_HIT = Verdict.newBuilder().setRoute("orders").setDisposition(Disposition.DUPLICATE_IGNORE)
      .setLayer(Layer.CACHE).setReason(Reason.CACHE_HIT).build();

  /** A record produced {@code agoMillis} before now. */
  private static ConsumerRecord<byte[], byte[]> producedAgo(long agoMillis) {
    return new ConsumerRecord<>("orders", 0, 0L, System.currentTimeMillis() - agoMillis, TimestampType.CREATE_TIME, 0, 0, null, null,
        new RecordHeaders(), Optional.empty());
  }

  @Test
  void scrape_overHttp_countsVerdictsByRouteDispositionLayerReason() throws Exception {
    try (Metrics m = new Metrics()) {
      int port = m.serve("127.0.0.1:0");
      m.onVerdict(null, CACHE_HIT, false);
      m.onVerdict(null, CACHE_HIT, false);
      m.onVerdict(null, ACCEPTED, true);
      m.onVerdict(null, ACCEPTED.toBuilder().setLayer(Layer.LEDGER).setReplayed(true).build(), false);

      HttpResponse<String> r = HttpClient.newHttpClient().send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics")).build(), HttpResponse.BodyHandlers.ofString());

      assertThat(r.statusCode()).isEqualTo(200);
      ScrapeText s = ScrapeText.parse(r.body());
      assertThat(s.types()).containsEntry("onceguard_verdicts_total", "counter");
      assertThat(s.one("onceguard_verdicts_total", "route", "orders", "disposition", "DUPLICATE_IGNORE", "layer", "CACHE",
          "reason", "CACHE_HIT").value()).isEqualTo(2.0);
      assertThat(s.one("onceguard_verdicts_total", "route", "orders", "disposition", "ACCEPTED", "layer", "STATE_MACHINE",
          "reason", "NONE").value()).isEqualTo(1.0);
      assertThat(s.one("onceguard_verdicts_replayed_total", "route", "orders").value()).as("a replayed ACCEPTED, counted apart")
          .isEqualTo(1.0);
      assertThat(s.named("jvm_memory_used_bytes")).isNotEmpty();
      assertThat(m.snapshot()).isEqualTo(
          "orders ACCEPTED/LEDGER/NONE=1, orders ACCEPTED/STATE_MACHINE/NONE=1, orders DUPLICATE_IGNORE/CACHE/CACHE_HIT=2");
    }
  }

  @Test
  void counter_isACounterNamedTotal_withItsLabels_readAtScrapeTime() {
    AtomicLong failures = new AtomicLong(3);
    try (Metrics m = new Metrics()) {
      m.counter("onceguard.escalation.send.failures", "test counter", failures::get, "route", "orders", "kind", "ESCALATION");
      m.counter("onceguard.mysql.round.trips", "test counter", () -> 12);
      failures.set(5);

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types())
          .containsEntry("onceguard_escalation_send_failures_total", "counter")
          .containsEntry("onceguard_mysql_round_trips_total", "counter");
      assertThat(s.one("onceguard_escalation_send_failures_total", "route", "orders", "kind", "ESCALATION").value()).isEqualTo(5.0);
      assertThat(s.one("onceguard_mysql_round_trips_total").value()).isEqualTo(12.0);
    }
  }

  @Test
  void counter_keepsReadingItsSource_afterGarbageCollection() {
    AtomicLong trips = new AtomicLong(1);
    try (Metrics m = new Metrics()) {
      // the lambda is referenced by nothing but the metrics
      m.counter("onceguard.mysql.round.trips", "test counter", () -> trips.get());
      for (int i = 0; i < 5; i++) {
        System.gc();
      }
      trips.set(42);

      assertThat(ScrapeText.parse(m.scrape()).one("onceguard_mysql_round_trips_total").value()).isEqualTo(42.0);
    }
  }

  @Test
  void gauge_isAGauge_withTheRouteLabel() {
    AtomicLong inFlight = new AtomicLong(7);
    try (Metrics m = new Metrics()) {
      m.gauge("onceguard.route.in.flight", "test gauge", "orders", inFlight::get);
      m.gauge("onceguard.l1.available", "test gauge", () -> 0);

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types()).containsEntry("onceguard_route_in_flight", "gauge").containsEntry("onceguard_l1_available", "gauge");
      assertThat(s.one("onceguard_route_in_flight", "route", "orders").value()).isEqualTo(7.0);
      assertThat(s.one("onceguard_l1_available").value()).isZero();
    }
  }

  @Test
  void duplicateAge_isAHistogramPerRouteLayerAndReason_fromTheVerdictsOriginalAge() {
    try (Metrics m = new Metrics()) {
      Verdict ledgerHit = Verdict.newBuilder().setRoute("orders").setDisposition(Disposition.DUPLICATE_IGNORE).setLayer(Layer.LEDGER)
          .setReason(Reason.LEDGER_HIT).setOriginalAgeMs(java.time.Duration.ofDays(9).toMillis()).build();
      Verdict cacheHit = ledgerHit.toBuilder().setLayer(Layer.CACHE).setReason(Reason.CACHE_HIT).setOriginalAgeMs(30_000).build();
      m.onVerdict(null, ledgerHit, false);
      m.onVerdict(null, cacheHit, false);
      m.onVerdict(null, cacheHit.toBuilder().clearOriginalAgeMs().build(), false);

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types()).containsEntry("onceguard_duplicate_age_seconds", "histogram");
      // 9 days: above the 7-day bucket, within 14 days
      assertThat(s.one("onceguard_duplicate_age_seconds_bucket", "route", "orders", "layer", "LEDGER", "reason", "LEDGER_HIT", "le", "604800.0").value()).isZero();
      assertThat(s.one("onceguard_duplicate_age_seconds_bucket", "route", "orders", "layer", "LEDGER", "reason", "LEDGER_HIT", "le", "1209600.0").value())
          .isEqualTo(1.0);
      assertThat(s.one("onceguard_duplicate_age_seconds_bucket", "route", "orders", "layer", "CACHE", "reason", "CACHE_HIT", "le", "60.0").value()).isEqualTo(1.0);
      assertThat(s.one("onceguard_duplicate_age_seconds_count", "route", "orders", "layer", "CACHE", "reason", "CACHE_HIT").value())
          .as("a duplicate of unknown age is not counted").isEqualTo(1.0);
    }
  }

  @Test
  void recordAge_isAHistogramWithTheFixedBuckets_perRouteAndDisposition() {
    try (Metrics m = new Metrics()) {
      // produced 1.5 s ago: its age at the verdict is about 1.5 s, in the (1 s, 5 s] bucket
      m.onVerdict(producedAgo(1_500), ACCEPTED, true);

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types()).containsEntry("onceguard_record_age_seconds", "histogram");
      List<ScrapeText.Sample> buckets = s.named("onceguard_record_age_seconds_bucket");
      assertThat(buckets).extracting(b -> b.labels().get("le")).containsExactly(
          "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "5.0", "30.0", "300.0", "3600.0", "+Inf");
      assertThat(buckets).allSatisfy(b -> assertThat(b.labels()).containsEntry("route", "orders").containsEntry("disposition", "ACCEPTED"));
      assertThat(s.one("onceguard_record_age_seconds_bucket", "route", "orders", "disposition", "ACCEPTED", "le", "1.0").value()).isZero();
      assertThat(s.one("onceguard_record_age_seconds_bucket", "route", "orders", "disposition", "ACCEPTED", "le", "5.0").value()).isEqualTo(1.0);
      assertThat(s.one("onceguard_record_age_seconds_count", "route", "orders", "disposition", "ACCEPTED").value()).isEqualTo(1.0);
      assertThat(s.one("onceguard_record_age_seconds_sum", "route", "orders", "disposition", "ACCEPTED").value()).isBetween(1.4, 30.0);
      // the whole family for one (route, disposition): 13 buckets, count, sum and max
      assertThat(s.samples()).filteredOn(x -> x.name().startsWith("onceguard_record_age_seconds")).hasSize(16);
    }
  }

  @Test
  void steps_areHistogramsPerRouteAndStep_withTheFixedBuckets() {
    try (Metrics m = new Metrics()) {
      m.onStep("orders", VerdictListener.Step.CLAIM, 3_000_000); // 3 ms: in (2 ms, 5 ms]
      m.onStep("orders", VerdictListener.Step.CLAIM, 40_000_000); // 40 ms: in (25 ms, 50 ms]
      m.onStep("orders", VerdictListener.Step.HANDLE, 700_000);
      m.onStep("orders", VerdictListener.Step.CONFIRM, 2_000_000_000L);

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types()).containsEntry("onceguard_step_seconds", "histogram");
      assertThat(s.named("onceguard_step_seconds_bucket")).filteredOn(b -> "claim".equals(b.labels().get("step")))
          .extracting(b -> b.labels().get("le"))
          .containsExactly("0.001", "0.002", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "1.0", "5.0", "+Inf");
      assertThat(s.one("onceguard_step_seconds_bucket", "route", "orders", "step", "claim", "le", "0.002").value()).isZero();
      assertThat(s.one("onceguard_step_seconds_bucket", "route", "orders", "step", "claim", "le", "0.005").value()).isEqualTo(1.0);
      assertThat(s.one("onceguard_step_seconds_bucket", "route", "orders", "step", "claim", "le", "0.05").value()).isEqualTo(2.0);
      assertThat(s.one("onceguard_step_seconds_count", "route", "orders", "step", "claim").value()).isEqualTo(2.0);
      assertThat(s.one("onceguard_step_seconds_sum", "route", "orders", "step", "claim").value()).isCloseTo(0.043, within(1e-9));
      assertThat(s.one("onceguard_step_seconds_bucket", "route", "orders", "step", "handle", "le", "0.001").value()).isEqualTo(1.0);
      assertThat(s.one("onceguard_step_seconds_bucket", "route", "orders", "step", "confirm", "le", "1.0").value()).isZero();
      assertThat(s.one("onceguard_step_seconds_bucket", "route", "orders", "step", "confirm", "le", "5.0").value()).isEqualTo(1.0);
      // one family per (route, step): 11 buckets, count, sum and max
      assertThat(s.samples()).filteredOn(x -> x.name().startsWith("onceguard_step_seconds")).hasSize(3 * 14);
    }
  }

  @Test
  void buildInfo_isOneSeriesWithVersionAndCommit() {
    try (Metrics m = new Metrics()) {
      m.buildInfo("1.2.3", "0123456789ab");

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types()).containsEntry("onceguard_build_info", "gauge");
      assertThat(s.named("onceguard_build_info")).hasSize(1);
      assertThat(s.one("onceguard_build_info", "version", "1.2.3", "commit", "0123456789ab").value()).isEqualTo(1.0);
    }
  }

  @Test
  void partitionGauges_haveARowPerCurrentPartition_andDropPartitionsThatAreGone() {
    AtomicReference<Map<TopicPartition, Number>> rows = new AtomicReference<>(Map.of(
        new TopicPartition("orders", 0), 12, new TopicPartition("orders", 1), 0));
    try (Metrics m = new Metrics()) {
      m.partitionGauge("onceguard.partition.uncommitted.records", "test gauge", null, "orders", rows::get);
      m.partitionGauge("onceguard.partition.oldest.unfinished.age", "test gauge", "seconds", "orders",
          () -> Map.of(new TopicPartition("orders", 0), 4.5));

      ScrapeText s = ScrapeText.parse(m.scrape());
      assertThat(s.types()).containsEntry("onceguard_partition_oldest_unfinished_age_seconds", "gauge");
      assertThat(s.one("onceguard_partition_uncommitted_records", "route", "orders", "topic", "orders", "partition", "0").value())
          .isEqualTo(12.0);
      assertThat(s.one("onceguard_partition_uncommitted_records", "route", "orders", "topic", "orders", "partition", "1").value())
          .isZero();
      assertThat(s.one("onceguard_partition_oldest_unfinished_age_seconds", "route", "orders", "topic", "orders", "partition", "0")
          .value()).isEqualTo(4.5);

      rows.set(Map.of(new TopicPartition("orders", 1), 3));
      ScrapeText later = ScrapeText.parse(m.scrape());
      assertThat(later.named("onceguard_partition_uncommitted_records")).hasSize(1);
      assertThat(later.one("onceguard_partition_uncommitted_records", "route", "orders", "topic", "orders", "partition", "1").value())
          .isEqualTo(3.0);
    }
  }
}
