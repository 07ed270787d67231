package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.it.scenario.ScenarioDriver.Hook;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * kill -9 of the sidecar process in the middle of the scenario, then a new process with the same
 * configuration (a restarted pod: same instance id, new owner id). The business stays up in the
 * test JVM. Claims the dead process held are leased for 3 s; the new process takes them over and
 * redelivers them flagged {@code redelivery = true}. The checker must pass.
 */
class KillNineIT {
  static final int LINES = 1500;
  static final int PARTITIONS = 6;
  static final Duration START_TIMEOUT = Duration.ofSeconds(60);

  @Test
  void sidecarProcessKilledMidRun_restartedProcessFinishes_checkerPasses_redeliveriesFlagged() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 9009L));
    List<SidecarProcess> processes = new ArrayList<>();
    // a business that takes a moment per call, so that the kill catches records between claim and confirm
    try (ScenarioEnv env = new ScenarioEnv("KillNineIT", PARTITIONS);
        RecordingBusiness business = RecordingBusiness.start().behave(d -> Reply.ok().after(Duration.ofMillis(15)))) {
      try {
        SidecarProcess first = start(env, business, "KillNineIT-first");
        processes.add(first);
        first.awaitServing(START_TIMEOUT);
        ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
        AtomicInteger deliveredAtKill = new AtomicInteger();
        AtomicInteger inFlightAtKill = new AtomicInteger();
        driver.run(new Hook(1, 0.4, "kill -9 of the sidecar process, then a new one", () -> {
          try {
            inFlightAtKill.set(business.inFlight());
            first.kill();
            deliveredAtKill.set(business.okDeliveries().size());
            driver.log("killed pid %d with %d business calls in flight, %d deliveries so far", first.pid(), inFlightAtKill.get(),
                deliveredAtKill.get());
            SidecarProcess second = start(env, business, "KillNineIT-second");
            processes.add(second);
            second.awaitServing(START_TIMEOUT);
            driver.log("new sidecar process pid %d serving", second.pid());
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
          }
        }));
        Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.CRASH).check();

        assertThat(deliveredAtKill.get()).as("killed mid-run: after some deliveries, before all")
            .isPositive().isLessThan(scenario.expectedTransitions().size());
        driver.log("redeliveries (all flagged, checked): %d; deliveries at the kill: %d", r.redeliveries(), deliveredAtKill.get());

        SidecarProcess second = processes.get(1);
        assertThat(second.stop(Duration.ofSeconds(40))).as("SIGTERM drains and exits 0").isZero();
      } finally {
        processes.forEach(SidecarProcess::close);
      }
    }
  }

  private static SidecarProcess start(ScenarioEnv env, RecordingBusiness business, String name) {
    int port = RecordingBusiness.freePort();
    return SidecarProcess.start(name, env.yaml(ScenarioEnv.Instance.of("scn-kill9", business.target()).lease("3s").grpcPort(port)), port);
  }
}
