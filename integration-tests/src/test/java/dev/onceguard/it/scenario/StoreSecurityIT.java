package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.secure.PrivateMariadb;
import dev.onceguard.it.secure.SaslSslKafka;
import dev.onceguard.it.secure.TestPki;
import dev.onceguard.it.secure.TlsRedis;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Verdict;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sidecar with every store behind TLS and every secret in a file: a private MariaDB with
 * {@code require_secure_transport} ({@code mysql.ssl-mode}/{@code ssl-ca}), a private TLS-only
 * Redis with a password ({@code rediss://}, {@code redis.ssl-ca}) and a second KRaft broker whose
 * SASL_SSL listener (SCRAM-SHA-512, keytool-made stores) the sidecar consumes through
 * ({@code kafka.properties}). Certificates are made at test time. Passwords come from
 * {@code ${file:...}}; whatever the sidecar prints, for good and bad configurations, must not
 * contain any of them.
 */
class StoreSecurityIT {
  private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(90);
  private static final String RUN = UUID.randomUUID().toString().replace("-", "").substring(0, 10);
  /** Distinctive secret values: the output is searched for each. */
  private static final String MYSQL_PASSWORD = "SECRET-mysql-" + RUN;
  private static final String REDIS_PASSWORD = "SECRET-redis-" + RUN;
  private static final String SCRAM_PASSWORD = "SECRET-scram-" + RUN;
  private static final String STORE_PASSWORD = "SECRET-store-" + RUN;
  private static final String CLIENT_KEY_PASSWORD = "SECRET-p12-" + RUN;

  @TempDir
  static Path dir;

  private static Path ca;
  private static Path otherCa;
  private static PrivateMariadb mysql;
  private static TlsRedis redis;
  private static SaslSslKafka kafka;
  private static Path mysqlPasswordFile;
  private static Path redisPasswordFile;
  private static Path jaasFile;
  private static Path storePasswordFile;
  private static Path clientKeystore;

  /** Everything the sidecar printed in this test, searched for the secrets at the end. */
  private final List<String> outputs = new ArrayList<>();

  @BeforeAll
  static void startStores() throws Exception {
    TestPki pki = new TestPki(dir);
    ca = pki.ca("store-ca");
    otherCa = pki.ca("other-ca");
    // the server's name is 127.0.0.1 only: "localhost" is a wrong host name for verify-full
    Path[] mysqlCert = pki.server(ca, "mysql-server", "IP:127.0.0.1");
    Path[] redisCert = pki.server(ca, "redis-server", "IP:127.0.0.1");
    clientKeystore = pki.pkcs12(pki.server(ca, "mysql-client", "DNS:og-x509"), "mysql-client", CLIENT_KEY_PASSWORD);
    mysql = new PrivateMariadb(Files.createDirectories(dir.resolve("mariadb")), ca, mysqlCert[0], mysqlCert[1], MYSQL_PASSWORD);
    redis = new TlsRedis(Files.createDirectories(dir.resolve("redis")), ca, redisCert[0], redisCert[1], REDIS_PASSWORD);
    kafka = new SaslSslKafka(Files.createDirectories(dir.resolve("kafka")), SCRAM_PASSWORD, STORE_PASSWORD);
    // secret files as a mounted secret would be: with a trailing newline
    mysqlPasswordFile = Files.writeString(dir.resolve("mysql-password"), MYSQL_PASSWORD + "\n");
    redisPasswordFile = Files.writeString(dir.resolve("redis-password"), REDIS_PASSWORD + "\n");
    storePasswordFile = Files.writeString(dir.resolve("truststore-password"), STORE_PASSWORD + "\n");
    jaasFile = Files.writeString(dir.resolve("kafka-jaas"), jaas(SCRAM_PASSWORD));
  }

  @AfterAll
  static void stopStores() {
    for (AutoCloseable c : new AutoCloseable[] {kafka, redis, mysql}) {
      try {
        if (c != null) {
          c.close();
        }
      } catch (Exception e) {
        // best effort: the next one must still stop
      }
    }
  }

  @AfterEach
  void noSecretInAnyOutput() {
    assertThat(outputs).as("the test captured what the sidecar printed").isNotEmpty().allMatch(o -> !o.isBlank());
    for (String out : outputs) {
      assertThat(out).doesNotContain(MYSQL_PASSWORD).doesNotContain(REDIS_PASSWORD).doesNotContain(SCRAM_PASSWORD)
          .doesNotContain(STORE_PASSWORD).doesNotContain("SECRET-");
    }
  }

  private static String jaas(String password) {
    return "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + SaslSslKafka.USER + "\" password=\""
        + password + "\";\n";
  }

  /** The settings each test changes; the rest is the all-TLS configuration. */
  private record Settings(String mysqlHost, String sslMode, Path mysqlCa, Path jaas, Path redisPassword) {
    static Settings good() {
      return new Settings("127.0.0.1", "verify-full", ca, jaasFile, redisPasswordFile);
    }

    Settings mysql(String host, String mode, Path ca) {
      return new Settings(host, mode, ca, jaas, redisPassword);
    }

    Settings kafkaJaas(Path file) {
      return new Settings(mysqlHost, sslMode, mysqlCa, file, redisPassword);
    }

    Settings redisPassword(Path file) {
      return new Settings(mysqlHost, sslMode, mysqlCa, jaas, file);
    }
  }

  private static String yaml(Settings s, int grpcPort, String database, Topics t, String target) {
    return """
        sidecar:
          instance-id: sec
          grpc-listen: 127.0.0.1:%d
          shutdown-timeout: 10s
        kafka:
          bootstrap-servers: %s
          properties:
            session.timeout.ms: "6000"
            heartbeat.interval.ms: "1000"
            security.protocol: SASL_SSL
            sasl.mechanism: SCRAM-SHA-512
            sasl.jaas.config: ${file:%s}
            ssl.truststore.location: %s
            ssl.truststore.type: PKCS12
            ssl.truststore.password: ${file:%s}
        mysql:
          host: %s
          port: %d
          user: og
          password: ${file:%s}
          database: %s
          pool-size: 2
          ssl-mode: %s
        %s
        redis:
          uri: rediss://:${file:%s}@127.0.0.1:%d
          ssl-ca: %s
        %s
        routes:
        %s""".formatted(grpcPort, kafka.saslSsl, s.jaas(), kafka.truststore, storePasswordFile, s.mysqlHost(), mysql.port,
        mysqlPasswordFile, database, s.sslMode(), s.mysqlCa() == null ? "" : "  ssl-ca: " + s.mysqlCa(), s.redisPassword(),
        redis.port, ca, OrderScenario.MACHINE_YAML, PreflightIT.route(t.source, t.escalations, t.verdicts, target));
  }

  private record Topics(String source, String escalations, String verdicts) {
    static Topics create(KafkaSupport k) {
      return new Topics(k.createTopic("sec-lines", 1), k.createTopic("sec-lines-escalate", 1), k.createTopic("sec-verdicts", 1));
    }
  }

  private static String database() {
    return "og_sec_" + UUID.randomUUID().toString().replace("-", "").substring(0, 10);
  }

  private SidecarProcess.Outcome command(String name, String yaml, String... command) throws InterruptedException {
    SidecarProcess.Outcome r = SidecarProcess.command(name, yaml, COMMAND_TIMEOUT, command);
    outputs.add(r.output());
    return r;
  }

  private static ProducerRecord<byte[], byte[]> line(String topic, String lineId) {
    String json = "{\"line_id\":\"" + lineId + "\",\"event\":\"create\",\"order_id\":\"o-1\",\"sku_id\":\"s-1\","
        + "\"warehouse_id\":\"w-1\",\"batch_no\":1}";
    return new ProducerRecord<>(topic, lineId.getBytes(StandardCharsets.UTF_8), json.getBytes(StandardCharsets.UTF_8));
  }

  private static List<Verdict> verdicts(KafkaSupport k, String topic) throws Exception {
    List<Verdict> out = new ArrayList<>();
    for (ConsumerRecord<byte[], byte[]> r : k.readAll(topic)) {
      out.add(Verdict.parseFrom(r.value()));
    }
    return out;
  }

  @Test
  void allStoresOverTls_recordFlowsThroughSaslSsl_claimLandsInTheLedger_duplicateAnsweredByL1() throws Exception {
    try (KafkaSupport k = new KafkaSupport(kafka.plaintext);
        RecordingBusiness business = RecordingBusiness.start()) {
      Topics t = Topics.create(k);
      String database = database();
      int grpc = RecordingBusiness.freePort();
      String yaml = yaml(Settings.good(), grpc, database, t, business.target());

      SidecarProcess.Outcome validate = command("sec-validate", yaml, "validate");
      assertThat(validate.exitCode()).as(validate.output()).isZero();
      assertThat(validate.output()).contains("ssl-mode=verify-full").contains("redis: rediss://***@127.0.0.1:" + redis.port);

      SidecarProcess.Outcome connect = command("sec-validate-connect", yaml, "validate", "--connect");
      assertThat(connect.exitCode()).as(connect.output()).isZero();
      assertThat(connect.output())
          .contains("ok    kafka: metadata read from " + kafka.saslSsl)
          .contains("ok    mysql: MySQL 127.0.0.1:" + mysql.port + "/" + database + ": connected as og@127.0.0.1")
          .contains("ok    redis: Redis [rediss://***@127.0.0.1:" + redis.port + "] answered PING with PONG");

      try (SidecarProcess p = SidecarProcess.start("sec-run", yaml, grpc)) {
        p.awaitServing(Duration.ofSeconds(60));
        k.produce(List.of(line(t.source, "L-1")));
        await().atMost(Duration.ofSeconds(30)).until(() -> verdicts(k, t.verdicts).size() == 1);
        // the same record again: confirmed, so L1 (Redis over TLS) knows it
        k.produce(List.of(line(t.source, "L-1")));
        await().atMost(Duration.ofSeconds(30)).until(() -> verdicts(k, t.verdicts).size() == 2);

        List<Verdict> v = verdicts(k, t.verdicts);
        assertThat(v.get(0).getDisposition()).isEqualTo(Disposition.ACCEPTED);
        assertThat(v.get(1).getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
        assertThat(v.get(1).getLayer()).as("answered by L1").isEqualTo(Layer.CACHE);
        assertThat(business.okDeliveries()).hasSize(1);
        assertThat(mysql.query("SELECT status, entity_id FROM " + database + ".og_ledger")).isEqualTo("DONE\tL-1\n");
        // the sidecar holds connections to a server that admits none without TLS (require_secure_transport)
        assertThat(mysql.query("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'og'")).isNotEqualTo("0\n");
        assertThat(p.stop(Duration.ofSeconds(30))).isZero();
        outputs.add(p.log());
      }
    }
  }

  @Test
  void mysqlWrongCaOrWrongHostName_runExitsAtOnce_namingTheSslSettings() throws Exception {
    try (KafkaSupport k = new KafkaSupport(kafka.plaintext)) {
      Topics t = Topics.create(k);
      String yaml = yaml(Settings.good().mysql("127.0.0.1", "verify-full", otherCa), 0, database(), t, "127.0.0.1:9");

      SidecarProcess.Outcome wrongCa = command("sec-mysql-wrong-ca", yaml, "run");

      assertThat(wrongCa.exitCode()).as(wrongCa.output()).isEqualTo(1);
      assertThat(wrongCa.output()).contains("error: cannot start the guard")
          .contains("): MySQL failed: TLS to MySQL failed (mysql.ssl-mode verify-full, mysql.ssl-ca " + otherCa)
          .doesNotContain("waiting for MySQL");

      // the certificate names 127.0.0.1, not localhost: verify-full refuses, verify-ca accepts
      String wrongHost = yaml(Settings.good().mysql("localhost", "verify-full", ca), 0, database(), t, "127.0.0.1:9");
      SidecarProcess.Outcome host = command("sec-mysql-wrong-host", wrongHost, "run");
      assertThat(host.exitCode()).as(host.output()).isEqualTo(1);
      assertThat(host.output()).contains("TLS to MySQL failed (mysql.ssl-mode verify-full, mysql.ssl-ca " + ca)
          .contains("verify-full also needs mysql.host to be a name in the server's certificate");

      SidecarProcess.Outcome verifyCa = command("sec-mysql-verify-ca",
          yaml(Settings.good().mysql("localhost", "verify-ca", ca), 0, database(), t, "127.0.0.1:9"), "validate", "--connect");
      assertThat(verifyCa.output()).contains("ok    mysql: MySQL localhost:" + mysql.port);
    }
  }

  @Test
  void plaintextToASecureTransportServer_wrongKafkaPassword_wrongRedisPassword_failClearly() throws Exception {
    try (KafkaSupport k = new KafkaSupport(kafka.plaintext)) {
      Topics t = Topics.create(k);
      Path wrongJaas = Files.writeString(dir.resolve("wrong-jaas"), jaas("SECRET-wrong-" + RUN));
      Path wrongRedis = Files.writeString(dir.resolve("wrong-redis"), "SECRET-wrong-redis-" + RUN);
      String yaml = yaml(Settings.good().mysql("127.0.0.1", "disable", null).kafkaJaas(wrongJaas).redisPassword(wrongRedis), 0,
          database(), t, "127.0.0.1:9");

      SidecarProcess.Outcome r = command("sec-bad-credentials", yaml, "validate", "--connect");

      assertThat(r.exitCode()).as(r.output()).isEqualTo(4);
      assertThat(r.output())
          .contains("FAIL  mysql: MySQL 127.0.0.1:" + mysql.port)
          .contains("mysql.ssl-mode is disable: if the server requires TLS (require_secure_transport), set mysql.ssl-mode")
          .contains("FAIL  kafka: Kafka (" + kafka.saslSsl + "): ")
          .contains("SCRAM-SHA-512")
          .contains("FAIL  redis: Redis [rediss://***@127.0.0.1:" + redis.port + "]")
          .doesNotContain("\tat ");

      // run: MySQL first (good settings), then the topics check meets the wrong Kafka password
      String run = yaml(Settings.good().kafkaJaas(wrongJaas), 0, database(), t, "127.0.0.1:9");
      SidecarProcess.Outcome started = command("sec-bad-kafka-run", run, "run");
      assertThat(started.exitCode()).as(started.output()).isEqualTo(4);
      assertThat(started.output()).contains("refused the sidecar's authentication (check the sasl.* and ssl.* settings in kafka.properties)");
    }
  }

  @Test
  void mysqlClientCertificate_aUserRequiringX509_getsInWithTheKeyStore_notWithout() throws Exception {
    mysql.query("CREATE USER 'og_x509'@'127.0.0.1' IDENTIFIED BY '" + MYSQL_PASSWORD + "' REQUIRE X509; "
        + "GRANT ALL ON *.* TO 'og_x509'@'127.0.0.1'");
    Path keyPassword = Files.writeString(dir.resolve("client-key-password"), CLIENT_KEY_PASSWORD + "\n");
    String withoutCert = yaml(Settings.good(), 0, database(), new Topics("a", "b", "c"), "127.0.0.1:9")
        .replace("  user: og\n", "  user: og_x509\n");
    String withCert = withoutCert.replace("  ssl-mode: verify-full\n", "  ssl-mode: verify-full\n  ssl-keystore: " + clientKeystore
        + "\n  ssl-keystore-password: ${file:" + keyPassword + "}\n");

    SidecarProcess.Outcome in = command("sec-x509-with-cert", withCert, "validate", "--connect");
    SidecarProcess.Outcome out = command("sec-x509-without-cert", withoutCert, "validate", "--connect");

    assertThat(in.output()).contains("ok    mysql: MySQL 127.0.0.1:" + mysql.port).contains("connected as og_x509@127.0.0.1");
    assertThat(out.output()).contains("FAIL  mysql: MySQL 127.0.0.1:" + mysql.port).contains("Access denied for user 'og_x509'");
  }

  @Test
  void missingSecretFile_isAConfigError_namingSettingAndPath() throws Exception {
    Path missing = dir.resolve("no-such-secret");
    String yaml = yaml(Settings.good().kafkaJaas(missing), 0, database(), new Topics("a", "b", "c"), "127.0.0.1:9");

    SidecarProcess.Outcome r = command("sec-missing-secret", yaml, "validate");

    assertThat(r.exitCode()).as(r.output()).isEqualTo(2);
    assertThat(r.output()).contains("config error: kafka.properties.sasl.jaas.config: secret file " + missing + " does not exist");
  }
}
