package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.scenario.OrderScenario.Fate;
import dev.onceguard.it.scenario.OrderScenario.Kind;
import dev.onceguard.it.scenario.OrderScenario.Line;
import dev.onceguard.it.scenario.OrderScenario.Planned;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.OrderScenario.Transition;
import dev.onceguard.it.scenario.OrderScenario.Wave;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.it.scenario.ScenarioDriver.Produced;
import dev.onceguard.it.scenario.ScenarioHistory.EntityRow;
import dev.onceguard.it.scenario.ScenarioHistory.Escalated;
import dev.onceguard.it.scenario.ScenarioHistory.LedgerRow;
import dev.onceguard.it.scenario.ScenarioJudge.Findings;
import dev.onceguard.it.scenario.ScenarioJudge.Problem;
import dev.onceguard.v1.AppliedFact;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.KafkaRecord;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The scenario checker must be able to fail: the history an ideal guard would leave for a
 * generated scenario passes, and each doctored copy of it — a duplicate, an unflagged or a
 * non-adjacent redelivery, a reordered pair, a missing transition, a PENDING ledger row, a distinct
 * fact ignored, a true re-send escalated — is reported under its kind. No server needed.
 */
class ScenarioJudgeTest {
  private static final OrderScenario SCENARIO = OrderScenario.generate(Settings.of(600, 3, 4242L).withRejects());

  private Ideal run;

  @BeforeEach
  void idealRun() {
    run = new Ideal(SCENARIO);
  }

  private Findings judge(Strictness s) {
    return new ScenarioJudge(SCENARIO, s).judge(run.history());
  }

  private static void assertReports(Findings f, Problem p) {
    assertThat(f.problems()).as("problems found").containsKey(p);
  }

  @Test
  void idealHistory_passesUnderEveryStrictness() {
    assertThat(SCENARIO.waves().stream().flatMap(w -> w.batches().stream()).flatMap(List::stream).map(Planned::kind).distinct())
        .as("the doctored cases below need these kinds").contains(Kind.DISTINCT_FACT, Kind.NEW_MESSAGE_ID, Kind.REJECTED);
    for (Strictness s : Strictness.values()) {
      Findings f = judge(s);
      assertThat(f.report("ideal run, " + s)).isNull();
      assertThat(f.delivered()).isEqualTo(SCENARIO.expectedTransitions().size());
    }
    assertThat(judge(Strictness.EXACT).ignored()).containsKeys("ALREADY_APPLIED", "LEDGER_HIT");
    assertThat(judge(Strictness.EXACT).escalated()).containsKey("CONFLICTING_FACT");
  }

  @Test
  void duplicateDelivery_withoutFaults_isReported() {
    Transition t = run.fullLineTransition("pay");
    run.redeliver(t, true, 0);
    assertReports(judge(Strictness.EXACT), Problem.DELIVERED_MORE_THAN_ONCE);
  }

  @Test
  void flaggedRedelivery_inAFaultRun_passesOnlyWithATakeoverInTheLedger() {
    Transition t = run.fullLineTransition("pay");
    run.redeliver(t, true, 0);
    assertReports(judge(Strictness.REPLAYS), Problem.MORE_DELIVERIES_THAN_TAKEOVERS);
    run.setAttempts(t, 2);
    assertThat(judge(Strictness.REPLAYS).report("one takeover, one redelivery")).isNull();
    run.redeliver(t, true, 0);
    assertReports(judge(Strictness.REPLAYS), Problem.MORE_DELIVERIES_THAN_TAKEOVERS);
  }

  @Test
  void unflaggedRedelivery_isReported() {
    Transition t = run.fullLineTransition("prepare");
    run.setAttempts(t, 2);
    run.redeliver(t, false, 0);
    assertReports(judge(Strictness.CRASH), Problem.UNFLAGGED_REDELIVERY);
  }

  @Test
  void redeliveryAfterTheEntitysNextTransition_isReportedAsNotAdjacent() {
    Transition t = run.fullLineTransition("pay");
    run.setAttempts(t, 2);
    run.redeliver(t, true, 1); // after the line's "prepare"
    Findings f = judge(Strictness.REPLAYS);
    assertReports(f, Problem.REDELIVERY_NOT_ADJACENT);
    assertThat(f.has(Problem.UNFLAGGED_REDELIVERY)).isFalse();
  }

  @Test
  void reorderedPair_isReported() {
    Transition pay = run.fullLineTransition("pay");
    run.swapWithNext(pay);
    assertReports(judge(Strictness.EXACT), Problem.NOT_IN_MACHINE_ORDER);
  }

  @Test
  void missingTransition_isReported() {
    Transition t = run.fullLineTransition("ship");
    run.calls.removeIf(c -> c.answeredOk() && t.equals(transitionOf(c.delivery())));
    assertReports(judge(Strictness.CRASH), Problem.NOT_DELIVERED);
  }

  @Test
  void appliedCopyWhoseLastVerdictIsADuplicate_isReported_evenAfterACrash() {
    Produced applied = run.first(p -> run.verdicts.getOrDefault(p.coordinates(), List.of()).stream()
        .anyMatch(v -> v.getDisposition() == Disposition.ACCEPTED));
    List<Verdict> vs = new java.util.ArrayList<>(run.verdicts.get(applied.coordinates()));
    // consumed again after a crash and answered as a duplicate of itself
    vs.add(Verdict.newBuilder().setDisposition(Disposition.DUPLICATE_IGNORE).setReason(Reason.LEDGER_HIT)
        .setDedupKey(vs.get(0).getDedupKey()).build());
    run.verdicts.put(applied.coordinates(), vs);
    assertReports(judge(Strictness.CRASH), Problem.LAST_VERDICT_UNTRUE);
  }

  @Test
  void ledgerRowLeftPending_isReported() {
    Transition t = run.fullLineTransition("deliver");
    run.replaceLedgerRow(t, r -> new LedgerRow(r.route(), r.dedupKey(), r.businessKey(), r.entityId(), r.event(), r.fromState(),
        r.toState(), "PENDING", r.attempts(), r.sourceTopic(), r.sourcePartition(), r.sourceOffset()));
    Findings f = judge(Strictness.CRASH);
    assertReports(f, Problem.LEDGER_PENDING);
    assertReports(f, Problem.LEDGER_NOT_ONE_DONE_ROW);
  }

  @Test
  void distinctFactSilentlyIgnoredAsAlreadyApplied_isReported() {
    Produced distinct = run.first(p -> p.planned().kind() == Kind.DISTINCT_FACT);
    run.escalations.removeIf(e -> distinct.coordinates().equals(e.originalCoordinates()));
    run.verdicts.put(distinct.coordinates(), List.of(Verdict.newBuilder().setDisposition(Disposition.DUPLICATE_IGNORE)
        .setReason(Reason.ALREADY_APPLIED).setDedupKey(Ideal.dedupKey(distinct.planned())).build()));
    Findings f = judge(Strictness.REPLAYS);
    assertReports(f, Problem.NOT_ESCALATED);
    assertReports(f, Problem.WRONG_VERDICT_FOR_ESCALATION);
  }

  @Test
  void conflictingFactNamingAnotherRow_isReported() {
    Produced distinct = run.first(p -> p.planned().kind() == Kind.DISTINCT_FACT);
    int i = run.escalations.indexOf(run.escalations.stream().filter(e -> distinct.coordinates().equals(e.originalCoordinates()))
        .findFirst().orElseThrow());
    Escalated e = run.escalations.get(i);
    Map<String, String> headers = new HashMap<>(e.headers());
    headers.put(Headers.APPLIED_OFFSET, "999999");
    run.escalations.set(i, new Escalated(e.route(), headers, e.key(), e.value()));
    assertReports(judge(Strictness.EXACT), Problem.APPLIED_FACT_NOT_NAMED);
  }

  @Test
  void trueResendEscalatedAsConflictingFact_isReported() {
    Produced resend = run.first(p -> p.planned().kind() == Kind.NEW_MESSAGE_ID && OrderScenario.MESSAGE_ID_IN_KEY.contains(p.planned().route())
        && !run.acceptedCopy(p));
    run.verdicts.put(resend.coordinates(), List.of(Verdict.newBuilder().setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE)
        .setReason(Reason.CONFLICTING_FACT).setDedupKey(Ideal.dedupKey(resend.planned())).build()));
    run.escalations.add(run.escalation(resend, Reason.CONFLICTING_FACT));
    Findings f = judge(Strictness.EXACT);
    assertReports(f, Problem.COPY_ESCALATED);
    assertReports(f, Problem.ESCALATED_BUT_MUST_NOT);
  }

  @Test
  void resendWithChangedKeyIgnoredByTheLedgerLayer_isReported() {
    Produced resend = run.first(p -> p.planned().kind() == Kind.NEW_MESSAGE_ID && OrderScenario.MESSAGE_ID_IN_KEY.contains(p.planned().route())
        && !run.acceptedCopy(p));
    run.verdicts.put(resend.coordinates(), List.of(Verdict.newBuilder().setDisposition(Disposition.DUPLICATE_IGNORE)
        .setReason(Reason.LEDGER_HIT).setDedupKey(Ideal.dedupKey(resend.planned())).build()));
    assertReports(judge(Strictness.EXACT), Problem.RESEND_NOT_ALREADY_APPLIED);
  }

  private static Transition transitionOf(Delivery d) {
    return new Transition(d.getEntityId(), d.getEvent());
  }

  /**
   * What a perfect guard leaves behind for a scenario: records on made-up coordinates, the first
   * copy of each fact accepted and delivered once, every other copy ignored by the layer its key
   * calls for, every planned escalation written, the tables final. Mutable, for doctoring.
   */
  private static final class Ideal {
    private static final Pattern MESSAGE_ID = Pattern.compile("\"message_id\":\"([^\"]+)\"");
    final List<Produced> produced = new ArrayList<>();
    final List<Call> calls = new ArrayList<>();
    final List<Escalated> escalations = new ArrayList<>();
    final Map<String, List<Verdict>> verdicts = new LinkedHashMap<>();
    final List<LedgerRow> ledger = new ArrayList<>();
    final List<EntityRow> entities = new ArrayList<>();
    /** Fact -> its accepted copy. */
    private final Map<String, Produced> accepted = new HashMap<>();
    private final Map<Transition, LedgerRow> rowOf = new HashMap<>();

    Ideal(OrderScenario s) {
      Map<String, Long> offsets = new HashMap<>();
      for (Wave w : s.waves()) {
        for (List<Planned> b : w.batches()) {
          for (Planned p : b) {
            String topic = "t-" + p.route();
            long off = offsets.merge(topic + "-" + p.partition(), 1L, Long::sum) - 1;
            produced.add(new Produced(p, topic, p.partition(), off, 0));
          }
        }
      }
      for (Produced p : produced) {
        Planned pl = p.planned();
        if (pl.escalation() == null) {
          accepted.putIfAbsent(pl.fact(), p);
        }
      }
      accepted.forEach((fact, p) -> {
        Planned pl = p.planned();
        Transition t = pl.transition();
        List<String> applied = pl.line().fate().applied;
        int k = applied.indexOf(pl.event());
        String from = k == 0 ? null : OrderScenario.TO.get(applied.get(k - 1));
        LedgerRow r = new LedgerRow(pl.route(), dedupKey(pl), "business key of " + pl.fact(), t.lineId(), t.event(), from,
            OrderScenario.TO.get(t.event()), "DONE", 1, p.topic(), p.partition(), p.offset());
        ledger.add(r);
        rowOf.put(t, r);
      });
      Map<Transition, String> factOf = new HashMap<>();
      s.acceptedFacts().forEach((fact, t) -> factOf.put(t, fact));
      for (Line l : s.lines()) {
        for (String e : l.fate().applied) {
          Produced p = accepted.get(factOf.get(new Transition(l.id(), e)));
          calls.add(new Call(delivery(p, false), true, 0));
        }
        if (l.fate() == Fate.REJECT_PAY || l.fate() == Fate.REJECT_DELIVER) {
          Produced rejected = first(p -> p.planned().kind() == Kind.REJECTED && p.planned().line().equals(l));
          calls.add(new Call(delivery(rejected, false), false, 0));
        }
        entities.add(new EntityRow(l.id(), l.finalState(), l.finalVersion(), null));
      }
      for (Produced p : produced) {
        Planned pl = p.planned();
        Verdict.Builder v = Verdict.newBuilder().setDedupKey(dedupKey(pl)).setRoute(pl.route()).setEntityId(pl.line().id()).setEvent(pl.event());
        if (pl.escalation() != null) {
          v.setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE).setReason(pl.escalation());
          if (pl.escalation() == Reason.CONFLICTING_FACT) {
            LedgerRow r = rowOf.get(pl.transition());
            v.setApplied(AppliedFact.newBuilder().setRoute(r.route()).setDedupKey(r.dedupKey()).setBusinessKey(r.businessKey())
                .setSourceTopic(r.sourceTopic()).setSourcePartition(r.sourcePartition()).setSourceOffset(r.sourceOffset()));
          }
          escalations.add(escalation(p, pl.escalation()));
        } else if (accepted.get(pl.fact()) == p) {
          v.setDisposition(Disposition.ACCEPTED);
        } else {
          boolean sameKey = dedupKey(pl).equals(dedupKey(accepted.get(pl.fact()).planned()));
          v.setDisposition(Disposition.DUPLICATE_IGNORE).setReason(sameKey ? Reason.LEDGER_HIT : Reason.ALREADY_APPLIED);
        }
        verdicts.put(p.coordinates(), List.of(v.build()));
      }
    }

    ScenarioHistory history() {
      return new ScenarioHistory(produced, calls, escalations, verdicts, ledger, entities);
    }


    /** As the guard keys it: the business fields and the event, plus the message id on the routes keyed by it. */
    static String dedupKey(Planned p) {
      Line l = p.line();
      String key = p.route() + "|" + p.event() + "|" + l.orderId() + "|" + l.sku() + "|" + l.warehouse() + "|" + l.batch();
      if (OrderScenario.MESSAGE_ID_IN_KEY.contains(p.route())) {
        Matcher m = MESSAGE_ID.matcher(new String(p.value(), StandardCharsets.UTF_8));
        key += "|" + (m.find() ? m.group(1) : "");
      }
      return key;
    }

    Escalated escalation(Produced p, Reason reason) {
      Planned pl = p.planned();
      Map<String, String> h = new HashMap<>();
      h.put(Headers.DISPOSITION, Disposition.ILLEGAL_TRANSITION_ESCALATE.name());
      h.put(Headers.REASON, reason.name());
      h.put(Headers.ROUTE, pl.route());
      h.put(Headers.ENTITY_ID, pl.line().id());
      h.put(Headers.EVENT, pl.event());
      h.put(Headers.ORIGINAL_TOPIC, p.topic());
      h.put(Headers.ORIGINAL_PARTITION, String.valueOf(p.partition()));
      h.put(Headers.ORIGINAL_OFFSET, String.valueOf(p.offset()));
      LedgerRow r = rowOf.get(pl.transition());
      if (reason == Reason.CONFLICTING_FACT && r != null) {
        h.put(Headers.APPLIED_BUSINESS_KEY, r.businessKey());
        h.put(Headers.APPLIED_DEDUP_KEY, r.dedupKey());
        h.put(Headers.APPLIED_TOPIC, r.sourceTopic());
        h.put(Headers.APPLIED_PARTITION, String.valueOf(r.sourcePartition()));
        h.put(Headers.APPLIED_OFFSET, String.valueOf(r.sourceOffset()));
      }
      return new Escalated(pl.route(), h, pl.key(), pl.value());
    }

    private Delivery delivery(Produced p, boolean redelivery) {
      Planned pl = p.planned();
      List<String> applied = pl.line().fate().applied;
      int k = applied.indexOf(pl.event());
      String from = k <= 0 ? "" : OrderScenario.TO.get(applied.get(k - 1));
      if (k < 0) {
        // a rejected transition: from the last applied state
        from = OrderScenario.TO.get(applied.get(applied.size() - 1));
      }
      return Delivery.newBuilder()
          .setRecord(KafkaRecord.newBuilder().setTopic(p.topic()).setPartition(p.partition()).setOffset(p.offset()))
          .setRoute(pl.route()).setEntityId(pl.line().id()).setEvent(pl.event()).setFromState(from)
          .setToState(OrderScenario.TO.get(pl.event())).setDedupKey(dedupKey(pl)).setAttempt(1).setRedelivery(redelivery).build();
    }

    Produced first(Predicate<Produced> p) {
      return produced.stream().filter(p).findFirst().orElseThrow();
    }

    boolean acceptedCopy(Produced p) {
      return accepted.get(p.planned().fact()) == p;
    }

    /** A transition of the first FULL line. */
    Transition fullLineTransition(String event) {
      Line l = SCENARIO.lines().stream().filter(x -> x.fate() == Fate.FULL).findFirst().orElseThrow();
      return new Transition(l.id(), event);
    }

    private int indexOfOk(Transition t) {
      for (int i = 0; i < calls.size(); i++) {
        if (calls.get(i).answeredOk() && t.equals(transitionOf(calls.get(i).delivery()))) {
          return i;
        }
      }
      throw new IllegalArgumentException("no delivery of " + t);
    }

    /**
     * Delivers {@code t} once more, right after its first delivery ({@code later = 0}) or after
     * that many further OK deliveries of the same entity.
     */
    void redeliver(Transition t, boolean flagged, int later) {
      int i = indexOfOk(t);
      Delivery d = calls.get(i).delivery();
      int at = i + 1;
      for (int n = 0; n < later; at++) {
        if (calls.get(at).answeredOk() && calls.get(at).delivery().getEntityId().equals(t.lineId())) {
          n++;
        }
      }
      calls.add(at, new Call(d.toBuilder().setRedelivery(flagged).setAttempt(1).build(), true, 0));
    }

    /** Swaps the first delivery of {@code t} with the entity's next delivery. */
    void swapWithNext(Transition t) {
      int i = indexOfOk(t);
      int j = i + 1;
      while (!calls.get(j).delivery().getEntityId().equals(t.lineId())) {
        j++;
      }
      Call c = calls.get(i);
      calls.set(i, calls.get(j));
      calls.set(j, c);
    }

    void setAttempts(Transition t, int attempts) {
      replaceLedgerRow(t, r -> new LedgerRow(r.route(), r.dedupKey(), r.businessKey(), r.entityId(), r.event(), r.fromState(), r.toState(),
          r.status(), attempts, r.sourceTopic(), r.sourcePartition(), r.sourceOffset()));
    }

    void replaceLedgerRow(Transition t, java.util.function.UnaryOperator<LedgerRow> f) {
      LedgerRow r = rowOf.get(t);
      int i = ledger.indexOf(r);
      LedgerRow n = f.apply(r);
      ledger.set(i, n);
      rowOf.put(t, n);
    }
  }
}
