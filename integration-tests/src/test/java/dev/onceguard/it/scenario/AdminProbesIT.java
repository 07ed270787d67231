package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.it.client.TcpGate;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * The admin listener of the packaged sidecar ({@code sidecar.admin-listen}) against the real stack:
 * {@code /readyz} answers 503 with the reason while MySQL is unreachable (at start and later),
 * while the sidecar drains, and while a route's source topic is missing, and 200
 * when all is well; {@code /healthz} stays 200 through all of it; {@code /metrics} serves what
 * {@code metrics-listen} serves; the gRPC health service of each route name follows readiness.
 */
class AdminProbesIT {
  private static final Duration WAIT = Duration.ofSeconds(60);
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  @Test
  void mysqlDown_thenDraining_readyz503WithTheReason_healthzStays200() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        Mysql mysql = new Mysql();
        RecordingBusiness business = RecordingBusiness.start();
        TcpGate gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort())) {
      String database = database();
      String source = kafka.createTopic("adm-lines", 1);
      String escalations = kafka.createTopic("adm-lines-escalate", 1);
      String verdicts = kafka.createTopic("adm-verdicts", 1);
      int grpc = RecordingBusiness.freePort();
      int admin = RecordingBusiness.freePort();
      int metrics = RecordingBusiness.freePort();
      String yaml = yaml(grpc, admin, metrics, gate.port(), database, route("lines", source, escalations, verdicts, true, business.target()));
      gate.cut();
      try (SidecarProcess p = SidecarProcess.start("admin-probes-mysql", yaml, grpc)) {
        // start-up waits for MySQL: live, not ready, and the body says why
        HttpResponse<String> starting = await(p, admin, "/readyz", r -> r.statusCode() == 503 && r.body().contains("waiting for MySQL"));
        assertThat(starting.body()).startsWith("not ready: starting: waiting for MySQL");
        assertThat(get(admin, "/healthz").statusCode()).isEqualTo(200);

        gate.restore();
        HttpResponse<String> ready = await(p, admin, "/readyz", r -> r.statusCode() == 200);
        assertThat(ready.body()).startsWith("ready\n")
            .contains("ok    mysql: answered a ping")
            .contains("route lines:\n  ok    consumer: in group")
            .contains("ok    topic: escalation topic '" + escalations + "' exists");
        awaitHealth(p, "lines", ServingStatus.SERVING);
        assertThat(typeLines(get(admin, "/metrics").body())).as("admin /metrics serves what metrics-listen serves")
            .isNotEmpty().isEqualTo(typeLines(get(metrics, "/metrics").body()));

        gate.cut();
        HttpResponse<String> down = await(p, admin, "/readyz", r -> r.statusCode() == 503);
        assertThat(down.body()).startsWith("not ready: MySQL: ").contains("FAIL  mysql: MySQL: ");
        assertThat(get(admin, "/healthz").statusCode()).as("MySQL down is not a reason to restart").isEqualTo(200);
        awaitHealth(p, "lines", ServingStatus.NOT_SERVING);

        gate.restore();
        await(p, admin, "/readyz", r -> r.statusCode() == 200);
        awaitHealth(p, "lines", ServingStatus.SERVING);

        // a record the business holds for 5 s keeps the drain going while we look
        business.behave(d -> Reply.ok().after(Duration.ofSeconds(5)));
        kafka.produce(List.of(new ProducerRecord<>(source, "l-1".getBytes(StandardCharsets.UTF_8), """
            {"line_id":"l-1","order_id":"o-1","sku_id":"s-1","warehouse_id":"w-1","batch_no":1,"event":"create"}"""
            .getBytes(StandardCharsets.UTF_8))));
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (business.inFlight() == 0 && System.nanoTime() < deadline) {
          TimeUnit.MILLISECONDS.sleep(50);
        }
        assertThat(business.inFlight()).as("the record reached the business").isEqualTo(1);
        p.signalStop();
        HttpResponse<String> draining = await(p, admin, "/readyz", r -> r.statusCode() == 503);
        assertThat(draining.body()).startsWith("not ready: draining").contains("skip  mysql: not pinged while draining");
        assertThat(get(admin, "/healthz").statusCode()).as("draining is alive").isEqualTo(200);
        assertThat(business.inFlight()).as("still draining while readiness said so").isEqualTo(1);
        assertThat(p.awaitExit(Duration.ofSeconds(30))).isZero();
        assertThat(business.okDeliveries()).hasSize(1);
      } finally {
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  /**
   * A missing source topic at start: the sidecar starts and waits for it (an escalation topic
   * missing at start makes {@code run} exit instead: PreflightIT).
   */
  @Test
  void missingSourceTopic_readyz503NamingIt_otherRouteServes_200OnceItExists() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        Mysql mysql = new Mysql();
        RecordingBusiness business = RecordingBusiness.start()) {
      String database = database();
      String suffix = ItEnv.uniqueSuffix();
      String missingSource = "adm-missing-source-" + suffix;
      String linesEscalations = kafka.createTopic("adm-lines-escalate", 1);
      String auditSource = kafka.createTopic("adm-audit", 1);
      String auditEscalations = kafka.createTopic("adm-audit-escalate", 1);
      int grpc = RecordingBusiness.freePort();
      int admin = RecordingBusiness.freePort();
      String yaml = yaml(grpc, admin, 0, ItEnv.mysqlPort(), database,
          route("lines", missingSource, linesEscalations, null, true, business.target())
              + route("audit", auditSource, auditEscalations, null, false, business.target()));
      try (SidecarProcess p = SidecarProcess.start("admin-probes-topics", yaml, grpc)) {
        // both consumers in their groups: the missing source is then the only reason
        HttpResponse<String> r = await(p, admin, "/readyz", x -> x.statusCode() == 503 && !x.body().contains("starting")
            && x.body().contains("does not exist") && !x.body().contains("has not joined"));
        assertThat(r.body())
            .startsWith("not ready: route lines: source topic '" + missingSource + "' does not exist")
            .contains("ok    mysql: answered a ping")
            .contains("ok    topic: escalation topic '" + auditEscalations + "' exists")
            .doesNotContain("route lines: escalation").doesNotContain("route audit: ");
        assertThat(p.log()).contains("route lines: source topic '" + missingSource + "' does not exist: the route waits for it");
        assertThat(get(admin, "/healthz").statusCode()).isEqualTo(200);
        awaitHealth(p, "lines", ServingStatus.NOT_SERVING);
        awaitHealth(p, "audit", ServingStatus.SERVING);

        kafka.createTopicNamed(missingSource, 1);
        HttpResponse<String> ready = await(p, admin, "/readyz", x -> x.statusCode() == 200);
        assertThat(ready.body()).startsWith("ready\n").contains("ok    topic: source topic '" + missingSource + "' exists, 1 partition(s)");
        awaitHealth(p, "lines", ServingStatus.SERVING);
        assertThat(p.stop(Duration.ofSeconds(30))).isZero();
      } finally {
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  private static String database() {
    return "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }

  /** @param metricsPort 0: no metrics-listen */
  private static String yaml(int grpc, int admin, int metricsPort, int mysqlPort, String database, String routes) {
    return """
        sidecar:
          instance-id: adm
          grpc-listen: 127.0.0.1:%d
          admin-listen: 127.0.0.1:%d
        %s  shutdown-timeout: 20s
          commit-interval: 200ms
        kafka:
          bootstrap-servers: %s
          properties: {session.timeout.ms: "6000", heartbeat.interval.ms: "1000"}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: 4}
        %s
        routes:
        %s""".formatted(grpc, admin, metricsPort == 0 ? "" : "  metrics-listen: 127.0.0.1:" + metricsPort + "\n",
        ItEnv.kafkaBootstrap(), ItEnv.mysqlHost(), mysqlPort, ItEnv.mysqlUser(), ItEnv.mysqlPassword().replace("'", "''"), database,
        OrderScenario.MACHINE_YAML, routes);
  }

  /** @param verdicts {@code null}: none; {@code machine}: over the order-line machine, else append-only */
  private static String route(String name, String source, String escalations, String verdicts, boolean machine, String target) {
    return """
          - name: %s
            topics: [%s]
            group: adm-%s-%s
        %s    business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
            target: %s
            escalation-topic: %s
        %s""".formatted(name, source, name, ItEnv.uniqueSuffix(),
        machine ? "    machine: line\n    entity-id: /line_id\n    event: /event\n" : "", target, escalations,
        verdicts == null ? "" : "    verdict-topic: " + verdicts + "\n");
  }

  /** The {@code # TYPE} lines: which metric families are served, whatever their values now. */
  private static List<String> typeLines(String prometheusText) {
    return prometheusText.lines().filter(l -> l.startsWith("# TYPE ")).sorted().collect(Collectors.toList());
  }

  private HttpResponse<String> get(int port, String path) throws IOException, InterruptedException {
    return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(10)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** Polls until a response matches; fails with the last one and the sidecar's log. */
  private HttpResponse<String> await(SidecarProcess p, int port, String path, Predicate<HttpResponse<String>> done)
      throws InterruptedException {
    long deadline = System.nanoTime() + WAIT.toNanos();
    String last = "(no answer yet)";
    while (System.nanoTime() < deadline) {
      try {
        HttpResponse<String> r = get(port, path);
        if (done.test(r)) {
          return r;
        }
        last = r.statusCode() + " " + r.body();
      } catch (IOException notListeningYet) {
        last = notListeningYet.toString();
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    throw new AssertionError(path + " did not answer as expected within " + WAIT + "; last answer: " + last + "\nlog:\n" + p.tail());
  }

  private static void awaitHealth(SidecarProcess p, String service, ServingStatus expected) throws InterruptedException {
    long deadline = System.nanoTime() + WAIT.toNanos();
    ServingStatus last = null;
    while (System.nanoTime() < deadline) {
      last = p.health(service);
      if (last == expected) {
        return;
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    throw new AssertionError("gRPC health of '" + service + "' is " + last + ", not " + expected + " within " + WAIT + "\nlog:\n" + p.tail());
  }
}
