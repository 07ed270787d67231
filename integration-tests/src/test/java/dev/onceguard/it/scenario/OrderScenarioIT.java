package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.OrderScenario.Kind;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import org.junit.jupiter.api.Test;

/**
 * The order-fulfilment scenario of issue 4 through one sidecar (in-process): five routes, five
 * consumer groups, one shared state machine, ≥ 2,000 lines with every injected fault.
 */
class OrderScenarioIT {
  static final int LINES = 2000;
  static final int PARTITIONS = 6;

  @Test
  void fullScenario_oneSidecar_everyTransitionOnceInOrder_duplicatesIgnored_illegalEscalated_offsetsCommitted() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 4242L));
    // the generator really injected every kind of fault it promises
    assertThat(scenario.waves().stream().flatMap(w -> w.batches().stream()).flatMap(b -> b.stream()).map(p -> p.kind()).distinct())
        .contains(Kind.EXACT_DUP, Kind.NEW_MESSAGE_ID, Kind.OTHER_PARTITION, Kind.LATE_RESEND, Kind.REKEYED, Kind.ILLEGAL, Kind.NEVER_HEALS);
    assertThat(scenario.lines()).anyMatch(OrderScenario.Line::crossWarehouse);

    try (ScenarioEnv env = new ScenarioEnv("OrderScenarioIT", PARTITIONS);
        RecordingBusiness business = RecordingBusiness.start();
        InProcessSidecar sidecar = InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-one", business.target())))) {
      ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
      driver.run();
      Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.EXACT).check();

      assertThat(driver.l1KeysWiped()).as("L1 was in use before it was wiped").isPositive();
      assertThat(r.redeliveries()).as("no crash, no lease expiry: no redelivery").isZero();
      assertThat(sidecar.accepted()).isEqualTo(scenario.expectedTransitions().size());
    }
  }
}
