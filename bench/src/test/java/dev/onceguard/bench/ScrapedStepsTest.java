package dev.onceguard.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

class ScrapedStepsTest {
  private static final String TEXT = """
      # HELP onceguard_step_seconds one step of a guarded record
      # TYPE onceguard_step_seconds histogram
      onceguard_step_seconds_bucket{route="a",step="claim",le="0.001",} 10.0
      onceguard_step_seconds_bucket{route="a",step="claim",le="0.002",} 60.0
      onceguard_step_seconds_bucket{route="a",step="claim",le="0.005",} 98.0
      onceguard_step_seconds_bucket{route="a",step="claim",le="+Inf",} 100.0
      onceguard_step_seconds_bucket{route="b",step="claim",le="0.001",} 0.0
      onceguard_step_seconds_bucket{route="b",step="claim",le="0.002",} 0.0
      onceguard_step_seconds_bucket{route="b",step="claim",le="0.005",} 100.0
      onceguard_step_seconds_bucket{route="b",step="claim",le="+Inf",} 100.0
      onceguard_step_seconds_count{route="a",step="claim",} 100.0
      onceguard_step_seconds_bucket{route="a",step="handle",le="0.001",} 3.0
      onceguard_record_age_seconds_bucket{route="a",disposition="ACCEPTED",le="0.001",} 7.0
      """;

  @Test
  void bucketsAreSummedOverRoutesPerStepAndOtherSeriesIgnored() {
    Map<String, TreeMap<Double, Double>> b = ScrapedSteps.buckets(TEXT);
    assertEquals(java.util.Set.of("claim", "handle"), b.keySet());
    assertEquals(10.0, b.get("claim").get(0.001));
    assertEquals(60.0, b.get("claim").get(0.002));
    assertEquals(198.0, b.get("claim").get(0.005));
    assertEquals(200.0, b.get("claim").get(Double.POSITIVE_INFINITY));
    assertFalse(b.containsKey("record_age"));
  }

  @Test
  void quantileInterpolatesInsideItsBucket() {
    TreeMap<Double, Double> c = ScrapedSteps.buckets(TEXT.replaceAll("(?m)^.*route=\"b\".*\\n", "")).get("claim");
    // rank 50 of 100: 40 of the 50 records in (1 ms, 2 ms]
    assertEquals(0.0018, ScrapedSteps.quantile(c, 0.50), 1e-9);
    // rank 5: half-way through the first bucket, from 0
    assertEquals(0.0005, ScrapedSteps.quantile(c, 0.05), 1e-9);
    // rank 99: in +Inf, reported as the largest finite bound
    assertEquals(0.005, ScrapedSteps.quantile(c, 0.99), 1e-9);
  }
}
