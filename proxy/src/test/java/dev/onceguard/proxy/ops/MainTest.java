package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class MainTest {
  @TempDir
  Path dir;

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    CommandLine cl = Main.commandLine();
    cl.setOut(new PrintWriter(out, true));
    cl.setErr(new PrintWriter(err, true));
    return cl.execute(args);
  }

  private Path file(String yaml) throws Exception {
    Path p = dir.resolve("onceguard.yaml");
    Files.writeString(p, yaml);
    return p;
  }

  private static final String VALID = """
      kafka:
        bootstrap-servers: 127.0.0.1:9092
        properties:
          enable.auto.commit: "true"
      mysql:
        database: test
        password: s3cret
      routes:
        - name: orders
          topics: [orders]
          business-key: [/order_id, /sku_id]
          target: 127.0.0.1:7000
      """;

  @Test
  void version_printsTheBuildsVersionAndCommit() {
    assertThat(run("--version")).isZero();
    assertThat(out.toString().strip()).isEqualTo(BuildInfo.current().text())
        .matches("onceguard \\d+\\.\\d+\\.\\d+\\S* \\(commit [0-9a-f]{12}(-dirty)?\\)");
  }

  @Test
  void validate_validConfig_printsSummary_exit0_withoutSecrets() throws Exception {
    int code = run("validate", "--config", file(VALID).toString());
    assertThat(code).isZero();
    assertThat(out.toString())
        .contains("is valid")
        .contains("route orders: topics [orders], group onceguard-orders, push -> 127.0.0.1:7000")
        .contains("business-key [/order_id, /sku_id]")
        .contains("warning: kafka.properties.enable.auto.commit=true is ignored")
        .doesNotContain("s3cret");
    assertThat(err.toString()).isEmpty();
  }

  @Test
  void validate_logFormatAndTracing_inTheSummary_jsonSwitchesTheStdoutAppender_endpointCredentialsHidden() throws Exception {
    ch.qos.logback.classic.Logger root =
        ((ch.qos.logback.classic.LoggerContext) org.slf4j.LoggerFactory.getILoggerFactory()).getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    try {
      int code = run("validate", "--config", file("sidecar: {log-format: json}\n"
          + "tracing: {otlp-endpoint: 'http://og:pw-secret@collector:4318', sample-ratio: 0.5}\n" + VALID).toString());

      assertThat(code).isZero();
      assertThat(out.toString()).contains("logs: json, tracing: OTLP http/protobuf to http://***@collector:4318, sample ratio 0.5")
          .doesNotContain("pw-secret");
      assertThat(root.getAppender(LogFormat.JSON_APPENDER)).as("JSON lines from here on").isNotNull();
      assertThat(root.getAppender(LogFormat.TEXT_APPENDER)).isNull();
    } finally {
      LogFormat.apply("text");
    }
    assertThat(root.getAppender(LogFormat.TEXT_APPENDER)).as("text restored").isNotNull();
    assertThat(root.getAppender(LogFormat.JSON_APPENDER)).isNull();
  }

  @Test
  void validate_fingerprintExcludeRemovingAKeyField_isValid_withAWarningNamingIt() throws Exception {
    int code = run("validate", "--config", file(VALID.replace("target: 127.0.0.1:7000",
        "target: 127.0.0.1:7000\n    fingerprint-exclude: [/message_id, /sku_id]")).toString());
    assertThat(code).isZero();
    assertThat(out.toString()).contains("warning: route 'orders': fingerprint-exclude '/sku_id' removes business-key field 'sku_id'");
  }

  @Test
  void validate_invalidConfig_exit2_withPathInMessage_noStackTrace() throws Exception {
    int code = run("validate", "--config", file(VALID.replace("target: 127.0.0.1:7000", "target: nowhere")).toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).startsWith("config error: routes[0].target: 'nowhere' is not host:port");
    assertThat(err.toString()).doesNotContain("at dev.onceguard");
  }

  @Test
  void validate_missingFile_exit2() {
    int code = run("validate", "--config", dir.resolve("nope.yaml").toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).startsWith("config error: cannot read config file");
  }

  @Test
  void run_invalidConfig_exit2_beforeStartingAnything() throws Exception {
    int code = run("run", "--config", file("routes: []\n").toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).startsWith("config error: ");
  }

  @Test
  void run_failFast_mysqlUnreachable_exit1_namingTheDatabase() throws Exception {
    // without --fail-fast, run waits for MySQL instead (StartupWaitIT)
    String yaml = VALID.replace("  database: test\n", "  database: test\n  port: 1\n").replace("bootstrap-servers: 127.0.0.1:9092", "bootstrap-servers: 127.0.0.1:9")
        + "sidecar:\n  grpc-listen: 127.0.0.1:0\n";
    assertThat(yaml).contains("  port: 1\n");
    int code = run("run", "--fail-fast", "--config", file(yaml).toString());
    assertThat(code).isEqualTo(1);
    assertThat(err.toString()).startsWith("error: cannot start the guard (MySQL ").contains(":1/");
  }

  @Test
  void validate_severalProblems_allPrinted_oneLineEach_exit2_noStackTrace() throws Exception {
    String yaml = VALID.replace("enable.auto.commit: \"true\"", "security.protocol: SASL_SSLX")
        .replace("    business-key:", "    busines-key:")
        + "sidecar:\n  grpc-listen: 127.0.0.1:99999\n";

    int code = run("validate", "--config", file(yaml).toString());

    assertThat(code).isEqualTo(2);
    assertThat(err.toString().lines()).satisfiesExactly(
        l -> assertThat(l).startsWith("config error: sidecar.grpc-listen: '127.0.0.1:99999' is not host:port (port 0 to 65535)"),
        l -> assertThat(l).startsWith("config error: kafka.properties.security.protocol: Invalid value SASL_SSLX"),
        l -> assertThat(l).isEqualTo("config error: routes[0].busines-key: unknown setting (did you mean 'business-key'?)"));
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void run_badKafkaPropertyValue_exit2_blamedOnTheProperty_beforeConnectingAnywhere() throws Exception {
    int code = run("run", "--config", file(VALID.replace("enable.auto.commit: \"true\"", "security.protocol: SASL_SSLX")).toString());

    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).startsWith("config error: kafka.properties.security.protocol: Invalid value SASL_SSLX")
        .doesNotContain("MySQL").doesNotContain("\tat ");
  }

  @Test
  void validate_kafkaPropertiesThatTheProducerRefusesTogether_exit2() throws Exception {
    // each value is valid alone; the escalation producer is idempotent, which needs retries
    int code = run("validate", "--config", file(VALID.replace("enable.auto.commit: \"true\"", "retries: \"0\"")).toString());

    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).startsWith("config error: kafka.properties: ").contains("retries")
        .contains("(in the escalation producer's configuration)");
  }

  @Test
  void validateConnect_nothingReachable_exit4_eachProblemBlamedOnItsComponent_noStackTrace() throws Exception {
    String yaml = VALID.replace("bootstrap-servers: 127.0.0.1:9092", "bootstrap-servers: 127.0.0.1:9")
        .replace("  database: test\n", "  database: test\n  port: 1\n")
        .replace("target: 127.0.0.1:7000", "target: 127.0.0.1:1");

    int code = run("validate", "--connect", "--config", file(yaml).toString());

    assertThat(code).isEqualTo(4);
    assertThat(out.toString()).contains("is valid")
        .contains("FAIL  kafka: Kafka (127.0.0.1:9): ")
        .contains("FAIL  mysql: MySQL 127.0.0.1:1/test (user root): ")
        .contains("skip  redis: redis.uri not set")
        .contains("FAIL  topic: source topic 'orders' not checked: Kafka metadata cannot be read")
        .contains("FAIL  target: business target 127.0.0.1:1 cannot be reached: ");
    assertThat(err.toString().lines()).contains("not ready: route orders: business target 127.0.0.1:1 cannot be reached: Connection refused")
        .anySatisfy(l -> assertThat(l).startsWith("not ready: MySQL 127.0.0.1:1/test"))
        .anySatisfy(l -> assertThat(l).startsWith("not ready: Kafka (127.0.0.1:9)"));
    assertThat(out.toString() + err).doesNotContain("\tat ").doesNotContain("Exception:").doesNotContain("s3cret");
  }

  @Test
  void noCommand_isAUsageError() {
    assertThat(run()).isEqualTo(2);
    assertThat(err.toString()).contains("missing command");
  }

  @Test
  void ttlAdvice_fromPrometheus_readsTheDuplicateAgeHistogram() throws Exception {
    // a stand-in for Prometheus's query API (the real one is exercised by AlertsIT): answers the
    // three queries ttl-advice sends with canned vectors
    com.sun.net.httpserver.HttpServer prom = com.sun.net.httpserver.HttpServer.create(new java.net.InetSocketAddress("127.0.0.1", 0), 0);
    java.util.List<String> queries = new java.util.concurrent.CopyOnWriteArrayList<>();
    prom.createContext("/api/v1/query", ex -> {
      String q = java.net.URLDecoder.decode(ex.getRequestURI().getRawQuery().substring("query=".length()), java.nio.charset.StandardCharsets.UTF_8);
      queries.add(q);
      String result = q.startsWith("sum by (le)")
          ? "[{\"metric\":{\"le\":\"86400.0\"},\"value\":[1,\"40\"]},{\"metric\":{\"le\":\"1209600.0\"},\"value\":[1,\"100\"]},"
              + "{\"metric\":{\"le\":\"+Inf\"},\"value\":[1,\"100\"]}]"
          : q.contains("CACHE_HIT\"}") ? "[{\"metric\":{},\"value\":[1,\"900\"]}]" : "[]";
      byte[] body = ("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":" + result + "}}")
          .getBytes(java.nio.charset.StandardCharsets.UTF_8);
      ex.sendResponseHeaders(200, body.length);
      ex.getResponseBody().write(body);
      ex.close();
    });
    prom.start();
    try {
      int code = run("ttl-advice", "-c", file(VALID).toString(), "--prometheus", "http://127.0.0.1:" + prom.getAddress().getPort(),
          "--window", "14");
      assertThat(code).as(err.toString()).isZero();
    } finally {
      prom.stop(0);
    }
    assertThat(queries.get(0)).isEqualTo(
        "sum by (le) (increase(onceguard_duplicate_age_seconds_bucket{route=\"orders\",reason=\"LEDGER_HIT\"}[14d]))");
    assertThat(out.toString()).contains("route 'orders' (redis-ttl 30 d), Prometheus, last 14 d")
        .contains("100 duplicates missed L1").contains("L1 answered 900").contains("1 d 40.0%").contains("14 d 100.0%");
  }

  @Test
  void configShortOption_worksLikeTheLongOne() throws Exception {
    assertThat(run("validate", "-c", file(VALID).toString())).isZero();
    assertThat(out.toString()).contains("orders");
  }

  @Test
  void noConfig_andNoEnvironmentVariable_isAUsageErrorNamingBoth() {
    // (the test JVM has no ONCEGUARD_CONFIG; picocli resolves ${env:...} from the process environment)
    org.junit.jupiter.api.Assumptions.assumeTrue(System.getenv(Main.CONFIG_ENV) == null);
    assertThat(run("validate")).isEqualTo(2);
    assertThat(err.toString()).contains("give --config FILE (or -c FILE), or set ONCEGUARD_CONFIG");
  }

  @Test
  void help_listsTheCommands_andHelpOfOneCommandShowsItsOptions() {
    assertThat(run("help")).isZero();
    assertThat(out.toString()).contains("run").contains("validate").contains("explain").contains("redrive").contains("reset-entity")
        .contains("ttl-advice");
    out.getBuffer().setLength(0);
    assertThat(run("help", "redrive")).isZero();
    assertThat(out.toString()).contains("--dry-run").contains("--reason").contains("-c, --config");
  }
}
