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
  void noCommand_isAUsageError() {
    assertThat(run()).isEqualTo(2);
    assertThat(err.toString()).contains("missing command");
  }
}
