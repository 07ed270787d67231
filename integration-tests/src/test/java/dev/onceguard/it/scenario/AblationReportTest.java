package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.scenario.AblationReport.Damage;
import dev.onceguard.it.scenario.AblationReport.Row;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class AblationReportTest {
  static final Row FULL = new Row("all three layers", 1_000, Map.of("CACHE/CACHE_HIT", 200, "STATE_MACHINE/ALREADY_APPLIED", 10,
      "LEDGER/LEDGER_HIT", 5), Map.of("exact re-send", Map.of("L1", 200)), Damage.NONE, 200, 1_000, 3_000, 30.4);
  static final Row L1_OFF = new Row("L1 off", 1_000, Map.of("LEDGER/LEDGER_HIT", 205, "STATE_MACHINE/ALREADY_APPLIED", 10),
      Map.of("exact re-send", Map.of("L2", 195, "L2 in flight", 5)), Damage.NONE,
      0, 0, 4_500, 29.6);
  static final Row NO_MACHINE = new Row("no state machine", 1_000, Map.of("CACHE/CACHE_HIT", 200),
      Map.of("exact re-send", Map.of("L1", 200), "illegal transition", Map.of("accepted", 3)), new Damage(0, 10, 0, 25, 40), 200, 1_000,
      2_000, 25);

  @Test
  void markdown_caughtColumnsInLayerOrder_zeroWhereARowHasNone_thenDamageAndCost() {
    String md = AblationReport.markdown(List.of(FULL, L1_OFF, NO_MACHINE));

    assertThat(md).contains("| Configuration | records | L1: `CACHE_HIT` | L2 ledger: `LEDGER_HIT` | L3 state machine:"
        + " `ALREADY_APPLIED` |\n"
        + "|---|---:|---:|---:|---:|\n"
        + "| all three layers | 1,000 | 200 | 5 | 10 |\n"
        + "| L1 off | 1,000 | 0 | 205 | 10 |\n"
        + "| no state machine | 1,000 | 200 | 0 | 0 |\n");
    assertThat(md).contains("| Records in the stream | all three layers | L1 off | no state machine |\n|---|---|---|---|\n"
        + "| exact re-send (200) | 200 L1 | 195 L2, 5 L2 in flight | 200 L1 |\n"
        + "| illegal transition (3) | – | – | 3 accepted |\n");
    assertThat(md).contains("| all three layers | 0 | 0 | 0 | 0 | 0 | 20.0% | 3.00 | 30 s |");
    assertThat(md).contains("| L1 off | 0 | 0 | 0 | 0 | 0 | L1 off | 4.50 | 30 s |");
    assertThat(md).contains("| no state machine | 0 | 10 | 0 | 25 | 40 | 20.0% | 2.00 | 25 s |");
  }

  @Test
  void summary_fullFirst_thenTheDamageOfEachReducedConfiguration_andTheCostOfTheHarmlessOnes() {
    assertThat(AblationReport.summary(List.of(FULL, L1_OFF, NO_MACHINE))).isEqualTo("**Measured.** All three layers: nothing lost, doubled"
        + " or wrongly escalated. Without a layer: no state machine: 10 doubled, 25 applied against the machine, 40 not escalated."
        + " No damage: L1 off, 4.50 MySQL round trips per record (all three layers: 3.00).");
  }

  @Test
  void summary_namesDamageOfTheFullConfiguration() {
    Row bad = new Row("all three layers", 10, Map.of(), Map.of(), new Damage(1, 0, 2, 0, 0), 0, 0, 0, 1);
    assertThat(AblationReport.summary(List.of(bad))).isEqualTo("**Measured.** All three layers did damage: 1 lost, 2 wrongly escalated.");
  }

  @Test
  void yaml_eachConfigurationChangesTheScenariosYaml() {
    String y = """
        redis:
          uri: redis://127.0.0.1:6379
          key-prefix: 'x:'
        routes:
          - name: pay
            machine: line
            entity-id: /line_id
            event: /event
            business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
            lease: 5s
          - name: deliver
            machine: line
            entity-id: /line_id
            event: /event
            business-key: [/order_id, /sku_id, /warehouse_id, /batch_no, /message_id]
            lease: 5s
        """;
    assertThat(LayerAblation.yaml(y, LayerAblation.Config.ALL)).contains("    lease: 5s\n    redis-ttl: 30000ms\n").contains("  uri: ");
    assertThat(LayerAblation.yaml(y, LayerAblation.Config.L1_TTL_7D)).contains("    redis-ttl: 7000ms\n");
    assertThat(LayerAblation.yaml(y, LayerAblation.Config.L1_OFF)).doesNotContain("uri:").contains("key-prefix");
    assertThat(LayerAblation.yaml(y, LayerAblation.Config.NARROW_KEY)).contains("business-key: [/order_id, /sku_id]\n")
        .contains("business-key: [/order_id, /sku_id, /message_id]\n");
    assertThat(LayerAblation.yaml(y, LayerAblation.Config.NO_MACHINE)).doesNotContain("machine:").doesNotContain("entity-id")
        .doesNotContain("    event:").contains("[/order_id, /sku_id, /warehouse_id, /batch_no, /event]\n")
        .contains("[/order_id, /sku_id, /warehouse_id, /batch_no, /event, /message_id]\n");
  }

  @Test
  void sum_addsACountersSamplesOverItsLabels() {
    String scrape = """
        # TYPE onceguard_l1_hits_total counter
        onceguard_l1_hits_total{route="create",} 4.0
        onceguard_l1_hits_total{route="pay",} 6.0
        onceguard_l1_misses_total{route="pay",} 9.0
        onceguard_mysql_round_trips_total 1234.0
        """;
    assertThat(AnswerFiles.sum(scrape, "onceguard_l1_hits_total")).isEqualTo(10);
    assertThat(AnswerFiles.sum(scrape, "onceguard_mysql_round_trips_total")).isEqualTo(1234);
    assertThat(AnswerFiles.sum(scrape, "onceguard_absent_total")).as("a counter the scrape lacks").isEqualTo(-1);
  }
}
