package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.ops.PrometheusServer;
import dev.onceguard.it.ops.PrometheusTools;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * The shipped alerts on a real Prometheus scraping a real sidecar process: a route whose
 * escalation topic was deleted after the start keeps its escalated record in flight (the write is retried, the
 * partition commits nothing past it). Prometheus, scraping every second and evaluating the shipped
 * rules every second (their {@code for:} durations shortened, their expressions as shipped), fires
 * {@code OnceGuardEscalationSendFailing}; the partition's oldest-unfinished age climbs while it
 * does. Every metric the rules and the Grafana dashboard use exists, with the type the rules
 * assume, and every dashboard query runs.
 */
class AlertsIT {
  private static final String ROUTE = "alerts";
  /** The records' escalation takes at least producer max.block.ms (10 s) to fail; then one scrape and one evaluation. */
  private static final Duration FIRING_WITHIN = Duration.ofSeconds(120);

  @Test
  void escalationTopicMissing_recordStaysInFlight_andTheShippedAlertFires() throws Exception {
    String database = "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    try (KafkaSupport kafka = new KafkaSupport();
        Mysql mysql = new Mysql();
        RecordingBusiness business = RecordingBusiness.start()) {
      String topic = kafka.createTopic("alerts", 1);
      // created for the start (run refuses to start without it), deleted once the sidecar serves
      String missingEscalationTopic = kafka.createTopicNamed(topic + "-escalate-deleted", 1);
      int grpcPort = RecordingBusiness.freePort();
      int metricsPort = RecordingBusiness.freePort();
      String yaml = """
          sidecar: {instance-id: alerts, grpc-listen: 127.0.0.1:%d, metrics-listen: 127.0.0.1:%d, shutdown-timeout: 2s, commit-interval: 200ms}
          kafka: {bootstrap-servers: %s}
          mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: 4}
          redis: {uri: %s, key-prefix: 'ogit:%s:', timeout: 200ms}
          routes:
            - name: %s
              topics: [%s]
              group: alerts-%s
              business-key: [/id]
              target: %s
              escalation-topic: %s
          """.formatted(grpcPort, metricsPort, kafka.bootstrap(), ItEnv.mysqlHost(), ItEnv.mysqlPort(), ItEnv.mysqlUser(),
          ItEnv.mysqlPassword().replace("'", "''"), database, ItEnv.redisUri(), database, ROUTE, topic, ItEnv.uniqueSuffix(),
          business.target(), missingEscalationTopic);
      Path rules = SidecarProcess.LOGS.resolve("alerts-rules.yaml");
      Files.createDirectories(SidecarProcess.LOGS);
      Files.writeString(rules, withShortForDurations(Files.readString(PrometheusTools.rules())));

      try (SidecarProcess sidecar = SidecarProcess.start("alerts", yaml, grpcPort);
          PrometheusServer prometheus = PrometheusServer.start("alerts", SidecarProcess.LOGS, rules, "127.0.0.1:" + metricsPort)) {
        sidecar.awaitServing(Duration.ofSeconds(60));
        kafka.deleteTopic(missingEscalationTopic);
        // one record the business accepts, then one without the business key: MISSING_FIELD, escalated
        kafka.produce(List.of(
            new ProducerRecord<>(topic, "a".getBytes(StandardCharsets.UTF_8), "{\"id\":\"a\"}".getBytes(StandardCharsets.UTF_8)),
            new ProducerRecord<>(topic, "b".getBytes(StandardCharsets.UTF_8), "{\"other\":1}".getBytes(StandardCharsets.UTF_8))));

        JsonNode alert = awaitFiring(prometheus, "OnceGuardEscalationSendFailing", sidecar);
        assertThat(alert.path("labels").path("route").asText()).isEqualTo(ROUTE);
        assertThat(alert.path("labels").path("kind").asText()).isEqualTo("ESCALATION");
        assertThat(alert.path("labels").path("severity").asText()).isEqualTo("critical");
        assertThat(alert.path("annotations").path("summary").asText()).contains("route " + ROUTE);

        // the stuck record shows, and keeps climbing, scrape after scrape
        String age = "onceguard_partition_oldest_unfinished_age_seconds{route=\"" + ROUTE + "\"}";
        double first = value(prometheus, age);
        TimeUnit.SECONDS.sleep(4);
        double later = value(prometheus, age);
        assertThat(first).as("the escalation failed at least once: 10 s of metadata wait").isGreaterThan(5);
        assertThat(later).isGreaterThan(first + 2);
        assertThat(value(prometheus, "onceguard_partition_lag_records{route=\"" + ROUTE + "\"}"))
            .as("the escalated record is not committable").isGreaterThanOrEqualTo(1);
        assertThat(value(prometheus, "onceguard_escalation_send_failures_total{route=\"" + ROUTE + "\",kind=\"ESCALATION\"}"))
            .isGreaterThanOrEqualTo(1);
        assertThat(value(prometheus, "onceguard_verdicts_total{route=\"" + ROUTE + "\",disposition=\"ACCEPTED\"}")).isEqualTo(1);
        assertThat(business.okDeliveries()).hasSize(1);

        assertMetricTypes(prometheus);
        assertBuildInfo(prometheus);
        assertRulesAndDashboardUseExistingMetrics(prometheus);
        assertDashboardQueriesRun(prometheus);
      } finally {
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  /** The rules with every {@code for:} at 3 s, so that a test need not wait minutes; expressions untouched. */
  static String withShortForDurations(String rules) {
    String shortened = rules.replaceAll("(?m)^(\\s+)for: \\S+$", "$1for: 3s");
    assertThat(shortened.replaceAll("(?m)^\\s+for: .*\\n", "")).isEqualTo(rules.replaceAll("(?m)^\\s+for: .*\\n", ""));
    return shortened;
  }

  private static JsonNode awaitFiring(PrometheusServer prometheus, String alertname, SidecarProcess sidecar) throws InterruptedException {
    long deadline = System.nanoTime() + FIRING_WITHIN.toNanos();
    List<JsonNode> last = List.of();
    while (System.nanoTime() < deadline) {
      last = prometheus.alerts();
      for (JsonNode a : last) {
        if (alertname.equals(a.path("labels").path("alertname").asText()) && "firing".equals(a.path("state").asText())) {
          return a;
        }
      }
      TimeUnit.MILLISECONDS.sleep(500);
    }
    throw new AssertionError(alertname + " not firing within " + FIRING_WITHIN + "; alerts: " + last
        + "\nsidecar log:\n" + sidecar.tail() + "\nprometheus log:\n" + prometheus.log());
  }

  /** The value of the one series {@code promql} selects. */
  private static double value(PrometheusServer prometheus, String promql) throws InterruptedException {
    List<JsonNode> r = prometheus.query(promql);
    assertThat(r).as(promql).hasSize(1);
    return Double.parseDouble(r.get(0).path("value").get(1).asText());
  }

  /** As Prometheus read them from the sidecar's {@code # TYPE} lines. */
  private static void assertMetricTypes(PrometheusServer prometheus) throws InterruptedException {
    JsonNode metadata = prometheus.api("metadata");
    Map<String, String> expected = Map.ofEntries(
        Map.entry("onceguard_verdicts_total", "counter"),
        Map.entry("onceguard_escalation_send_failures_total", "counter"),
        Map.entry("onceguard_l1_hits_total", "counter"),
        Map.entry("onceguard_l1_misses_total", "counter"),
        Map.entry("onceguard_l1_failures_total", "counter"),
        Map.entry("onceguard_l1_skipped_total", "counter"),
        Map.entry("onceguard_mysql_round_trips_total", "counter"),
        Map.entry("onceguard_mysql_claim_groups_total", "counter"),
        Map.entry("onceguard_mysql_contention_retries_total", "counter"),
        Map.entry("onceguard_record_age_seconds", "histogram"),
        Map.entry("onceguard_l1_available", "gauge"),
        Map.entry("onceguard_route_paused_partitions", "gauge"),
        Map.entry("onceguard_partition_lag_records", "gauge"),
        Map.entry("onceguard_partition_oldest_unfinished_age_seconds", "gauge"),
        Map.entry("onceguard_build_info", "gauge"));
    expected.forEach((name, type) ->
        assertThat(metadata.path(name).path(0).path("type").asText()).as("type of %s in %s", name, metadata).isEqualTo(type));
    // route-level counts carry the route
    assertThat(prometheus.query("onceguard_l1_hits_total{route=\"" + ROUTE + "\"}")).hasSize(1);
  }

  private static void assertBuildInfo(PrometheusServer prometheus) throws InterruptedException {
    List<JsonNode> info = prometheus.query("onceguard_build_info");
    assertThat(info).hasSize(1);
    assertThat(info.get(0).path("metric").path("version").asText()).matches("\\d+\\.\\d+\\.\\d+\\S*");
    assertThat(info.get(0).path("metric").path("commit").asText()).matches("[0-9a-f]{12}(-dirty)?");
  }

  private static final Pattern METRIC = Pattern.compile("\\bonceguard_[a-z0-9_]+");

  private static void assertRulesAndDashboardUseExistingMetrics(PrometheusServer prometheus) throws Exception {
    List<String> exprs = new ArrayList<>(dashboardExprs());
    new ObjectMapper(new YAMLFactory()).readTree(PrometheusTools.rules().toFile()).path("groups").get(0).path("rules")
        .forEach(r -> exprs.add(r.path("expr").asText()));
    Set<String> used = new TreeSet<>();
    for (String expr : exprs) {
      Matcher m = METRIC.matcher(expr);
      while (m.find()) {
        used.add(m.group());
      }
    }
    Set<String> scraped = new TreeSet<>();
    prometheus.api("label/__name__/values").forEach(n -> scraped.add(n.asText()));
    assertThat(used).hasSizeGreaterThan(10);
    assertThat(scraped).as("series the sidecar exposes").containsAll(used);
  }

  private static List<String> dashboardExprs() throws java.io.IOException {
    List<String> exprs = new ArrayList<>();
    new ObjectMapper().readTree(PrometheusTools.dashboard().toFile()).path("panels")
        .forEach(p -> p.path("targets").forEach(t -> exprs.add(t.path("expr").asText())));
    return exprs;
  }

  private static void assertDashboardQueriesRun(PrometheusServer prometheus) throws Exception {
    List<String> exprs = dashboardExprs();
    assertThat(exprs).hasSizeGreaterThan(10);
    for (String expr : exprs) {
      // api() fails on a query Prometheus rejects
      prometheus.query(withDashboardVariables(expr));
    }
    assertThat(prometheus.query(withDashboardVariables(exprs.get(0)))).as("verdicts by disposition: the accepted record").isNotEmpty();
  }

  /** The Grafana variables as "all jobs, all routes", the rate window one minute. */
  private static String withDashboardVariables(String expr) {
    return expr.replace("$__rate_interval", "1m").replace("$job", ".*").replace("$route", ".*");
  }
}
