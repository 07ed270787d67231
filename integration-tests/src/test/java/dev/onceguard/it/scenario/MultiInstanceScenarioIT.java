package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.it.scenario.ScenarioDriver.Hook;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The full scenario with several sidecar instances (in-process, each with its own pool, Redis
 * client, producer and owner id) sharing the five consumer groups: two at the start, two more
 * added during the create wave, one closed during the prepare wave. Every membership change is a
 * cooperative rebalance in all five groups; the checker must still pass.
 */
class MultiInstanceScenarioIT {
  static final int LINES = 2000;
  static final int PARTITIONS = 6;

  @Test
  void fullScenario_fourInstancesSharingTheGroups_addedAndRemovedMidRun_checkerPasses() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 777L));
    try (ScenarioEnv env = new ScenarioEnv("MultiInstanceScenarioIT", PARTITIONS); RecordingBusiness business = RecordingBusiness.start()) {
      List<InProcessSidecar> instances = new ArrayList<>();
      try {
        // a short lease: a claim abandoned by a revocation is taken over by the partition's next owner after it
        instances.add(InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-i1", business.target()).lease("5s"))));
        instances.add(InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-i2", business.target()).lease("5s"))));
        env.awaitMembers(2);
        ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
        driver.run(
            new Hook(0, 0.3, "adding instances 3 and 4", () -> {
              instances.add(start(env, "scn-i3", business.target()));
              instances.add(start(env, "scn-i4", business.target()));
              env.awaitMembers(4);
              driver.log("all five groups have 4 members with partitions");
            }),
            new Hook(2, 0.3, "closing instance 2 (its partitions move to the others)", () -> {
              instances.get(1).close();
              env.awaitMembers(3);
              driver.log("all five groups have 3 members with partitions");
            }));
        Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.REPLAYS).check();

        Set<String> owners = new HashSet<>();
        for (InProcessSidecar s : instances) {
          driver.log("instance %s (owner %s) forwarded and confirmed %d records", s.instanceId, s.owner(), s.accepted());
          assertThat(s.accepted()).as("instance %s took part", s.instanceId).isPositive();
          owners.add(s.owner());
        }
        assertThat(owners).as("each instance is its own owner").hasSize(4);
        assertThat(instances.stream().mapToLong(InProcessSidecar::accepted).sum())
            .as("every transition confirmed once, by some instance").isEqualTo(scenario.expectedTransitions().size());
        driver.log("redeliveries: %d", r.redeliveries());
      } finally {
        for (InProcessSidecar s : instances) {
          s.close();
        }
      }
    }
  }

  private static InProcessSidecar start(ScenarioEnv env, String id, String target) {
    try {
      return InProcessSidecar.start(env.config(ScenarioEnv.Instance.of(id, target).lease("5s")));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
