package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.OrderScenario.Transition;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.it.scenario.ScenarioDriver.Produced;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The five stages of the order pipeline produced at the same time, each route's stream in a line
 * order of its own, with lag injected per route: the create route's producer starts late, the
 * prepare route's a little less late, and the prepare route's business takes a moment per call.
 * Which group sees a line first is chance, so cross-group order is not given by construction:
 * the guard's early-arrival waits alone must deliver every line's transitions once each, in machine
 * order, with every injected copy ignored (on the deliver route, whose key holds the message id, a
 * re-send as ALREADY_APPLIED).
 */
class ConcurrentStagesScenarioIT {
  static final int LINES = 150;
  static final int PARTITIONS = 4;
  static final Duration CREATE_PRODUCER_LAG = Duration.ofMillis(600);
  static final Duration PREPARE_PRODUCER_LAG = Duration.ofMillis(300);
  static final Duration PREPARE_BUSINESS_DELAY = Duration.ofMillis(20);

  @Test
  void allStagesConcurrent_lagPerRoute_everyTransitionOnceInMachineOrder_copiesIgnored() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 8080L).withConcurrentStages());
    assertThat(scenario.waves()).singleElement().satisfies(w -> assertThat(w.concurrent()).isTrue());

    try (ScenarioEnv env = new ScenarioEnv("ConcurrentStagesScenarioIT", PARTITIONS)
            // a delivery may now wait for the lagging create and prepare routes, not only for "ship";
            // a slower retry than the default 200 ms spares MySQL the waiting records' attempts
            .earlyArrivalTimeout("deliver", "60s").earlyArrivalRetry("300ms");
        RecordingBusiness business = RecordingBusiness.start()
            .behave(d -> "prepare".equals(d.getRoute()) ? Reply.ok().after(PREPARE_BUSINESS_DELAY) : Reply.ok());
        InProcessSidecar sidecar = InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-concurrent", business.target())))) {
      ScenarioDriver driver = new ScenarioDriver(scenario, env, business)
          .lag("create", CREATE_PRODUCER_LAG)
          .lag("prepare", PREPARE_PRODUCER_LAG);
      driver.run();
      // EXACT: one OK delivery per transition. A first delivery may still carry redelivery=true
      // (a claim whose MySQL answer timed out is taken over by its own retry), so no count of those
      Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.EXACT).check();

      int early = producedBeforeTheirPredecessor(driver.produced());
      driver.log("%d of %d transitions were produced before the transition they follow", early,
          scenario.expectedTransitions().size() - LINES);
      assertThat(early).as("transitions produced before the one they follow (cross-group order not given)")
          .isGreaterThan(LINES / 2);
      assertThat(r.ignored()).as("re-sends on the message-id-keyed deliver route").containsKey("ALREADY_APPLIED");
      assertThat(r.escalated()).as("nothing to escalate in this variant").isEmpty();
      assertThat(sidecar.accepted()).isEqualTo(scenario.expectedTransitions().size());
    }
  }

  /** Transitions whose first copy was acknowledged by Kafka before the first copy of the line's previous stage. */
  private static int producedBeforeTheirPredecessor(List<Produced> produced) {
    Map<Transition, Long> firstAck = new HashMap<>();
    for (Produced p : produced) {
      firstAck.merge(p.planned().transition(), p.ackedAtNanos(), Math::min);
    }
    int early = 0;
    for (Map.Entry<Transition, Long> e : firstAck.entrySet()) {
      int k = OrderScenario.ROUTES.indexOf(e.getKey().event());
      if (k > 0) {
        Long before = firstAck.get(new Transition(e.getKey().lineId(), OrderScenario.ROUTES.get(k - 1)));
        if (before != null && e.getValue() < before) {
          early++;
        }
      }
    }
    return early;
  }
}
