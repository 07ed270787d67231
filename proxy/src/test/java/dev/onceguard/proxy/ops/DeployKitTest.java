package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.onceguard.proxy.ops.ProbeFacts.RouteFacts;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The deployment kit ({@code deploy/Dockerfile}, {@code deploy/k8s}) agrees with itself and with
 * the configuration the sidecar really reads; each kind of disagreement, made on purpose in a copy,
 * is caught. No image is built and no cluster is needed.
 */
class DeployKitTest {
  private static final DeployKit SHIPPED = DeployKit.load(DeployKit.deployDir());

  @Test
  void shippedKit_filesAgree_andTheConfigMapPassesConfigReader() {
    assertThat(SHIPPED.problems()).isEmpty();
    assertThat(SHIPPED.config().adminListen()).isEqualTo("0.0.0.0:9401");
    assertThat(SHIPPED.config().mysql().password()).isEqualTo("change-me"); // from secret.yaml through the env
  }

  static Stream<Arguments> brokenCopies() {
    return Stream.of(
        broken("admin container port differs from admin-listen", k -> {
          port(k, "admin").put("containerPort", 9402);
          return k;
        }, "ports [7700, 9402] are not the ports the configuration listens on [7700, 9401]"),
        broken("liveness probe on a numeric wrong port", k -> {
          ((ObjectNode) k.sidecar().path("livenessProbe").path("httpGet")).put("port", 9400);
          return k;
        }, "livenessProbe port 9400 (9400) is not sidecar.admin-listen's port 9401"),
        broken("liveness probe on /readyz", k -> {
          ((ObjectNode) k.sidecar().path("livenessProbe").path("httpGet")).put("path", "/readyz");
          return k;
        }, "livenessProbe GETs /readyz, not /healthz"),
        broken("startup probe on /readyz (restarts a sidecar waiting for MySQL)", k -> {
          ((ObjectNode) k.sidecar().path("startupProbe").path("httpGet")).put("path", "/readyz");
          return k;
        }, "startupProbe GETs /readyz, not /healthz"),
        broken("readiness probe missing", k -> {
          k.sidecar().remove("readinessProbe");
          return k;
        }, "has no readinessProbe"),
        broken("readiness probe timeout of 1 s", k -> {
          ((ObjectNode) k.sidecar().path("readinessProbe")).put("timeoutSeconds", 1);
          return k;
        }, "readinessProbe.timeoutSeconds 1 is below 3"),
        broken("grace period equal to the drain", k -> {
          k.podSpec().put("terminationGracePeriodSeconds", 30);
          return k;
        }, "terminationGracePeriodSeconds 30 is shorter than sidecar.shutdown-timeout 30 s + 10 s"),
        broken("longer drain in the config than the grace period allows", k -> {
          k.setConfigYaml(replace(k.configYaml(), "shutdown-timeout: 30s", "shutdown-timeout: 40s"));
          return k;
        }, "terminationGracePeriodSeconds 45 is shorter than sidecar.shutdown-timeout 40 s"),
        broken("sidecar without restartPolicy: Always", k -> {
          k.sidecar().remove("restartPolicy");
          return k;
        }, "lacks restartPolicy: Always"),
        broken("sidecar as a regular container", k -> {
          ObjectNode sidecar = k.sidecar();
          ((ArrayNode) k.podSpec().get("initContainers")).removeAll();
          ((ArrayNode) k.podSpec().get("containers")).add(sidecar);
          return k;
        }, "is not among initContainers"),
        broken("a ${VAR} of the config that the pod does not set", k -> {
          ArrayNode env = (ArrayNode) k.sidecar().get("env");
          for (int i = 0; i < env.size(); i++) {
            if (env.get(i).path("name").asText().equals("ONCEGUARD_MYSQL_PASSWORD")) {
              env.remove(i);
            }
          }
          return k;
        }, "${ONCEGUARD_MYSQL_PASSWORD} is not in the onceguard container's environment"),
        broken("a ${VAR:-default} of the config that the pod does not set", k -> {
          k.setConfigYaml(replace(k.configYaml(), "database: onceguard", "database: ${ONCEGUARD_DATABASE:-onceguard}"));
          return k;
        }, "${ONCEGUARD_DATABASE} is not in the onceguard container's environment"),
        broken("a Secret key that secret.yaml lacks", k -> {
          ((ObjectNode) k.secret().get("stringData")).remove("mysql-password");
          return k;
        }, "env ONCEGUARD_MYSQL_PASSWORD reads key 'mysql-password' of Secret 'onceguard-secrets', which secret.yaml does not have"),
        broken("a config the sidecar rejects", k -> {
          k.setConfigYaml(replace(k.configYaml(), "business-key:", "busines-key:"));
          return k;
        }, "configmap.yaml: the sidecar rejects its configuration: routes[0]"),
        broken("admin listener on loopback", k -> {
          k.setConfigYaml(replace(k.configYaml(), "admin-listen: 0.0.0.0:9401", "admin-listen: 127.0.0.1:9401"));
          return k;
        }, "sidecar.admin-listen 127.0.0.1:9401 is on loopback"),
        broken("gRPC off loopback", k -> {
          k.setConfigYaml(replace(k.configYaml(), "grpc-listen: 127.0.0.1:7700", "grpc-listen: 0.0.0.0:7700"));
          return k;
        }, "sidecar.grpc-listen 0.0.0.0:7700 is not on loopback"),
        broken("config moved to another admin port", k -> {
          k.setConfigYaml(replace(k.configYaml(), "admin-listen: 0.0.0.0:9401", "admin-listen: 0.0.0.0:9402"));
          return k;
        }, "Dockerfile: EXPOSE [7700, 9401] is not the gRPC and admin ports [7700, 9402]"),
        broken("ConfigMap mounted elsewhere than --config reads", k -> {
          ((ObjectNode) k.sidecar().get("volumeMounts").get(0)).put("mountPath", "/config");
          return k;
        }, "is not run --config /config/onceguard.yaml"),
        broken("memory limit too small for -Xmx384m", k -> {
          ((ObjectNode) k.sidecar().path("resources").path("limits")).put("memory", "448Mi");
          return k;
        }, "memory limit 448Mi leaves less than 128 MiB above -Xmx384m"),
        broken("PodMonitor on a port name the container lacks", k -> {
          ((ObjectNode) k.podMonitor().path("spec").path("podMetricsEndpoints").get(0)).put("port", "metrics");
          return k;
        }, "podmonitor.yaml: endpoint port 'metrics' path /metrics is not /metrics on the admin port 9401"),
        broken("Dockerfile exposes another admin port", k -> k.withDockerfile(replace(k.dockerfile(), "EXPOSE 7700 9401", "EXPOSE 7700 9402")),
            "Dockerfile: EXPOSE [7700, 9402] is not the gRPC and admin ports [7700, 9401]"),
        broken("Dockerfile HEALTHCHECK on another port", k -> k.withDockerfile(replace(k.dockerfile(), "/dev/tcp/127.0.0.1/9401", "/dev/tcp/127.0.0.1/9400")),
            "does not GET /healthz on the admin port 9401"),
        broken("Dockerfile running as root", k -> k.withDockerfile(replace(k.dockerfile(), "USER 10001:10001", "USER root")),
            "USER 'root' must be a numeric non-root uid"),
        broken("Dockerfile ENTRYPOINT in shell form", k -> k.withDockerfile(
            replace(k.dockerfile(), "ENTRYPOINT [\"java\", \"-jar\", \"/app/onceguard.jar\"]", "ENTRYPOINT java -jar /app/onceguard.jar")),
            "ENTRYPOINT java -jar /app/onceguard.jar is not in exec form"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("brokenCopies")
  void brokenCopy_isCaught(String name, UnaryOperator<DeployKit> breakIt, String expected) {
    DeployKit broken = breakIt.apply(DeployKit.load(DeployKit.deployDir()));

    assertThat(broken.problems()).anySatisfy(p -> assertThat(p).contains(expected));
  }

  /**
   * The HEALTHCHECK command itself, run by bash (as the image runs it) against a real admin
   * listener: only the port is changed, to the one the test bound.
   */
  @Test
  void dockerfileHealthcheck_passesWhenLive_failsWhenNotLiveOrNotListening() throws Exception {
    FakeProbeFacts facts = new FakeProbeFacts();
    facts.route("orders", new RouteFacts(true, 1, System.currentTimeMillis(), null));
    facts.route("payments", new RouteFacts(true, 1, System.currentTimeMillis(), null));
    Probes probes = new Probes(ProbesTest.CONFIG, facts, System::currentTimeMillis, Duration.ofSeconds(60), Duration.ofSeconds(5));
    String adminPort = SHIPPED.config().adminListen().replaceFirst(".*:", "");
    AdminServer server = AdminServer.start("127.0.0.1:0", probes, () -> "");
    List<String> command = healthcheck(adminPort, server.port());
    try {
      assertThat(run(command)).as("live").isZero();

      facts.route("orders", new RouteFacts(false, 0, System.currentTimeMillis(), new IllegalStateException("boom")));
      assertThat(run(command)).as("a route's consumer failed: /healthz 503").isNotZero();
    } finally {
      server.close();
    }
    assertThat(run(command)).as("nothing listening").isNotZero();
  }

  private static List<String> healthcheck(String adminPort, int boundPort) throws IOException {
    String check = DeployKit.Dockerfile.parse(SHIPPED.dockerfile()).last("HEALTHCHECK");
    JsonNode exec = new ObjectMapper().readTree(check.substring(check.indexOf("CMD") + 3).trim());
    List<String> out = new ArrayList<>();
    exec.forEach(a -> out.add(a.asText().replaceAll("(?<!\\d)" + adminPort + "(?!\\d)", Integer.toString(boundPort))));
    assertThat(String.join(" ", out)).contains("/healthz").contains(Integer.toString(boundPort));
    return out;
  }

  private static int run(List<String> command) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    if (!p.waitFor(10, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("HEALTHCHECK command did not finish in 10 s: " + command);
    }
    p.getInputStream().readAllBytes(); // bash's own errors (connection refused), not asserted on
    return p.exitValue();
  }

  private static Arguments broken(String name, UnaryOperator<DeployKit> breakIt, String expected) {
    return Arguments.of(name, breakIt, expected);
  }

  private static ObjectNode port(DeployKit k, String name) {
    for (JsonNode p : k.sidecar().path("ports")) {
      if (p.path("name").asText().equals(name)) {
        return (ObjectNode) p;
      }
    }
    throw new AssertionError("no port named " + name);
  }

  /** Replaces text that must be there, so that a mutation never silently does nothing. */
  private static String replace(String text, String from, String to) {
    assertThat(text).contains(from);
    return text.replace(from, to);
  }
}
