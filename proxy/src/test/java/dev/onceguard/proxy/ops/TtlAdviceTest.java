package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class TtlAdviceTest {
  private static final long HOUR = 3_600_000L;
  private static final long DAY = 24 * HOUR;

  @Test
  void report_sharesPerTtl_percentiles_andWhichDuplicatesTheCurrentTtlShouldHaveAnswered() {
    // 100 duplicates: 50 after 30 min, 40 after 3 days, 9 after 9 days, 1 after 20 days
    long[] ages = new long[100];
    for (int i = 0; i < 100; i++) {
      ages[i] = i < 50 ? HOUR / 2 : i < 90 ? 3 * DAY : i < 99 ? 9 * DAY : 20 * DAY;
    }

    String r = TtlAdvice.report("ship", ages, 4, 7, Duration.ofDays(7), Duration.ofDays(14));

    assertThat(r).contains("route 'ship' (redis-ttl 7 d), decision log of the last 14 d");
    assertThat(r).contains("100 duplicates missed L1").contains("4 more had no recorded age").contains("7 others");
    assertThat(r).contains("p50 30 min, p90 3 d, p99 9 d, max 20 d");
    assertThat(r).contains("an L1 TTL of 1 h 50.0%, 1 d 50.0%, 7 d 90.0%, 14 d 99.0%, 30 d 100.0%, 90 d 100.0%");
    // 90 of them were younger than the current 7 days: Redis lost those keys
    assertThat(r).contains("90.0% of them came within the current TTL");
    assertThat(r).contains("the shortest of these covering 99% is 14 d");
  }

  @Test
  void report_whenNoCandidateCoversNinetyNinePercent_namesTheTtlThatWouldBeNeeded() {
    long[] ages = {100 * DAY, 120 * DAY, 200 * DAY};

    String r = TtlAdvice.report("orders", ages, 0, 0, Duration.ofDays(30), Duration.ofDays(365));

    assertThat(r).contains("none of these TTLs covers 99%").contains("at least 200 d");
    assertThat(r).doesNotContain("within the current TTL");
  }

  @Test
  void report_withoutAges_saysSo() {
    assertThat(TtlAdvice.report("orders", new long[0], 2, 3, Duration.ofDays(30), Duration.ofDays(14)))
        .contains("no duplicate reached the ledger with a recorded age (2 without one, 3 that L1 could not answer");
  }

  @Test
  void reportFromBuckets_sharesAtBucketBounds_percentilesAsBounds() {
    // cumulative LEDGER_HIT counts: 50 within 1 h, 90 within 7 d, 99 within 14 d, 100 in all
    java.util.Map<Double, Double> cum = new java.util.TreeMap<>();
    cum.put(3600.0, 50.0);
    cum.put(86_400.0, 50.0);
    cum.put(604_800.0, 90.0);
    cum.put(1_209_600.0, 99.0);
    cum.put(2_592_000.0, 100.0);
    cum.put(7_776_000.0, 100.0);
    cum.put(Double.POSITIVE_INFINITY, 100.0);

    String r = TtlAdvice.reportFromBuckets("ship", cum, 2_000, 5, Duration.ofDays(10), Duration.ofDays(30));

    assertThat(r).contains("route 'ship' (redis-ttl 10 d), Prometheus, last 30 d");
    assertThat(r).contains("100 duplicates missed L1").contains("L1 answered 2000").contains("5 others");
    assertThat(r).contains("p50 under 1 h, p90 under 7 d, p99 under 14 d");
    // 10 days is not a bucket bound: the share at the 7-day bound, as a lower bound
    assertThat(r).contains("1 h 50.0%, 1 d 50.0%, 7 d 90.0%, 10 d at least 90.0%, 14 d 99.0%, 30 d 100.0%, 90 d 100.0%");
    assertThat(r).contains("at least 90.0% of them came within the current TTL");
    assertThat(r).contains("the shortest of these covering 99% is 14 d");
  }

  @Test
  void human_readableDurations() {
    assertThat(TtlAdvice.human(950)).isEqualTo("950 ms");
    assertThat(TtlAdvice.human(42_000)).isEqualTo("42 s");
    assertThat(TtlAdvice.human(90_000)).isEqualTo("1.5 min");
    assertThat(TtlAdvice.human(5 * HOUR + HOUR / 5)).isEqualTo("5.2 h");
    assertThat(TtlAdvice.human(30 * DAY)).isEqualTo("30 d");
  }
}
