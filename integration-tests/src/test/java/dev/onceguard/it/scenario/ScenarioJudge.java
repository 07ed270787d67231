package dev.onceguard.it.scenario;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.scenario.OrderScenario.Kind;
import dev.onceguard.it.scenario.OrderScenario.Line;
import dev.onceguard.it.scenario.OrderScenario.Planned;
import dev.onceguard.it.scenario.OrderScenario.Transition;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.it.scenario.ScenarioDriver.Produced;
import dev.onceguard.it.scenario.ScenarioHistory.EntityRow;
import dev.onceguard.it.scenario.ScenarioHistory.Escalated;
import dev.onceguard.it.scenario.ScenarioHistory.LedgerRow;
import dev.onceguard.v1.AppliedFact;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;

/**
 * Judges a {@link ScenarioHistory} against what its {@link OrderScenario} planned. Pure: no
 * server, no clock; the same history always gives the same findings.
 *
 * <p>Deliveries (OK-answered calls): every legitimate transition delivered, from a copy of its own
 * fact, with the right from/to states, per entity in machine order; nothing else delivered. Under
 * {@link Strictness#EXACT} exactly one delivery per transition. Otherwise a transition may be
 * delivered again only as often as the ledger shows takeovers of its row ({@code attempts - 1}),
 * each further delivery flagged {@code redelivery = true} with the same dedup key, and adjacent to
 * the first in the entity's delivered sequence (no other transition of the entity between them).
 *
 * <p>Decisions: every record decided; injected copies ignored — by L1/L2 when they carry the
 * accepted copy's dedup key, by the state machine (ALREADY_APPLIED) when only the key changed, never
 * escalated; every illegal, never-healing, rejected or distinct-fact record escalated with its
 * reason (a distinct fact as CONFLICTING_FACT, naming the ledger row that applied the transition
 * in its headers and verdict), nothing else escalated.
 *
 * <p>Tables: {@code og_entity} in each line's final state with nothing pending; {@code og_ledger}
 * exactly one DONE row per accepted transition, describing it, and no PENDING row.
 */
final class ScenarioJudge {
  private static final int EXAMPLES = 8;
  private static final Set<Reason> LEDGER_LAYER_DUPLICATES = Set.of(Reason.CACHE_HIT, Reason.LEDGER_HIT, Reason.IN_FLIGHT);

  /** One kind of violation; the checker reports each with examples. */
  enum Problem {
    RECORDS_PRODUCED("records produced differ from the plan"),
    NOT_DELIVERED("legitimate transition never delivered"),
    DELIVERED_MORE_THAN_ONCE("transition delivered more than once in a run without faults"),
    MORE_DELIVERIES_THAN_TAKEOVERS("transition delivered again more often than the ledger shows takeovers of its row"),
    UNFLAGGED_REDELIVERY("transition delivered again without redelivery=true"),
    REDELIVERY_WITH_OTHER_KEY("redelivery with another dedup key"),
    REDELIVERY_NOT_ADJACENT("redelivery not adjacent to its first delivery (another transition of the entity between them)"),
    DELIVERED_FROM_WRONG_RECORD("transition delivered from a record that is not a copy of its fact"),
    DELIVERED_BUT_MUST_NOT("delivered but must not be"),
    NOT_IN_MACHINE_ORDER("entity's transitions not delivered in machine order"),
    WRONG_STATES("wrong from/to states in a delivery"),
    ESCALATED_UNKNOWN_RECORD("escalated a record the test never produced"),
    ESCALATED_BUT_MUST_NOT("escalated but must not be"),
    ESCALATED_WITH_WRONG_REASON("escalated with the wrong reason"),
    ESCALATION_HEADERS("escalation headers do not describe the record"),
    ESCALATION_CONTENT("escalated record does not carry the original key and value"),
    APPLIED_FACT_NOT_NAMED("CONFLICTING_FACT does not name the ledger row that applied the transition"),
    NOT_ESCALATED("not escalated"),
    UNDECIDED("record without a verdict"),
    DECIDED_MORE_THAN_ONCE("record decided more than once in a run without faults"),
    WRONG_VERDICT_FOR_ESCALATION("verdict of a record to escalate is not its escalation"),
    COPY_ESCALATED("copy of a legitimate fact escalated"),
    SAME_KEY_COPY_NOT_BY_LEDGER("copy with the delivered dedup key not ignored by L1/L2 (CACHE_HIT, LEDGER_HIT, IN_FLIGHT)"),
    RESEND_NOT_ALREADY_APPLIED("re-send with a changed dedup key but the same content not ignored as ALREADY_APPLIED"),
    LATE_RESEND_NOT_LEDGER_HIT("late re-send (L1 keys gone) not caught by the ledger"),
    NOT_ACCEPTED_ONCE("fact not accepted exactly once (ACCEPTED verdicts on its copies)"),
    LAST_VERDICT_UNTRUE("the copy that applied a fact has another verdict last (a compacted verdict topic would lose the fact)"),
    DUPLICATE_NOT_IGNORED("injected duplicate not ignored"),
    ENTITY_ROW_COUNT("og_entity row count differs from the lines"),
    ENTITY_MISSING("entity missing in og_entity"),
    ENTITY_NOT_FINAL("entity not in its final state, or still pending"),
    LEDGER_PENDING("og_ledger row left PENDING (or REJECTED without a BUSINESS_REJECTED escalation)"),
    LEDGER_NOT_ONE_DONE_ROW("accepted transition without exactly one DONE og_ledger row"),
    LEDGER_ROW_WRONG("DONE og_ledger row does not describe its delivered transition"),
    LEDGER_ROW_UNEXPECTED("DONE og_ledger row for a transition that must not be applied");

    final String text;

    Problem(String text) {
      this.text = text;
    }
  }

  /** What the judge found: problems by kind with examples, and the run's figures. */
  record Findings(Map<Problem, List<String>> problems, int delivered, int redeliveries, int notOkCalls,
      Map<String, Integer> escalated, Map<String, Integer> ignored, int repeatedEscalations, int repeatedVerdicts) {
    boolean has(Problem p) {
      return problems.containsKey(p);
    }

    /** Null when there is nothing to report. */
    String report(String run) {
      if (problems.isEmpty()) {
        return null;
      }
      StringBuilder sb = new StringBuilder(run + ": the checker found problems:\n");
      problems.forEach((k, v) -> sb.append("  ").append(k.text).append(" [").append(k).append("]: ").append(v.size())
          .append(", e.g. ").append(v.subList(0, Math.min(EXAMPLES, v.size()))).append('\n'));
      return sb.toString();
    }
  }

  private final OrderScenario scenario;
  private final Strictness strictness;
  private final Map<Problem, List<String>> problems = new EnumMap<>(Problem.class);
  private ScenarioHistory h;
  private Map<String, Produced> byCoord;
  /** Accepted transition -> its OK deliveries, in order. */
  private Map<Transition, List<Delivery>> deliveriesOf;
  /** (entity, event) -> DONE ledger rows. */
  private Map<Transition, List<LedgerRow>> doneRows;

  ScenarioJudge(OrderScenario scenario, Strictness strictness) {
    this.scenario = scenario;
    this.strictness = strictness;
  }

  /** Judges one history; call once per judge. */
  Findings judge(ScenarioHistory history) {
    this.h = history;
    byCoord = new HashMap<>();
    for (Produced p : h.produced()) {
      byCoord.put(p.coordinates(), p);
    }
    doneRows = new HashMap<>();
    for (LedgerRow r : h.ledger()) {
      if ("DONE".equals(r.status())) {
        doneRows.computeIfAbsent(new Transition(r.entityId(), r.event()), k -> new ArrayList<>()).add(r);
      }
    }
    if (h.produced().size() != scenario.records()) {
      add(Problem.RECORDS_PRODUCED, h.produced().size() + " of " + scenario.records());
    }
    int[] redeliveries = {0};
    int delivered = checkDeliveries(redeliveries);
    int notOk = (int) h.calls().stream().filter(c -> !c.answeredOk()).count();
    int[] repeatedEscalations = {0};
    Map<String, Integer> escalated = checkEscalations(repeatedEscalations);
    int[] repeatedVerdicts = {0};
    Map<String, Integer> ignored = checkVerdicts(repeatedVerdicts);
    checkEntities();
    checkLedger();
    return new Findings(problems, delivered, redeliveries[0], notOk, escalated, ignored, repeatedEscalations[0], repeatedVerdicts[0]);
  }

  private void add(Problem p, String example) {
    problems.computeIfAbsent(p, k -> new ArrayList<>()).add(example);
  }

  private Produced producedOf(Delivery d) {
    return byCoord.get(RecordingBusiness.coordinatesOf(d.getRecord()));
  }

  private static String what(Planned pl) {
    return pl.kind() + " " + pl.line().id() + ":" + pl.event() + " on " + pl.route();
  }

  // ------------------------------------------------------------------------------- deliveries

  /** @return OK deliveries */
  private int checkDeliveries(int[] redeliveries) {
    deliveriesOf = new LinkedHashMap<>();
    Map<String, List<Delivery>> byLine = new HashMap<>();
    int ok = 0;
    for (Call c : h.calls()) {
      if (!c.answeredOk()) {
        continue;
      }
      ok++;
      Delivery d = c.delivery();
      if (d.getRedelivery()) {
        redeliveries[0]++;
      }
      deliveriesOf.computeIfAbsent(new Transition(d.getEntityId(), d.getEvent()), k -> new ArrayList<>()).add(d);
      byLine.computeIfAbsent(d.getEntityId(), k -> new ArrayList<>()).add(d);
    }
    Set<Transition> expected = scenario.expectedTransitions();
    for (Transition t : expected) {
      List<Delivery> ds = deliveriesOf.get(t);
      if (ds == null) {
        add(Problem.NOT_DELIVERED, t.toString());
        continue;
      }
      int extra = ds.size() - 1;
      if (extra > 0 && strictness == Strictness.EXACT) {
        add(Problem.DELIVERED_MORE_THAN_ONCE, t + " x" + ds.size());
      } else if (extra > 0) {
        int takeovers = doneRows.getOrDefault(t, List.of()).stream().mapToInt(r -> r.attempts() - 1).max().orElse(0);
        if (extra > takeovers) {
          add(Problem.MORE_DELIVERIES_THAN_TAKEOVERS, t + " x" + ds.size() + " with " + takeovers + " takeovers");
        }
      }
      for (int i = 1; i < ds.size(); i++) {
        if (!ds.get(i).getRedelivery()) {
          add(Problem.UNFLAGGED_REDELIVERY, t + " delivery " + (i + 1) + " of " + ds.size());
        }
        if (!ds.get(i).getDedupKey().equals(ds.get(0).getDedupKey())) {
          add(Problem.REDELIVERY_WITH_OTHER_KEY, t.toString());
        }
      }
      for (Delivery d : ds) {
        Produced p = producedOf(d);
        if (p == null || !t.equals(scenario.acceptedFacts().get(p.planned().fact()))) {
          add(Problem.DELIVERED_FROM_WRONG_RECORD, t + " from " + (p == null ? "unknown record" : p.planned().kind() + " " + p.planned().fact()));
        }
      }
    }
    deliveriesOf.forEach((t, ds) -> {
      if (!expected.contains(t)) {
        Produced p = producedOf(ds.get(0));
        add(Problem.DELIVERED_BUT_MUST_NOT, t + " (" + (p == null ? "unknown record" : p.planned().kind()) + ")");
      }
    });
    for (Line l : scenario.lines()) {
      checkLineSequence(l, byLine.getOrDefault(l.id(), List.of()));
    }
    return ok;
  }

  private void checkLineSequence(Line l, List<Delivery> ds) {
    List<String> applied = l.fate().applied;
    List<String> firsts = new ArrayList<>();
    for (int i = 0; i < ds.size(); i++) {
      Delivery d = ds.get(i);
      String e = d.getEvent();
      if (firsts.contains(e)) {
        // a further delivery of a transition: nothing of the entity may lie between it and the last one
        if (!ds.get(i - 1).getEvent().equals(e)) {
          add(Problem.REDELIVERY_NOT_ADJACENT, l.id() + ": " + ds.stream().map(Delivery::getEvent).toList());
        }
      } else {
        firsts.add(e);
      }
      int k = applied.indexOf(e);
      if (k >= 0) {
        String from = k == 0 ? "" : OrderScenario.TO.get(applied.get(k - 1));
        if (!d.getFromState().equals(from) || !d.getToState().equals(OrderScenario.TO.get(e))) {
          add(Problem.WRONG_STATES, l.id() + ":" + e + " " + d.getFromState() + "->" + d.getToState() + ", expected " + from + "->"
              + OrderScenario.TO.get(e));
        }
      }
    }
    List<String> delivered = firsts.stream().filter(applied::contains).toList();
    List<String> inOrder = applied.stream().filter(delivered::contains).toList();
    if (!delivered.equals(inOrder)) {
      add(Problem.NOT_IN_MACHINE_ORDER, l.id() + " (" + l.fate() + "): " + delivered);
    }
  }

  // ------------------------------------------------------------------------------ escalations

  /** The one DONE row that applied the transition, or null. */
  private LedgerRow appliedRow(Transition t) {
    List<LedgerRow> rows = doneRows.getOrDefault(t, List.of());
    return rows.size() == 1 ? rows.get(0) : null;
  }

  private Map<String, Integer> checkEscalations(int[] repeated) {
    Map<String, Integer> byReason = new TreeMap<>();
    Map<String, Integer> seen = new HashMap<>();
    for (Escalated e : h.escalations()) {
      String coords = e.originalCoordinates();
      String reason = e.header(Headers.REASON);
      byReason.merge(String.valueOf(reason), 1, Integer::sum);
      if (seen.merge(coords, 1, Integer::sum) > 1) {
        repeated[0]++;
      }
      Produced p = byCoord.get(coords);
      if (p == null) {
        add(Problem.ESCALATED_UNKNOWN_RECORD, coords + " " + reason);
        continue;
      }
      Planned pl = p.planned();
      String what = what(pl) + " escalated " + reason + " (" + e.header(Headers.DETAIL) + ")";
      if (pl.escalation() == null) {
        add(Problem.ESCALATED_BUT_MUST_NOT, what);
        continue;
      }
      if (!pl.escalation().name().equals(reason)) {
        add(Problem.ESCALATED_WITH_WRONG_REASON, what + ", expected " + pl.escalation());
      }
      if (!Disposition.ILLEGAL_TRANSITION_ESCALATE.name().equals(e.header(Headers.DISPOSITION))
          || !pl.route().equals(e.header(Headers.ROUTE)) || !pl.route().equals(e.route())
          || !pl.line().id().equals(e.header(Headers.ENTITY_ID)) || !pl.event().equals(e.header(Headers.EVENT))) {
        add(Problem.ESCALATION_HEADERS, what + " on the escalation topic of " + e.route() + ", headers route=" + e.header(Headers.ROUTE)
            + " entity=" + e.header(Headers.ENTITY_ID) + " event=" + e.header(Headers.EVENT));
      }
      if (!Arrays.equals(e.value(), pl.value()) || !Arrays.equals(e.key(), pl.key())) {
        add(Problem.ESCALATION_CONTENT, what);
      }
      if (pl.escalation() == Reason.CONFLICTING_FACT) {
        LedgerRow applied = appliedRow(pl.transition());
        if (applied == null || !applied.businessKey().equals(e.header(Headers.APPLIED_BUSINESS_KEY))
            || !applied.dedupKey().equals(e.header(Headers.APPLIED_DEDUP_KEY))
            || !applied.sourceTopic().equals(e.header(Headers.APPLIED_TOPIC))
            || !String.valueOf(applied.sourcePartition()).equals(e.header(Headers.APPLIED_PARTITION))
            || !String.valueOf(applied.sourceOffset()).equals(e.header(Headers.APPLIED_OFFSET))) {
          add(Problem.APPLIED_FACT_NOT_NAMED, what + ": headers applied " + e.header(Headers.APPLIED_TOPIC) + "-"
              + e.header(Headers.APPLIED_PARTITION) + "@" + e.header(Headers.APPLIED_OFFSET) + " key " + e.header(Headers.APPLIED_BUSINESS_KEY)
              + ", ledger " + (applied == null ? "has no single DONE row" : applied.sourceCoordinates() + " key " + applied.businessKey()));
        }
      }
    }
    for (Produced p : h.produced()) {
      Planned pl = p.planned();
      if (pl.escalation() != null && !seen.containsKey(p.coordinates())) {
        add(Problem.NOT_ESCALATED, what(pl) + " (expected " + pl.escalation() + ")");
      }
    }
    return byReason;
  }

  // --------------------------------------------------------------------------------- verdicts

  private Map<String, Integer> checkVerdicts(int[] repeated) {
    Map<String, Integer> ignored = new TreeMap<>();
    Map<String, List<Produced>> copiesByFact = new LinkedHashMap<>();
    for (Produced p : h.produced()) {
      Planned pl = p.planned();
      List<Verdict> vs = h.verdicts().getOrDefault(p.coordinates(), List.of());
      String what = pl.kind() + " " + pl.fact() + " @" + p.coordinates();
      if (vs.isEmpty()) {
        add(Problem.UNDECIDED, what);
        continue;
      }
      if (vs.size() > 1) {
        repeated[0] += vs.size() - 1;
        if (strictness == Strictness.EXACT) {
          add(Problem.DECIDED_MORE_THAN_ONCE, what + " " + vs.stream().map(v -> v.getReason().name()).toList());
        }
      }
      for (Verdict v : vs) {
        if (v.getDisposition() == Disposition.DUPLICATE_IGNORE) {
          ignored.merge(v.getReason().name(), 1, Integer::sum);
        }
      }
      if (pl.escalation() != null) {
        for (Verdict v : vs) {
          if (v.getDisposition() != Disposition.ILLEGAL_TRANSITION_ESCALATE || v.getReason() != pl.escalation()) {
            add(Problem.WRONG_VERDICT_FOR_ESCALATION, what + " " + v.getDisposition() + "/" + v.getReason() + ", expected " + pl.escalation());
          } else if (v.getReason() == Reason.CONFLICTING_FACT && !namesRow(v.getApplied(), appliedRow(pl.transition()))) {
            add(Problem.APPLIED_FACT_NOT_NAMED, what + ": verdict names " + v.getApplied().getSourceTopic() + "-"
                + v.getApplied().getSourcePartition() + "@" + v.getApplied().getSourceOffset());
          }
        }
        continue;
      }
      copiesByFact.computeIfAbsent(pl.fact(), k -> new ArrayList<>()).add(p);
      List<Delivery> ds = deliveriesOf.get(pl.transition());
      String deliveredKey = ds == null ? null : ds.get(0).getDedupKey();
      for (Verdict v : vs) {
        if (v.getDisposition() == Disposition.ILLEGAL_TRANSITION_ESCALATE) {
          add(Problem.COPY_ESCALATED, what + " " + v.getReason() + ": " + v.getDetail());
        }
        if (v.getDisposition() == Disposition.DUPLICATE_IGNORE && deliveredKey != null) {
          if (v.getDedupKey().equals(deliveredKey) && !LEDGER_LAYER_DUPLICATES.contains(v.getReason())) {
            add(Problem.SAME_KEY_COPY_NOT_BY_LEDGER, what + " " + v.getReason());
          } else if (!v.getDedupKey().equals(deliveredKey) && v.getReason() != Reason.ALREADY_APPLIED) {
            add(Problem.RESEND_NOT_ALREADY_APPLIED, what + " " + v.getReason());
          }
        }
        if (pl.kind() == Kind.LATE_RESEND && v.getReason() != Reason.LEDGER_HIT) {
          add(Problem.LATE_RESEND_NOT_LEDGER_HIT, what + " " + v.getDisposition() + "/" + v.getReason());
        }
      }
    }
    copiesByFact.forEach((fact, copies) -> {
      long accepted = copies.stream().filter(p -> h.verdicts().getOrDefault(p.coordinates(), List.of()).stream()
          .anyMatch(v -> v.getDisposition() == Disposition.ACCEPTED)).count();
      long ignoredCopies = copies.stream().filter(p -> h.verdicts().getOrDefault(p.coordinates(), List.of()).stream()
          .anyMatch(v -> v.getDisposition() == Disposition.DUPLICATE_IGNORE)).count();
      if (accepted != 1) {
        add(Problem.NOT_ACCEPTED_ONCE, fact + " (" + copies.size() + " copies, " + accepted + " accepted)");
      }
      for (Produced p : copies) {
        List<Verdict> vs = h.verdicts().getOrDefault(p.coordinates(), List.of());
        if (vs.stream().anyMatch(v -> v.getDisposition() == Disposition.ACCEPTED)
            && vs.get(vs.size() - 1).getDisposition() != Disposition.ACCEPTED) {
          add(Problem.LAST_VERDICT_UNTRUE, fact + " at " + p.coordinates() + ": last verdict " + vs.get(vs.size() - 1).getDisposition()
              + "/" + vs.get(vs.size() - 1).getReason());
        }
      }
      if (ignoredCopies < copies.size() - 1) {
        add(Problem.DUPLICATE_NOT_IGNORED, fact + " (" + copies.size() + " copies, " + ignoredCopies + " ignored)");
      }
    });
    return ignored;
  }

  private static boolean namesRow(AppliedFact a, LedgerRow r) {
    return r != null && a.getRoute().equals(r.route()) && a.getDedupKey().equals(r.dedupKey()) && a.getBusinessKey().equals(r.businessKey())
        && a.getSourceTopic().equals(r.sourceTopic()) && a.getSourcePartition() == r.sourcePartition()
        && a.getSourceOffset() == r.sourceOffset();
  }

  // ----------------------------------------------------------------------------------- tables

  private void checkEntities() {
    Map<String, EntityRow> entities = new HashMap<>();
    h.entities().forEach(e -> entities.put(e.entityId(), e));
    if (entities.size() != scenario.lines().size()) {
      add(Problem.ENTITY_ROW_COUNT, entities.size() + " rows for " + scenario.lines().size() + " lines");
    }
    for (Line l : scenario.lines()) {
      EntityRow row = entities.get(l.id());
      if (row == null) {
        add(Problem.ENTITY_MISSING, l.id());
      } else if (!l.finalState().equals(row.state()) || row.version() != l.finalVersion() || row.pendingKey() != null) {
        add(Problem.ENTITY_NOT_FINAL, l.id() + " (" + l.fate() + "): state=" + row.state() + " version=" + row.version()
            + " pending=" + row.pendingKey() + ", expected " + l.finalState() + " v" + l.finalVersion());
      }
    }
  }

  private void checkLedger() {
    // a REJECTED row is what a business rejection leaves (so that a replay is flagged): it must
    // belong to a record escalated as BUSINESS_REJECTED
    Set<String> businessRejected = new HashSet<>();
    for (Escalated e : h.escalations()) {
      if ("BUSINESS_REJECTED".equals(e.header(Headers.REASON))) {
        businessRejected.add(e.originalCoordinates());
      }
    }
    for (LedgerRow r : h.ledger()) {
      boolean explained = "DONE".equals(r.status())
          || ("REJECTED".equals(r.status()) && businessRejected.contains(r.sourceCoordinates()));
      if (!explained) {
        add(Problem.LEDGER_PENDING, r.route() + " " + r.entityId() + ":" + r.event() + " " + r.status() + " attempts=" + r.attempts()
            + " from " + r.sourceCoordinates());
      }
    }
    Set<Transition> expected = scenario.expectedTransitions();
    Map<String, Line> lines = new HashMap<>();
    scenario.lines().forEach(l -> lines.put(l.id(), l));
    for (Transition t : expected) {
      List<LedgerRow> rows = doneRows.getOrDefault(t, List.of());
      if (rows.size() != 1) {
        add(Problem.LEDGER_NOT_ONE_DONE_ROW, t + ": " + rows.size() + " DONE rows");
        continue;
      }
      LedgerRow r = rows.get(0);
      Produced source = byCoord.get(r.sourceCoordinates());
      Line line = lines.get(t.lineId());
      int k = line.fate().applied.indexOf(t.event());
      String from = k <= 0 ? null : OrderScenario.TO.get(line.fate().applied.get(k - 1));
      List<Delivery> ds = deliveriesOf.get(t);
      boolean describes = source != null && t.equals(scenario.acceptedFacts().get(source.planned().fact()))
          && source.planned().route().equals(r.route()) && Objects.equals(emptyToNull(r.fromState()), from)
          && OrderScenario.TO.get(t.event()).equals(r.toState()) && (ds == null || ds.get(0).getDedupKey().equals(r.dedupKey()));
      if (!describes) {
        add(Problem.LEDGER_ROW_WRONG, t + ": row " + r.route() + " " + r.fromState() + "->" + r.toState() + " from " + r.sourceCoordinates()
            + (source == null ? " (not produced)" : " (" + source.planned().kind() + " " + source.planned().fact() + ")"));
      }
    }
    doneRows.forEach((t, rows) -> {
      if (!expected.contains(t)) {
        add(Problem.LEDGER_ROW_UNEXPECTED, t + " x" + rows.size());
      }
    });
  }

  private static String emptyToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }
}
