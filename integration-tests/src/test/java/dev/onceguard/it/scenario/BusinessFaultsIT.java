package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.it.scenario.OrderScenario.Fate;
import dev.onceguard.it.scenario.OrderScenario.Line;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.OrderScenario.Transition;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.v1.Delivery;
import io.grpc.Status;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A business that answers RETRY and gRPC UNAVAILABLE for its first 3 seconds, and REJECT for
 * chosen transitions: the refused records are delivered later, the rejected ones escalated as
 * BUSINESS_REJECTED with the entity back in its previous state, nothing lost.
 */
class BusinessFaultsIT {
  static final int LINES = 300;
  static final int PARTITIONS = 4;
  static final long REFUSING_NANOS = TimeUnit.SECONDS.toNanos(3);

  @Test
  void businessRefusingThenRejectingSome_refusedDeliveredLater_rejectedEscalatedWithStateRestored() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 31L).withRejects());
    Set<Transition> rejected = new HashSet<>();
    for (Line l : scenario.lines()) {
      if (l.fate() == Fate.REJECT_PAY) {
        rejected.add(new Transition(l.id(), "pay"));
      } else if (l.fate() == Fate.REJECT_DELIVER) {
        rejected.add(new Transition(l.id(), "deliver"));
      }
    }
    assertThat(rejected).as("the scenario has transitions to reject").hasSizeGreaterThan(5);

    AtomicLong firstCall = new AtomicLong();
    AtomicLong refusals = new AtomicLong();
    Set<Transition> refusedByStatus = java.util.concurrent.ConcurrentHashMap.newKeySet();
    try (ScenarioEnv env = new ScenarioEnv("BusinessFaultsIT", PARTITIONS);
        RecordingBusiness business = RecordingBusiness.start().behave(d -> {
          long now = System.nanoTime();
          firstCall.compareAndSet(0, now);
          if (now - firstCall.get() < REFUSING_NANOS) {
            if (refusals.incrementAndGet() % 2 == 0) {
              refusedByStatus.add(new Transition(d.getEntityId(), d.getEvent()));
              return Reply.status(Status.UNAVAILABLE.withDescription("business restarting"));
            }
            return Reply.retry("business warming up", 0);
          }
          if (rejected.contains(new Transition(d.getEntityId(), d.getEvent()))) {
            return Reply.reject("credit check failed for " + d.getEntityId());
          }
          return Reply.ok();
        });
        InProcessSidecar sidecar = InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-faults", business.target())))) {
      ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
      driver.run();
      Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.EXACT).check();

      // refused calls: there were some, and each refused transition was delivered later, at a later attempt
      List<Call> calls = business.calls();
      Set<Transition> refused = new HashSet<>();
      Map<Transition, Delivery> okByTransition = new HashMap<>();
      Map<Transition, Integer> callsByTransition = new HashMap<>();
      for (Call c : calls) {
        Transition t = new Transition(c.delivery().getEntityId(), c.delivery().getEvent());
        callsByTransition.merge(t, 1, Integer::sum);
        if (c.answeredOk()) {
          okByTransition.put(t, c.delivery());
        } else if (!rejected.contains(t)) {
          refused.add(t);
        }
      }
      driver.log("%d calls refused (RETRY/UNAVAILABLE) for %d transitions; %d transitions rejected", refusals.get(), refused.size(),
          rejected.size());
      assertThat(refusals.get()).as("the business refused calls").isGreaterThan(10);
      assertThat(refused).isNotEmpty();
      for (Transition t : refused) {
        assertThat(okByTransition).as("refused %s was delivered later", t).containsKey(t);
        assertThat(okByTransition.get(t).getAttempt()).as("attempt number of %s's delivery", t).isGreaterThan(1);
        // a retry after a transport-level refusal (UNAVAILABLE) may have been seen by the business,
        // so it is flagged; a retry after an explicit RETRY answer is not
        if (!refusedByStatus.contains(t)) {
          assertThat(okByTransition.get(t).getRedelivery()).as("a retry after the business's own RETRY answer is no redelivery").isFalse();
        }
      }
      // rejected ones: called once each (REJECT is final), never OK, escalated (checked) with state restored (checked)
      for (Transition t : rejected) {
        assertThat(callsByTransition.get(t)).as("calls for rejected %s", t).isEqualTo(1);
      }
      assertThat(r.escalated().get("BUSINESS_REJECTED")).isEqualTo(rejected.size());
      assertThat(sidecar.accepted()).isEqualTo(scenario.expectedTransitions().size());
    }
  }
}
