package dev.onceguard.client.spring;

import dev.onceguard.client.GuardClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * A real sidecar for the Spring ITs, as operators run it ({@code java -jar onceguard.jar run}),
 * in its own JVM: the test JVM runs whichever kafka-clients line the Failsafe execution puts on
 * the classpath, the sidecar its own. It gets a database {@code og_spring_<random>} (dropped on
 * {@link #close()}) and a Redis key prefix of its own, and the {@code order} machine. Services
 * come from the environment {@code scripts/stack.sh} writes. Output goes to
 * {@code target/spring-it-logs/}.
 */
final class SidecarProcess implements AutoCloseable {
  static final String SUFFIX = UUID.randomUUID().toString().replace("-", "").substring(0, 8);

  final int port;
  final String database = "og_spring_" + SUFFIX;
  private final Path log;
  private final Process process;

  private SidecarProcess(int port, Path log, Process process) {
    this.port = port;
    this.log = log;
    this.process = process;
  }

  static String env(String name, String def) {
    String v = System.getenv(name);
    if (v == null || v.isBlank()) {
      if (def == null) {
        throw new IllegalStateException(name + " is not set: run via `make test`, or `scripts/stack.sh up` and"
            + " `set -a; . .stack/env; set +a` before mvn");
      }
      return def;
    }
    return v.trim();
  }

  static String bootstrap() {
    return env("ONCEGUARD_KAFKA_BOOTSTRAP", null);
  }

  /** Starts the sidecar with these routes (YAML list items, indented by two spaces). */
  static SidecarProcess start(String routes) throws IOException, InterruptedException {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    String yaml = """
        sidecar:
          instance-id: spring-it-%s
          grpc-listen: 127.0.0.1:%d
          shutdown-timeout: 3s
          commit-interval: 200ms
        kafka:
          bootstrap-servers: %s
        mysql:
          host: %s
          port: %s
          user: %s
          password: '%s'
          database: og_spring_%s
          pool-size: 4
        redis:
          uri: %s
          key-prefix: 'og-spring-it:%s:'
        machines:
          order:
            states: [created, paid, shipped, cancelled]
            terminal: [shipped, cancelled]
            events:
              create: {to: created}
              pay:    {from: [created], to: paid}
              ship:   {from: [paid], to: shipped}
              cancel: {from: [created], to: cancelled}
        routes:
        %s
        """.formatted(SUFFIX, port, bootstrap(), env("ONCEGUARD_MYSQL_HOST", "127.0.0.1"),
        env("ONCEGUARD_MYSQL_PORT", "3306"), env("ONCEGUARD_MYSQL_USER", "root"), env("ONCEGUARD_MYSQL_PASSWORD", ""),
        SUFFIX, env("ONCEGUARD_REDIS_URI", "redis://127.0.0.1:6379"), SUFFIX, routes);
    Path dir = Path.of("target", "spring-it-logs");
    Files.createDirectories(dir);
    Path config = dir.resolve("sidecar-" + SUFFIX + ".yaml");
    Files.writeString(config, yaml);
    Path log = dir.resolve("sidecar-" + SUFFIX + ".log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process p = new ProcessBuilder(List.of(java, "-Xmx384m", "-jar", jar().toString(), "run", "--config", config.toString()))
        .redirectErrorStream(true)
        .redirectOutput(log.toFile())
        .start();
    SidecarProcess s = new SidecarProcess(port, log, p);
    try {
      s.awaitServing(Duration.ofSeconds(60));
    } catch (RuntimeException | Error | InterruptedException e) {
      s.close();
      throw e;
    }
    return s;
  }

  /** A private copy of the jar, so that a rebuild of proxy/target does not pull classes from under it. */
  private static Path jar() throws IOException {
    String p = System.getProperty("onceguard.jar");
    if (p == null || !Files.isRegularFile(Path.of(p))) {
      throw new IllegalStateException("the sidecar jar is missing (onceguard.jar = " + p + "): build the proxy module first");
    }
    Path copy = Files.createTempFile("onceguard-spring-it-", ".jar");
    copy.toFile().deleteOnExit();
    Files.copy(Path.of(p), copy, StandardCopyOption.REPLACE_EXISTING);
    return copy;
  }

  String target() {
    return "127.0.0.1:" + port;
  }

  /** Until the Guard service answers (the gRPC server is up, the schema migrated). */
  private void awaitServing(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    try (GuardClient guard = GuardClient.forTarget(target(), Duration.ofSeconds(2))) {
      while (true) {
        if (!process.isAlive()) {
          throw new AssertionError("the sidecar exited with " + process.exitValue() + "; its log:\n" + tail());
        }
        try {
          guard.explainEntity("probe", "none");
          return;
        } catch (RuntimeException notYet) {
          if (String.valueOf(notYet.getMessage()).contains("route")) {
            return; // it answered: no such route
          }
        }
        if (System.nanoTime() > deadline) {
          throw new AssertionError("the sidecar did not serve within " + timeout + "; its log:\n" + tail());
        }
        TimeUnit.MILLISECONDS.sleep(200);
      }
    }
  }

  String tail() {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** SIGTERM (drain), then drops the database. */
  @Override
  public void close() throws InterruptedException {
    process.destroy();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      process.waitFor(10, TimeUnit.SECONDS);
    }
    String url = "jdbc:mariadb://" + env("ONCEGUARD_MYSQL_HOST", "127.0.0.1") + ":" + env("ONCEGUARD_MYSQL_PORT", "3306") + "/";
    try (Connection c = DriverManager.getConnection(url, env("ONCEGUARD_MYSQL_USER", "root"), env("ONCEGUARD_MYSQL_PASSWORD", ""));
        Statement st = c.createStatement()) {
      st.execute("DROP DATABASE IF EXISTS " + database);
    } catch (SQLException e) {
      throw new IllegalStateException("could not drop " + database + ": " + e.getMessage(), e);
    }
  }
}
