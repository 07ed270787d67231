package dev.onceguard.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.SidecarConfig.SslMode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store security settings: {@code mysql.ssl-mode}/{@code ssl-ca}, {@code redis.ssl-ca} and
 * {@code ${file:/path}} secrets, whose content never appears in a reported problem.
 */
class StoreSecurityConfigTest {
  @TempDir
  Path dir;

  private static final String BASE = """
      kafka:
        bootstrap-servers: 127.0.0.1:9092
      mysql:
        database: onceguard
        password: MYSQL_PASSWORD
        MYSQL_TLS
      redis:
        REDIS
      routes:
        - name: orders
          topics: [orders]
          business-key: [/order_id]
          target: 127.0.0.1:7000
      """;

  private static String yaml(String mysqlPassword, String mysqlTls, String redis) {
    return BASE.replace("MYSQL_PASSWORD", mysqlPassword).replace("MYSQL_TLS", mysqlTls).replace("REDIS", redis);
  }

  private static SidecarConfig parse(String yaml) {
    return new ConfigReader(Map.of()).parse(yaml, "test.yaml");
  }

  private static ConfigException rejected(String yaml) {
    try {
      parse(yaml);
    } catch (ConfigException e) {
      return e;
    }
    throw new AssertionError("accepted:\n" + yaml);
  }

  private Path write(String name, String content) throws Exception {
    Path p = dir.resolve(name);
    Files.writeString(p, content);
    return p;
  }

  /** A self-signed CA certificate made by the openssl CLI (its key stays in the temp dir). */
  private Path caCertificate() throws Exception {
    Path cert = dir.resolve("ca.pem");
    Process p = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=og-unit-ca",
        "-keyout", dir.resolve("ca.key").toString(), "-out", cert.toString()).redirectErrorStream(true).start();
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(new String(p.getInputStream().readAllBytes())).isZero();
    return cert;
  }

  // ------------------------------------------------------------------------- ${file:/path}

  @Test
  void fileReference_readsTheFile_withoutOneTrailingNewline() throws Exception {
    Path pw = write("mysql-password", "p@ss w0rd\n");
    Path redisPw = write("redis-password", "r3d1s\r\n");
    SidecarConfig c = parse(yaml("${file:" + pw + "}", "", "uri: 'redis://:${file:" + redisPw + "}@127.0.0.1:6379'"));

    assertThat(c.mysql().password()).isEqualTo("p@ss w0rd");
    assertThat(c.redis().uri()).isEqualTo("redis://:r3d1s@127.0.0.1:6379");
  }

  @Test
  void fileReference_onlyOneNewlineIsStripped() throws Exception {
    Path pw = write("pw", "two\n\n");

    assertThat(parse(yaml("${file:" + pw + "}", "", "uri: null")).mysql().password()).isEqualTo("two\n");
  }

  @Test
  void fileReference_missingFile_errorNamesSettingAndPath() {
    String missing = dir.resolve("absent").toString();
    ConfigException e = rejected(yaml("${file:" + missing + "}", "", "uri: null"));

    assertThat(e.problems()).containsExactly("mysql.password: secret file " + missing + " does not exist");
  }

  @Test
  void fileReference_inKafkaProperties_isExpanded_unlessKafkaConfigProvidersAreSet() throws Exception {
    Path jaas = write("jaas", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"og\" password=\"x\";\n");
    String props = """
        kafka:
          bootstrap-servers: 127.0.0.1:9092
          properties:
            sasl.jaas.config: ${file:%s}
        """.formatted(jaas);
    SidecarConfig c = parse(yaml("''", "", "uri: null").replace("kafka:\n  bootstrap-servers: 127.0.0.1:9092\n", props));
    assertThat(c.kafka().properties().get("sasl.jaas.config")).startsWith("org.apache.kafka").endsWith("password=\"x\";");

    String provided = props.replace("    sasl.jaas.config", "    config.providers: file\n"
        + "    config.providers.file.class: org.apache.kafka.common.config.provider.FileConfigProvider\n    sasl.jaas.config")
        .replace("${file:" + jaas + "}", "'${file:/etc/kafka/secrets.properties:jaas}'");
    SidecarConfig kept = parse(yaml("''", "", "uri: null").replace("kafka:\n  bootstrap-servers: 127.0.0.1:9092\n", provided));
    assertThat(kept.kafka().properties().get("sasl.jaas.config")).isEqualTo("${file:/etc/kafka/secrets.properties:jaas}");
  }

  @Test
  void secretsFromFiles_neverAppearInProblems_norInToString() throws Exception {
    Path redisPw = write("redis-pw", "SECRET-redis-8d1f");
    Path mysqlPw = write("mysql-pw", "SECRET-mysql-77aa");
    // a bad port after the password: the URI is reported, without its user info
    ConfigException e = rejected(yaml("${file:" + mysqlPw + "}", "ssl-mode: verify-fulll",
        "uri: 'redis://:${file:" + redisPw + "}@127.0.0.1:99999'"));
    assertThat(e.problems()).anyMatch(p -> p.startsWith("redis.uri: ")).anyMatch(p -> p.startsWith("mysql.ssl-mode: "));
    assertThat(String.join("\n", e.problems()) + e.getMessage()).doesNotContain("SECRET-");

    // an unparseable URI is not shown at all
    ConfigException bad = rejected(yaml("x", "", "uri: 'redis://:${file:" + redisPw + "}@127.0.0.1:6379/ bad'"));
    assertThat(bad.getMessage()).startsWith("redis.uri: not a valid URI").doesNotContain("SECRET-");

    SidecarConfig good = parse(yaml("${file:" + mysqlPw + "}", "", "uri: 'redis://:${file:" + redisPw + "}@127.0.0.1:6379'"));
    assertThat(good.toString()).doesNotContain("SECRET-").contains("***@127.0.0.1:6379");
  }

  // ------------------------------------------------------------------------- mysql.ssl-*

  @Test
  void mysqlSsl_defaultsToDisable() {
    assertThat(parse(yaml("''", "", "uri: null")).mysql().tls().mode()).isEqualTo(SslMode.DISABLE);
  }

  @Test
  void mysqlSsl_verifyFullWithCa_isRead() throws Exception {
    Path ca = caCertificate();
    SidecarConfig c = parse(yaml("''", "ssl-mode: verify-full\n  ssl-ca: " + ca, "uri: null"));

    assertThat(c.mysql().tls().mode()).isEqualTo(SslMode.VERIFY_FULL);
    assertThat(c.mysql().tls().ca()).isEqualTo(ca);
    assertThat(c.mysql().toString()).contains("ssl-mode=verify-full");
  }

  @Test
  void mysqlSsl_unknownMode_errorSuggestsTheNearestMode() {
    assertThat(rejected(yaml("''", "ssl-mode: verify_ca", "uri: null")).problems())
        .containsExactly("mysql.ssl-mode: 'verify_ca' is not one of disable, require, verify-ca, verify-full (did you mean 'verify-ca'?)");
  }

  @Test
  void mysqlSsl_caWithAModeThatDoesNotVerify_isRefused() throws Exception {
    Path ca = caCertificate();

    assertThat(rejected(yaml("''", "ssl-mode: require\n  ssl-ca: " + ca, "uri: null")).problems())
        .containsExactly("mysql.ssl-ca: is only used with ssl-mode verify-ca or verify-full (ssl-mode is require, "
            + "which does not check the server's certificate)");
  }

  @Test
  void caFiles_missingOrNotACertificate_errorsNameSettingAndFile() throws Exception {
    Path notPem = write("key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    String missing = dir.resolve("nope.pem").toString();

    ConfigException e = rejected(yaml("''", "ssl-mode: verify-ca\n  ssl-ca: " + missing,
        "uri: rediss://127.0.0.1:6380\n  ssl-ca: " + notPem));

    assertThat(e.problems()).hasSize(2);
    assertThat(e.problems().get(0)).isEqualTo("mysql.ssl-ca: CA file " + missing + " does not exist");
    assertThat(e.problems().get(1)).startsWith("redis.ssl-ca: CA file " + notPem + " ");
  }

  /** A PKCS12 key store with one key pair, made by the JDK's keytool. */
  private Path keystore(String password) throws Exception {
    Path ks = dir.resolve("client.p12");
    Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "keytool").toString(), "-genkeypair", "-alias", "client",
        "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=og-client", "-validity", "1", "-storetype", "PKCS12", "-keystore",
        ks.toString(), "-storepass", password).redirectErrorStream(true).start();
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(new String(p.getInputStream().readAllBytes())).isZero();
    return ks;
  }

  @Test
  void mysqlKeystore_isRead_withTls_andItsPasswordNeverShown() throws Exception {
    Path ks = keystore("SECRET-p12-pass");
    Path pw = write("p12-pass", "SECRET-p12-pass\n");
    SidecarConfig c = parse(yaml("''", "ssl-mode: require\n  ssl-keystore: " + ks + "\n  ssl-keystore-password: ${file:" + pw + "}",
        "uri: null"));

    assertThat(c.mysql().tls().keystore()).isEqualTo(ks);
    assertThat(c.mysql().tls().keystorePassword()).isEqualTo("SECRET-p12-pass");
    assertThat(c.toString()).doesNotContain("SECRET-");
  }

  @Test
  void mysqlKeystore_wrongPasswordOrWithoutTls_isRefused_namingTheSetting_notThePassword() throws Exception {
    Path ks = keystore("SECRET-p12-pass");
    Path wrong = write("wrong", "SECRET-wrong-pass");

    ConfigException e = rejected(yaml("''", "ssl-mode: disable\n  ssl-keystore: " + ks + "\n  ssl-keystore-password: ${file:" + wrong
        + "}", "uri: null"));

    assertThat(e.problems()).hasSize(2);
    assertThat(e.problems().get(0)).isEqualTo("mysql.ssl-keystore: a client certificate needs TLS: set ssl-mode (require, verify-ca or "
        + "verify-full)");
    assertThat(e.problems().get(1)).startsWith("mysql.ssl-keystore: cannot open PKCS12 key store " + ks + " with ssl-keystore-password: ");
    assertThat(e.getMessage()).doesNotContain("SECRET-");
  }

  // ------------------------------------------------------------------------- redis.ssl-ca

  @Test
  void redisSslCa_withRedissUri_isRead_withRedisUri_isRefused() throws Exception {
    Path ca = caCertificate();

    assertThat(parse(yaml("''", "", "uri: rediss://127.0.0.1:6380\n  ssl-ca: " + ca)).redis().sslCa()).isEqualTo(ca);
    assertThat(rejected(yaml("''", "", "uri: redis://127.0.0.1:6379\n  ssl-ca: " + ca)).problems())
        .containsExactly("redis.ssl-ca: only used with rediss:// URIs (TLS); redis.uri is not rediss://");
  }
}
