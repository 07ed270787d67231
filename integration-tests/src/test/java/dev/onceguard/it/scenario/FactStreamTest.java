package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.it.scenario.FactStream.Batch;
import dev.onceguard.it.scenario.FactStream.Sent;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class FactStreamTest {
  static final Instant NOW = Instant.parse("2026-12-05T10:00:00Z");

  private static String field(Sent s, String name) {
    return OneRouteEnv.field(s.json().getBytes(StandardCharsets.UTF_8), name);
  }

  /** The value without the fields the sidecar's fingerprint leaves out. */
  private static String content(Sent s) {
    return s.json().replace(field(s, "message_id"), "").replace(field(s, "sent_at"), "");
  }

  @Test
  void fresh_newFactsOnce_keyedByTheLine_businessTimeTheAgeBeforeNow() {
    Batch b = new FactStream(1, NOW).fresh("warm", 50, Duration.ofDays(9));

    assertThat(b.records()).hasSize(50);
    assertThat(b.facts()).hasSize(50);
    assertThat(b.resends()).isZero();
    Sent first = b.records().get(0);
    assertThat(first.key()).isEqualTo(first.fact()).isEqualTo(field(first, FactStream.FACT_FIELD));
    assertThat(field(first, "occurred_at")).isEqualTo("2026-11-26T10:00:00Z");
    assertThat(FactStream.caseOf(first.messageId())).isEqualTo("warm");
  }

  @Test
  void rekeyed_everyNthRecordResendsAnEarlierFact_sameContent_newMessageIdAndKafkaKey() {
    Batch b = new FactStream(2, NOW).rekeyed("rekeyed", 1_000, 100);

    assertThat(b.records()).hasSize(1_000);
    assertThat(b.resends()).isEqualTo(10);
    assertThat(b.facts()).hasSize(990);
    Map<String, Sent> firstOf = new HashMap<>();
    int resends = 0;
    for (Sent s : b.records()) {
      Sent first = firstOf.putIfAbsent(s.fact(), s);
      if (first != null) {
        resends++;
        assertThat(content(s)).isEqualTo(content(first));
        assertThat(s.messageId()).isNotEqualTo(first.messageId());
        assertThat(s.key()).isEqualTo(s.messageId()).isNotEqualTo(first.key());
      }
    }
    assertThat(resends).isEqualTo(b.resends());
  }

  @Test
  void compensation_republishesEarlierFactsUnchanged_spreadOverTheBatch() {
    FactStream stream = new FactStream(3, NOW);
    Batch earlier = stream.fresh("warm", 100, Duration.ofDays(9));
    Map<String, Sent> original = new HashMap<>();
    earlier.records().forEach(s -> original.put(s.fact(), s));

    Batch b = stream.compensation("late", 1_000, earlier, 20);

    assertThat(b.records()).hasSize(1_000);
    assertThat(b.resends()).isEqualTo(20);
    List<Sent> reruns = b.records().stream().filter(s -> original.containsKey(s.fact())).toList();
    assertThat(reruns).hasSize(20).extracting(Sent::fact).doesNotHaveDuplicates();
    for (Sent s : reruns) {
      Sent o = original.get(s.fact());
      assertThat(content(s)).isEqualTo(content(o));
      assertThat(s.key()).isEqualTo(o.key());
      assertThat(field(s, "occurred_at")).isEqualTo("2026-11-26T10:00:00Z");
      assertThat(FactStream.caseOf(s.messageId())).isEqualTo("late");
    }
    assertThat(b.records().indexOf(reruns.get(0))).as("the first re-run comes after a twentieth of the batch").isBetween(40, 60);
  }

  @Test
  void compensation_ofMoreFactsThanWereSent_isRefused() {
    FactStream stream = new FactStream(4, NOW);
    Batch earlier = stream.fresh("warm", 5, Duration.ZERO);
    assertThatThrownBy(() -> stream.compensation("late", 100, earlier, 6)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void sameSeed_sameRecords() {
    assertThat(new FactStream(9, NOW).rekeyed("r", 300, 7).records()).isEqualTo(new FactStream(9, NOW).rekeyed("r", 300, 7).records());
  }
}
