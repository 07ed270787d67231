package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.client.TcpGate;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.junit.jupiter.api.Test;

/**
 * The preflight of the packaged jar against the real stack: {@code validate --connect} checks
 * Kafka topics, MySQL, Redis and the business target and blames every problem on its component at
 * once (exit 4 when the environment is not ready); {@code run} refuses to start without its
 * escalation topic, or creates it with {@code kafka.create-topics: true}.
 */
class PreflightIT {
  private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(90);

  @Test
  void validateConnect_allGood_exit0_printsPartitionCountsAndEveryComponentOk() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        Mysql mysql = new Mysql();
        RecordingBusiness business = RecordingBusiness.start()) {
      String database = database();
      String source = kafka.createTopic("pre-lines", 3);
      String escalations = kafka.createTopic("pre-lines-escalate", 1);
      String verdicts = kafka.createTopic("pre-verdicts", 2);
      try {
        String yaml = yaml(ItEnv.mysqlPort(), database, true, false, route(source, escalations, verdicts, business.target()));

        SidecarProcess.Outcome r = SidecarProcess.command("preflight-good", yaml, COMMAND_TIMEOUT, "validate", "--connect");

        assertThat(r.exitCode()).as(r.output()).isZero();
        assertThat(r.output())
            .contains("\nready\n")
            .contains("ok    kafka: metadata read from " + ItEnv.kafkaBootstrap() + " (3 topics)")
            .contains("ok    mysql: MySQL " + ItEnv.mysqlHost() + ":" + ItEnv.mysqlPort() + "/" + database + ": connected as ")
            .contains("ok    redis: Redis [" + ItEnv.redisUri() + "] answered PING with PONG")
            .contains("ok    topic: source topic '" + source + "' exists, 3 partition(s)")
            .contains("ok    topic: escalation topic '" + escalations + "' exists, 1 partition(s)")
            .contains("ok    topic: verdict topic '" + verdicts + "' exists, 2 partition(s)")
            .contains("ok    target: business target " + business.target() + " accepts connections")
            .doesNotContain("FAIL").doesNotContain("\tat ");
      } finally {
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  @Test
  void validateConnect_missingEscalationTopic_mysqlCut_targetNotListening_allNamedAtOnce_exit4() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        TcpGate gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort())) {
      gate.cut();
      String source = kafka.createTopic("pre-bad", 2);
      String missingEscalations = "pre-bad-escalate-" + ItEnv.uniqueSuffix();
      String deadTarget = "127.0.0.1:" + RecordingBusiness.freePort();
      String yaml = yaml(gate.port(), database(), false, false, route(source, missingEscalations, null, deadTarget));

      SidecarProcess.Outcome r = SidecarProcess.command("preflight-bad", yaml, COMMAND_TIMEOUT, "validate", "--connect");

      assertThat(r.exitCode()).as(r.output()).isEqualTo(4);
      assertThat(r.output())
          .contains("ok    kafka: metadata read")
          .contains("FAIL  mysql: MySQL " + ItEnv.mysqlHost() + ":" + gate.port() + "/")
          .contains("ok    topic: source topic '" + source + "' exists, 2 partition(s)")
          .contains("FAIL  topic: escalation topic '" + missingEscalations + "' does not exist")
          .contains("FAIL  target: business target " + deadTarget + " cannot be reached: Connection refused")
          .contains("not ready: route lines: escalation topic '" + missingEscalations + "' does not exist")
          .doesNotContain("\tat ").doesNotContain("Exception in thread");
    }
  }

  @Test
  void run_missingEscalationTopic_exitsAtStart_namingIt_createsNothing() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        Mysql mysql = new Mysql();
        RecordingBusiness business = RecordingBusiness.start()) {
      String database = database();
      String source = kafka.createTopic("pre-run", 2);
      String missingEscalations = "pre-run-escalate-" + ItEnv.uniqueSuffix();
      try {
        String yaml = yaml(ItEnv.mysqlPort(), database, false, false, route(source, missingEscalations, null, business.target()));

        SidecarProcess.Outcome r = SidecarProcess.command("preflight-run-missing", yaml, COMMAND_TIMEOUT, "run");

        assertThat(r.exitCode()).as(r.output()).isEqualTo(4);
        assertThat(r.output())
            .contains("not ready: route lines: escalation topic '" + missingEscalations + "' does not exist. Create it before "
                + "starting the sidecar, or set kafka.create-topics: true")
            .doesNotContain("sidecar pre started").doesNotContain("\tat ");
        assertThat(topics(List.of(missingEscalations))).as("nothing created without kafka.create-topics").isEmpty();
      } finally {
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  @Test
  void run_createTopics_createsMissingEscalationAndVerdictTopicsWithTheSourcePartitions_thenServes() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        Mysql mysql = new Mysql();
        RecordingBusiness business = RecordingBusiness.start()) {
      String database = database();
      String source = kafka.createTopic("pre-create", 3);
      String escalations = "pre-create-escalate-" + ItEnv.uniqueSuffix();
      String verdicts = "pre-create-verdicts-" + ItEnv.uniqueSuffix();
      int grpc = RecordingBusiness.freePort();
      String yaml = yaml(ItEnv.mysqlPort(), database, false, true, route(source, escalations, verdicts, business.target()))
          .replace("grpc-listen: 127.0.0.1:0", "grpc-listen: 127.0.0.1:" + grpc);
      try (SidecarProcess p = SidecarProcess.start("preflight-create-topics", yaml, grpc)) {
        p.awaitServing(Duration.ofSeconds(60));

        Map<String, TopicDescription> created = topics(List.of(escalations, verdicts));
        assertThat(created).containsOnlyKeys(escalations, verdicts);
        assertThat(created.get(escalations).partitions()).as("as many partitions as the source topic").hasSize(3);
        assertThat(created.get(verdicts).partitions()).hasSize(3);
        assertThat(p.log())
            .contains("route lines: created escalation topic '" + escalations + "' with 3 partition(s), as source topic '" + source + "'")
            .contains("route lines: created verdict topic '" + verdicts + "'");
        assertThat(p.stop(Duration.ofSeconds(30))).isZero();
      } finally {
        kafka.deleteOnClose(escalations, verdicts);
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  /** The descriptions of those of {@code names} that exist. */
  private static Map<String, TopicDescription> topics(List<String> names) throws Exception {
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, ItEnv.kafkaBootstrap()))) {
      Map<String, TopicDescription> out = new java.util.LinkedHashMap<>();
      admin.describeTopics(names).topicNameValues().forEach((name, f) -> {
        try {
          out.put(name, f.get(30, TimeUnit.SECONDS));
        } catch (java.util.concurrent.ExecutionException e) {
          if (!(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException)) {
            throw new AssertionError("cannot describe " + name, e.getCause());
          }
        } catch (Exception e) {
          throw new AssertionError("cannot describe " + name, e);
        }
      });
      return out;
    }
  }

  private static String database() {
    return "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }

  private static String yaml(int mysqlPort, String database, boolean redis, boolean createTopics, String route) {
    return """
        sidecar:
          instance-id: pre
          grpc-listen: 127.0.0.1:0
          shutdown-timeout: 10s
        kafka:
          bootstrap-servers: %s
          create-topics: %s
          properties: {session.timeout.ms: "6000", heartbeat.interval.ms: "1000"}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: 2}
        %s
        %s
        routes:
        %s""".formatted(ItEnv.kafkaBootstrap(), createTopics, ItEnv.mysqlHost(), mysqlPort, ItEnv.mysqlUser(),
        ItEnv.mysqlPassword().replace("'", "''"), database, redis ? "redis: {uri: '" + ItEnv.redisUri() + "'}" : "",
        OrderScenario.MACHINE_YAML, route);
  }

  /** One route of machine {@code line} (also {@link StoreSecurityIT}'s). @param verdicts {@code null}: none */
  static String route(String source, String escalations, String verdicts, String target) {
    return """
          - name: lines
            topics: [%s]
            group: pre-lines-%s
            machine: line
            entity-id: /line_id
            event: /event
            business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
            target: %s
            escalation-topic: %s
        %s""".formatted(source, ItEnv.uniqueSuffix(), target, escalations,
        verdicts == null ? "" : "    verdict-topic: " + verdicts + "\n");
  }
}
