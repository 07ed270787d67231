package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.client.TcpGate;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * MySQL unreachable when the sidecar starts (a database pod that comes up later): the packaged
 * sidecar waits for it with backoff and starts serving once it is there, instead of exiting and
 * crash-looping; with {@code --fail-fast} it exits at once with code 1.
 */
class StartupWaitIT {

  @Test
  void mysqlUnreachableAtStart_sidecarWaitsForIt_thenServes_andDrainsToExitZero() throws Exception {
    try (ScenarioEnv env = new ScenarioEnv("StartupWaitIT", 1);
        RecordingBusiness business = RecordingBusiness.start();
        TcpGate gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort())) {
      gate.cut();
      int port = RecordingBusiness.freePort();
      String yaml = env.yaml(ScenarioEnv.Instance.of("wait", business.target()).grpcPort(port).mysqlPort(gate.port()));
      try (SidecarProcess p = SidecarProcess.start("startup-wait", yaml, port)) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (countOf(p.log(), "waiting for MySQL") < 2 && System.nanoTime() < deadline && p.alive()) {
          TimeUnit.MILLISECONDS.sleep(200);
        }
        assertThat(p.alive()).as("still running while MySQL is unreachable; log:%n%s", p.tail()).isTrue();
        assertThat(countOf(p.log(), "waiting for MySQL")).as("says what it waits for, once per attempt").isGreaterThanOrEqualTo(2);
        assertThat(p.log()).doesNotContain("guard ready");

        gate.restore();
        p.awaitServing(Duration.ofSeconds(60));
        assertThat(p.log()).contains("guard ready");
        assertThat(p.stop(Duration.ofSeconds(30))).as("SIGTERM after it served: a clean drain").isZero();
      }
    }
  }

  @Test
  void kafkaUnreachableAtStart_sidecarSaysWhereAndWhatToCheck_withoutTheClientsPerAttemptWarnings_thenServes() throws Exception {
    String[] broker = ItEnv.kafkaBootstrap().split(",")[0].split(":");
    try (ScenarioEnv env = new ScenarioEnv("StartupKafkaWaitIT", 1);
        RecordingBusiness business = RecordingBusiness.start();
        TcpGate gate = new TcpGate(broker[0], Integer.parseInt(broker[1]))) {
      gate.cut();
      int port = RecordingBusiness.freePort();
      String yaml = env.yaml(ScenarioEnv.Instance.of("kwait", business.target()).grpcPort(port))
          .replace("bootstrap-servers: " + ItEnv.kafkaBootstrap(), "bootstrap-servers: 127.0.0.1:" + gate.port());
      assertThat(yaml).contains("bootstrap-servers: 127.0.0.1:" + gate.port());
      try (SidecarProcess p = SidecarProcess.start("startup-kafka-wait", yaml, port)) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(45);
        while (countOf(p.log(), "waiting for Kafka at 127.0.0.1:" + gate.port()) < 2 && System.nanoTime() < deadline && p.alive()) {
          TimeUnit.MILLISECONDS.sleep(200);
        }
        assertThat(p.alive()).as("still running while Kafka is unreachable; log:%n%s", p.tail()).isTrue();
        assertThat(countOf(p.log(), "waiting for Kafka at 127.0.0.1:" + gate.port())).as("its own line, once per attempt")
            .isGreaterThanOrEqualTo(2);
        assertThat(p.log()).contains("Check kafka.bootstrap-servers")
            .as("the client's per-attempt warnings are held back meanwhile")
            .doesNotContain("could not be established").doesNotContain("disconnected");

        gate.restore();
        p.awaitServing(Duration.ofSeconds(60));
        assertThat(p.stop(Duration.ofSeconds(30))).as("SIGTERM after it served: a clean drain").isZero();
      }
    }
  }

  @Test
  void failFast_mysqlUnreachable_exitsAtOnceWithCodeOne() throws Exception {
    try (ScenarioEnv env = new ScenarioEnv("StartupFailFastIT", 1);
        RecordingBusiness business = RecordingBusiness.start();
        TcpGate gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort())) {
      gate.cut();
      int port = RecordingBusiness.freePort();
      String yaml = env.yaml(ScenarioEnv.Instance.of("failfast", business.target()).grpcPort(port).mysqlPort(gate.port()));
      try (SidecarProcess p = SidecarProcess.start("startup-fail-fast", yaml, port, "--fail-fast")) {
        assertThat(p.awaitExit(Duration.ofSeconds(60))).isEqualTo(1);
        assertThat(p.log()).contains("error: cannot start the guard").doesNotContain("waiting for MySQL");
      }
    }
  }

  private static int countOf(String text, String what) {
    int n = 0;
    for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + what.length())) {
      n++;
    }
    return n;
  }
}
