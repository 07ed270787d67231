package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.OrderScenario.Kind;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The order-fulfilment scenario of issue 4 through one sidecar (in-process): five routes, five
 * consumer groups, one shared state machine, ≥ 2,000 lines with every injected fault. No crash
 * and no rebalance: the checker runs EXACT (every transition delivered exactly once).
 */
class OrderScenarioIT {
  static final int LINES = 2000;
  static final int PARTITIONS = 6;

  private static long count(OrderScenario s, Kind kind) {
    return s.waves().stream().flatMap(w -> w.batches().stream()).flatMap(List::stream).filter(p -> p.kind() == kind).count();
  }

  @Test
  void fullScenario_oneSidecar_everyTransitionOnceInOrder_duplicatesIgnored_illegalEscalated_offsetsCommitted() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 4242L));
    // the generator really injected every kind of fault it promises
    assertThat(scenario.waves().stream().flatMap(w -> w.batches().stream()).flatMap(b -> b.stream()).map(p -> p.kind()).distinct())
        .contains(Kind.EXACT_DUP, Kind.NEW_MESSAGE_ID, Kind.OTHER_PARTITION, Kind.LATE_RESEND, Kind.DISTINCT_FACT, Kind.ILLEGAL, Kind.NEVER_HEALS);
    assertThat(scenario.lines()).anyMatch(OrderScenario.Line::crossWarehouse);

    try (ScenarioEnv env = new ScenarioEnv("OrderScenarioIT", PARTITIONS);
        RecordingBusiness business = RecordingBusiness.start();
        InProcessSidecar sidecar = InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-one", business.target())))) {
      ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
      driver.run();
      Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.EXACT).check();

      assertThat(driver.l1KeysWiped()).as("L1 was in use before it was wiped").isPositive();
      // distinct facts escalated as CONFLICTING_FACT (each one checked: reason, headers naming the
      // applied row, verdict); true re-sends with a changed key ignored by the state machine
      assertThat(r.escalated().get("CONFLICTING_FACT")).as("distinct facts escalated")
          .isEqualTo((int) count(scenario, Kind.DISTINCT_FACT)).isPositive();
      assertThat(r.ignored()).as("re-sends on the deliver route (message id in the key)").containsKey("ALREADY_APPLIED");
      assertThat(r.redeliveries()).as("no crash, no lease expiry: no redelivery").isZero();
      assertThat(sidecar.accepted()).isEqualTo(scenario.expectedTransitions().size());
    }
  }
}
