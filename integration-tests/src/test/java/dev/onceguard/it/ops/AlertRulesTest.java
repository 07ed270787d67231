package dev.onceguard.it.ops;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The shipped alert rules against the real {@code promtool} (Debian package {@code prometheus}):
 * they parse, and {@code alerts.test.yaml} (when each alert fires, and when it must not) passes.
 * With a real Prometheus and a real sidecar: {@code AlertsIT}.
 */
class AlertRulesTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  @Test
  void promtoolCheckRules_acceptsTheShippedRules() {
    PrometheusTools.Result r = PrometheusTools.run(PrometheusTools.rules().getParent(), TIMEOUT,
        PrometheusTools.executable("promtool").toString(), "check", "rules", PrometheusTools.rules().toString());

    assertThat(r.exit()).as(r.output()).isZero();
    assertThat(r.output()).contains("SUCCESS: 7 rules found");
  }

  @Test
  void promtoolTestRules_passesTheRulesUnitTests() {
    PrometheusTools.Result r = PrometheusTools.run(PrometheusTools.ruleTests().getParent(), TIMEOUT,
        PrometheusTools.executable("promtool").toString(), "test", "rules", PrometheusTools.ruleTests().getFileName().toString());

    assertThat(r.exit()).as(r.output()).isZero();
    assertThat(r.output()).contains("SUCCESS");
  }

  @Test
  void everyAlert_hasASeverity_aSummary_andARunbook_andEveryOneIsUnitTested() throws Exception {
    ObjectMapper yaml = new ObjectMapper(new YAMLFactory());
    JsonNode rules = yaml.readTree(PrometheusTools.rules().toFile()).path("groups").get(0).path("rules");
    String tests = java.nio.file.Files.readString(PrometheusTools.ruleTests());

    assertThat(rules).isNotEmpty();
    for (JsonNode rule : rules) {
      String name = rule.path("alert").asText();
      assertThat(rule.path("labels").path("severity").asText()).as(name).isIn("critical", "warning", "ticket");
      assertThat(rule.path("annotations").path("summary").asText()).as(name).isNotBlank();
      assertThat(rule.path("annotations").path("runbook").asText()).as(name).hasSizeGreaterThan(80);
      assertThat(tests).as("alerts.test.yaml tests " + name).contains("alertname: " + name);
    }
  }
}
