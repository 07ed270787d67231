package dev.onceguard.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BenchPageTest {
  private static Map<String, Object> row(String variant, int workers, double rtt, double p99, double retries) {
    return Map.of("variant", variant, "workers", workers, "entities", 64, "rtt_ms", rtt, "p99_ms", p99, "retries_per_tx", retries);
  }

  @Test
  void seedVerdict_saysWhereTheClaimHoldsAndWhereNot_fromTheRowsOfTheRun() {
    List<Map<String, Object>> rows = new ArrayList<>(List.of(
        // RTT 0: FOR UPDATE grows 3x and is no worse than CAS: does not reproduce
        row("for_update", 1, 0.0, 2.0, 0), row("for_update", 4, 0.0, 6.0, 0), row("cas", 4, 0.0, 7.0, 0.76),
        // RTT 2: the claimed shape, FOR UPDATE 2 -> 45 ms against CAS 3 ms
        row("for_update", 1, 2.0, 2.0, 0), row("for_update", 4, 2.0, 45.0, 0), row("cas", 4, 2.0, 3.0, 0.1)));
    String md = BenchPage.seedVerdict(rows);
    assertThat(md).contains("RTT 0 ms: FOR UPDATE p99 2.00 ms at 1 worker, 6.00 ms at 4 (3.0×)")
        .contains("the claim does not reproduce")
        .contains("RTT 2 ms: FOR UPDATE p99 2.00 ms at 1 worker, 45.00 ms at 4 (22.5×); CAS p99 3.00 ms")
        .contains("the claim holds")
        .contains("the reference team's claim **holds at RTT 2 ms** and does not reproduce at RTT 0 ms");
  }

  @Test
  void seedVerdict_nowhere_saysItDoesNotReproduce() {
    String md = BenchPage.seedVerdict(List.of(row("for_update", 1, 0.5, 2.0, 0), row("for_update", 4, 0.5, 4.0, 0),
        row("cas", 4, 0.5, 3.0, 0.5)));
    assertThat(md).contains("**the reference team's claim does not reproduce on this machine** at any round-trip time measured (0.5 ms)");
  }
}
