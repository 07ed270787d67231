package dev.onceguard.it.secure;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/**
 * A second single-node KRaft broker for one test class, run from the jars {@code scripts/stack.sh}
 * fetched ({@code $KAFKA_LIB}) with the stack broker's own {@code server.properties} as the base.
 * It has a {@code SASL_SSL} listener (SCRAM-SHA-512; the user is created when the storage is
 * formatted, {@code kafka-storage format --add-scram}) with a keystore made by the JDK's
 * {@code keytool} and a CA that signs it, and a PLAINTEXT listener for the test's own topics and
 * records. {@link #close()} stops it.
 */
public final class SaslSslKafka implements AutoCloseable {
  /** The SCRAM user the sidecar authenticates as. */
  public static final String USER = "og-sidecar";

  /** {@code 127.0.0.1:<port>} of the PLAINTEXT listener (the test's side). */
  public final String plaintext;
  /** {@code 127.0.0.1:<port>} of the SASL_SSL listener (the sidecar's side). */
  public final String saslSsl;
  /** PKCS12 trust store holding the broker's CA. */
  public final Path truststore;
  private final Process process;
  private final String scramPassword;
  private final String storePassword;

  /**
   * @param scramPassword the password of {@link #USER}
   * @param storePassword the password of the key and trust stores
   */
  public SaslSslKafka(Path dir, String scramPassword, String storePassword) throws Exception {
    String lib = System.getenv("KAFKA_LIB");
    if (lib == null || !Files.isDirectory(Path.of(lib))) {
      throw new IllegalStateException("KAFKA_LIB is not set: run via `make test` (or `scripts/stack.sh up` and source .stack/env)");
    }
    Path scripts = Path.of("..", "scripts", "kafka").toAbsolutePath().normalize();
    this.scramPassword = scramPassword;
    this.storePassword = storePassword;
    this.truststore = keytoolStores(dir, storePassword);

    int plain = dev.onceguard.it.RecordingBusiness.freePort();
    int sasl = dev.onceguard.it.RecordingBusiness.freePort();
    int controller = dev.onceguard.it.RecordingBusiness.freePort();
    this.plaintext = "127.0.0.1:" + plain;
    this.saslSsl = "127.0.0.1:" + sasl;
    Properties conf = new Properties();
    try (InputStream in = Files.newInputStream(Path.of(lib).getParent().resolve("server.properties"))) {
      conf.load(in); // the stack broker's: single-node replication factors, test-friendly settings
    }
    conf.putAll(Map.of(
        "controller.quorum.voters", "1@127.0.0.1:" + controller,
        "listeners", "PLAINTEXT://" + plaintext + ",SASL_SSL://" + saslSsl + ",CONTROLLER://127.0.0.1:" + controller,
        "advertised.listeners", "PLAINTEXT://" + plaintext + ",SASL_SSL://" + saslSsl,
        "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "log.dirs", dir.resolve("data").toString(),
        "sasl.enabled.mechanisms", "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.location", dir.resolve("broker.p12").toString(),
        "ssl.keystore.type", "PKCS12"));
    conf.put("ssl.keystore.password", storePassword);
    conf.put("ssl.key.password", storePassword);
    Path confFile = dir.resolve("server.properties");
    try (OutputStream out = Files.newOutputStream(confFile)) {
      conf.store(out, "SASL_SSL test broker (SaslSslKafka)");
    }

    String cp = lib + "/*";
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Tools.run(dir, java, "-Xmx256m", "-Dlog4j2.configurationFile=" + scripts.resolve("log4j2-cli.xml"), "-cp", cp,
        "kafka.tools.StorageTool", "format", "-t", org.apache.kafka.common.Uuid.randomUuid().toString(), "-c", confFile.toString(),
        "--add-scram", "SCRAM-SHA-512=[name=" + USER + ",password=" + scramPassword + "]");
    Path log = dir.resolve("broker.log");
    this.process = new ProcessBuilder(java, "-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-Dkafka.logs.dir=" + dir.resolve("logs"),
        "-Dlog4j2.configurationFile=" + scripts.resolve("log4j2-broker.xml"), "-cp", cp, "kafka.Kafka", confFile.toString())
        .redirectErrorStream(true).redirectOutput(log.toFile()).start();
    try {
      awaitReady(log);
    } catch (Exception | AssertionError e) {
      close();
      throw e;
    }
  }

  /** CA, broker key store (the broker's key and its certificate signed by the CA) and trust store, all by keytool. */
  private static Path keytoolStores(Path dir, String pw) {
    String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
    Tools.run(dir, keytool, "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=og-kafka-test-ca",
        "-ext", "bc:c", "-validity", "2", "-keystore", "ca.p12", "-storetype", "PKCS12", "-storepass", pw);
    Tools.run(dir, keytool, "-exportcert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", pw, "-file", "kafka-ca.pem");
    Tools.run(dir, keytool, "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=localhost",
        "-validity", "2", "-keystore", "broker.p12", "-storetype", "PKCS12", "-storepass", pw);
    Tools.run(dir, keytool, "-certreq", "-alias", "broker", "-keystore", "broker.p12", "-storepass", pw, "-file", "broker.csr");
    Tools.run(dir, keytool, "-gencert", "-rfc", "-alias", "ca", "-keystore", "ca.p12", "-storepass", pw, "-infile", "broker.csr",
        "-outfile", "broker.pem", "-ext", "san=ip:127.0.0.1,dns:localhost", "-validity", "2");
    Tools.run(dir, keytool, "-importcert", "-noprompt", "-alias", "ca", "-keystore", "broker.p12", "-storepass", pw, "-file", "kafka-ca.pem");
    Tools.run(dir, keytool, "-importcert", "-alias", "broker", "-keystore", "broker.p12", "-storepass", pw, "-file", "broker.pem");
    Tools.run(dir, keytool, "-importcert", "-noprompt", "-alias", "ca", "-keystore", "truststore.p12", "-storetype", "PKCS12",
        "-storepass", pw, "-file", "kafka-ca.pem");
    return dir.resolve("truststore.p12");
  }

  private void awaitReady(Path log) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, plaintext,
        AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000", AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "2000"))) {
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) {
          throw new AssertionError("the SASL_SSL broker exited with " + process.exitValue() + "; " + Tools.tail(log));
        }
        try {
          admin.describeCluster().nodes().get(3, TimeUnit.SECONDS);
          awaitSaslSsl(log);
          return;
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException notYet) {
          TimeUnit.MILLISECONDS.sleep(200);
        }
      }
    }
    throw new AssertionError("the SASL_SSL broker was not ready within 90 s; " + Tools.tail(log));
  }

  /** The SASL_SSL listener answers a client with the right credentials (else the broker log says why). */
  private void awaitSaslSsl(Path log) throws InterruptedException {
    Map<String, Object> props = new java.util.HashMap<>(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, saslSsl,
        AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "40000", "security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-512",
        "sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + USER + "\" password=\""
            + scramPassword + "\";",
        "ssl.truststore.location", truststore.toString(), "ssl.truststore.type", "PKCS12", "ssl.truststore.password", storePassword));
    try (Admin admin = Admin.create(props)) {
      admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException | RuntimeException e) {
      throw new AssertionError("the SASL_SSL listener does not serve its own user: " + e + "; " + Tools.tail(log));
    }
  }

  @Override
  public void close() {
    Tools.stop(process, 30);
  }
}
