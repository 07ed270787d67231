package dev.onceguard.it.scenario;

import static org.awaitility.Awaitility.await;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.scenario.OrderScenario.Kind;
import dev.onceguard.it.scenario.OrderScenario.Line;
import dev.onceguard.it.scenario.OrderScenario.Planned;
import dev.onceguard.it.scenario.OrderScenario.Transition;
import dev.onceguard.it.scenario.ScenarioDriver.Produced;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.awaitility.core.ConditionTimeoutException;

/**
 * Judges a finished scenario run from the outside, the way upstream and the business would see it:
 * what the business received (every OK-answered call), what is on the escalation topics and the
 * verdict topic, the route groups' committed offsets, and the guard's tables.
 *
 * <p>Asserts: every legitimate transition delivered exactly once (a further delivery only with
 * {@code redelivery = true} and the same dedup key), from a copy of its own fact, in machine order
 * per entity with the right from/to states; nothing else delivered; every injected duplicate
 * ignored (DUPLICATE_IGNORE verdict; late re-sends caught by the ledger, re-keyed replays by the
 * state machine); every illegal, never-healing or rejected record escalated with its reason, and
 * nothing else escalated; committed offsets at the end offsets; {@code og_entity} in each line's
 * final state with nothing pending, {@code og_ledger} one DONE row per transition. All problems
 * are reported at once, by category.
 */
final class ScenarioChecker {
  /** How long the run may take to settle (escalations, verdicts, commits) after the last wave. */
  static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(90);
  private static final int EXAMPLES = 8;

  /** What a run produced, for test-specific assertions and the report. */
  record Result(int produced, int delivered, int redeliveries, int notOkCalls, Map<String, Integer> escalated,
      Map<String, Integer> ignored, int repeatedEscalations, int repeatedVerdicts, double wallSeconds, double throughput) {}

  /** How much replaying the run's faults allow. */
  enum Strictness {
    /** No crash, rebalance or outage: every record decided exactly once, every fact accepted once. */
    EXACT,
    /** Rebalances or outages may replay records (repeated verdicts); every fact is still accepted exactly once. */
    REPLAYS,
    /**
     * A crash may also lose the ACCEPTED verdict of a record confirmed just before it (the replay
     * is then a duplicate): every fact accepted at most once.
     */
    CRASH
  }

  private final OrderScenario scenario;
  private final ScenarioEnv env;
  private final RecordingBusiness business;
  private final ScenarioDriver driver;
  private final Strictness strictness;

  ScenarioChecker(OrderScenario scenario, ScenarioEnv env, RecordingBusiness business, ScenarioDriver driver, Strictness strictness) {
    this.scenario = scenario;
    this.env = env;
    this.business = business;
    this.driver = driver;
    this.strictness = strictness;
  }

  /** Problems by category, with a few examples each. */
  private static final class Problems {
    final Map<String, List<String>> byCategory = new TreeMap<>();

    void add(String category, String example) {
      byCategory.computeIfAbsent(category, k -> new ArrayList<>()).add(example);
    }

    void throwIfAny(String run) {
      if (byCategory.isEmpty()) {
        return;
      }
      StringBuilder sb = new StringBuilder(run + ": the checker found problems:\n");
      byCategory.forEach((k, v) -> sb.append("  ").append(k).append(": ").append(v.size()).append(", e.g. ")
          .append(v.subList(0, Math.min(EXAMPLES, v.size()))).append('\n'));
      throw new AssertionError(sb.toString());
    }
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private static String originalCoordinates(ConsumerRecord<byte[], byte[]> r) {
    return header(r, Headers.ORIGINAL_TOPIC) + "-" + header(r, Headers.ORIGINAL_PARTITION) + "@" + header(r, Headers.ORIGINAL_OFFSET);
  }

  Result check() {
    Map<String, Produced> byCoord = new HashMap<>();
    for (Produced p : driver.produced()) {
      byCoord.put(p.coordinates(), p);
    }
    Map<String, Reason> expectedEscalations = new HashMap<>();
    driver.produced().stream().filter(p -> p.planned().escalation() != null)
        .forEach(p -> expectedEscalations.put(p.coordinates(), p.planned().escalation()));

    // ---- settle: commits at the end, every expected escalation written, every record decided
    Map<String, List<ConsumerRecord<byte[], byte[]>>> escalations = new LinkedHashMap<>();
    Map<String, List<Verdict>> verdicts = new HashMap<>();
    String[] waitingFor = {""};
    try {
      await().atMost(SETTLE_TIMEOUT).pollInterval(Duration.ofMillis(500)).until(() -> {
        for (String r : OrderScenario.ROUTES) {
          Map<Integer, String> behind = driver.uncommitted(r);
          if (!behind.isEmpty()) {
            waitingFor[0] = "route " + r + " group's commits (partition=committed/end): " + behind;
            return false;
          }
        }
        escalations.clear();
        for (String r : OrderScenario.ROUTES) {
          escalations.put(r, env.kafka.readAll(env.escalationTopics.get(r)));
        }
        Set<String> escalated = new HashSet<>();
        escalations.values().forEach(l -> l.forEach(e -> escalated.add(originalCoordinates(e))));
        long missingEsc = expectedEscalations.keySet().stream().filter(c -> !escalated.contains(c)).count();
        if (missingEsc > 0) {
          waitingFor[0] = missingEsc + " expected escalations";
          return false;
        }
        verdicts.clear();
        for (ConsumerRecord<byte[], byte[]> v : env.kafka.readAll(env.verdictTopic)) {
          verdicts.computeIfAbsent(originalCoordinates(v), k -> new ArrayList<>()).add(parse(v.value()));
        }
        long undecided = byCoord.keySet().stream().filter(c -> !verdicts.containsKey(c)).count();
        if (undecided > 0) {
          waitingFor[0] = undecided + " records without a verdict";
          return false;
        }
        return true;
      });
    } catch (ConditionTimeoutException e) {
      throw new AssertionError(env.name + ": the run did not settle within " + SETTLE_TIMEOUT + ": still waiting for " + waitingFor[0], e);
    }
    long endNanos = System.nanoTime();
    double wall = (endNanos - driver.startNanos()) / 1e9;

    Problems problems = new Problems();
    if (driver.produced().size() != scenario.records()) {
      problems.add("records produced", driver.produced().size() + " of " + scenario.records());
    }
    List<Call> calls = business.calls();
    int[] redeliveries = {0};
    int delivered = checkDeliveries(calls, byCoord, problems, redeliveries);
    int notOk = (int) calls.stream().filter(c -> !c.answeredOk()).count();
    int[] repeatedEscalations = {0};
    Map<String, Integer> escalatedByReason = checkEscalations(escalations, byCoord, expectedEscalations, problems, repeatedEscalations);
    int[] repeatedVerdicts = {0};
    Map<String, Integer> ignoredByReason = checkVerdicts(verdicts, problems, repeatedVerdicts);
    checkTables(problems);

    Result res = new Result(driver.produced().size(), delivered, redeliveries[0], notOk, escalatedByReason, ignoredByReason,
        repeatedEscalations[0], repeatedVerdicts[0], wall, driver.produced().size() / wall);
    System.out.printf("SCENARIO %s: lines=%d records=%d delivered=%d (transitions=%d, redeliveries=%d, not-OK calls=%d) "
            + "escalated=%s ignored=%s repeated-escalations=%d repeated-verdicts=%d L1-keys-wiped=%d wall=%.1fs throughput=%.0f records/s%n",
        env.name, scenario.lines().size(), res.produced(), delivered, scenario.expectedTransitions().size(), res.redeliveries(), notOk,
        escalatedByReason, ignoredByReason, res.repeatedEscalations(), res.repeatedVerdicts(), driver.l1KeysWiped(), wall, res.throughput());
    problems.throwIfAny(env.name);
    return res;
  }

  private static Verdict parse(byte[] v) {
    try {
      return Verdict.parseFrom(v);
    } catch (InvalidProtocolBufferException e) {
      throw new AssertionError("verdict topic holds a record that is not a Verdict", e);
    }
  }

  /** @return OK deliveries */
  private int checkDeliveries(List<Call> calls, Map<String, Produced> byCoord, Problems problems, int[] redeliveries) {
    Map<Transition, List<Delivery>> byTransition = new LinkedHashMap<>();
    Map<String, List<Delivery>> byLine = new HashMap<>();
    int ok = 0;
    for (Call c : calls) {
      if (!c.answeredOk()) {
        continue;
      }
      ok++;
      Delivery d = c.delivery();
      if (d.getRedelivery()) {
        redeliveries[0]++;
      }
      byTransition.computeIfAbsent(new Transition(d.getEntityId(), d.getEvent()), k -> new ArrayList<>()).add(d);
      byLine.computeIfAbsent(d.getEntityId(), k -> new ArrayList<>()).add(d);
    }
    Set<Transition> expected = scenario.expectedTransitions();
    for (Transition t : expected) {
      List<Delivery> ds = byTransition.get(t);
      if (ds == null) {
        problems.add("legitimate transition never delivered", t.toString());
        continue;
      }
      for (int i = 1; i < ds.size(); i++) {
        if (!ds.get(i).getRedelivery()) {
          problems.add("transition delivered again without redelivery=true", t + " x" + ds.size());
        }
        if (!ds.get(i).getDedupKey().equals(ds.get(0).getDedupKey())) {
          problems.add("redelivery with another dedup key", t.toString());
        }
      }
      for (Delivery d : ds) {
        Produced p = byCoord.get(RecordingBusiness.coordinatesOf(d.getRecord()));
        if (p == null || !t.equals(scenario.acceptedFacts().get(p.planned().fact()))) {
          problems.add("transition delivered from a record that is not a copy of its fact",
              t + " from " + (p == null ? "unknown record" : p.planned().kind() + " " + p.planned().fact()));
        }
      }
    }
    byTransition.forEach((t, ds) -> {
      if (!expected.contains(t)) {
        Produced p = byCoord.get(RecordingBusiness.coordinatesOf(ds.get(0).getRecord()));
        problems.add("delivered but must not be", t + " (" + (p == null ? "unknown record" : p.planned().kind()) + ")");
      }
    });
    for (Line l : scenario.lines()) {
      List<Delivery> ds = byLine.getOrDefault(l.id(), List.of());
      List<String> events = new ArrayList<>();
      List<Delivery> firsts = new ArrayList<>();
      for (Delivery d : ds) {
        if (d.getRedelivery() && events.contains(d.getEvent())) {
          continue; // a redelivery of a transition already seen
        }
        events.add(d.getEvent());
        firsts.add(d);
      }
      if (!events.equals(l.fate().applied)) {
        problems.add("entity's transitions not delivered in machine order", l.id() + " (" + l.fate() + "): " + events);
        continue;
      }
      for (int k = 0; k < firsts.size(); k++) {
        Delivery d = firsts.get(k);
        String from = k == 0 ? "" : OrderScenario.TO.get(l.fate().applied.get(k - 1));
        if (!d.getFromState().equals(from) || !d.getToState().equals(OrderScenario.TO.get(d.getEvent()))) {
          problems.add("wrong from/to states in a delivery", l.id() + ":" + d.getEvent() + " " + d.getFromState() + "->" + d.getToState());
        }
      }
    }
    return ok;
  }

  private Map<String, Integer> checkEscalations(Map<String, List<ConsumerRecord<byte[], byte[]>>> escalations, Map<String, Produced> byCoord,
      Map<String, Reason> expected, Problems problems, int[] repeated) {
    Map<String, Integer> byReason = new TreeMap<>();
    Map<String, Integer> seen = new HashMap<>();
    escalations.forEach((route, records) -> {
      for (ConsumerRecord<byte[], byte[]> e : records) {
        String coords = originalCoordinates(e);
        String reason = header(e, Headers.REASON);
        byReason.merge(String.valueOf(reason), 1, Integer::sum);
        if (seen.merge(coords, 1, Integer::sum) > 1) {
          repeated[0]++;
        }
        Produced p = byCoord.get(coords);
        if (p == null) {
          problems.add("escalated a record the test never produced", coords + " " + reason);
          continue;
        }
        Planned pl = p.planned();
        String what = pl.kind() + " " + pl.line().id() + ":" + pl.event() + " on " + pl.route() + " escalated " + reason + " ("
            + header(e, Headers.DETAIL) + ")";
        if (pl.escalation() == null) {
          problems.add("escalated but must not be", what);
          continue;
        }
        if (!pl.escalation().name().equals(reason)) {
          problems.add("escalated with the wrong reason (expected " + pl.escalation() + ")", what);
        }
        if (!Disposition.ILLEGAL_TRANSITION_ESCALATE.name().equals(header(e, Headers.DISPOSITION))
            || !pl.route().equals(header(e, Headers.ROUTE)) || !pl.route().equals(route)
            || !pl.line().id().equals(header(e, Headers.ENTITY_ID)) || !pl.event().equals(header(e, Headers.EVENT))) {
          problems.add("escalation headers do not describe the record", what + " headers route=" + header(e, Headers.ROUTE)
              + " entity=" + header(e, Headers.ENTITY_ID) + " event=" + header(e, Headers.EVENT));
        }
        if (!Arrays.equals(e.value(), pl.value()) || !Arrays.equals(e.key(), pl.key())) {
          problems.add("escalated record does not carry the original key and value", what);
        }
      }
    });
    expected.forEach((coords, reason) -> {
      if (!seen.containsKey(coords)) {
        Planned pl = byCoord.get(coords).planned();
        problems.add("not escalated", pl.kind() + " " + pl.line().id() + ":" + pl.event() + " (expected " + reason + ")");
      }
    });
    return byReason;
  }

  private Map<String, Integer> checkVerdicts(Map<String, List<Verdict>> verdicts, Problems problems, int[] repeated) {
    Map<String, Integer> ignored = new TreeMap<>();
    Map<String, List<Produced>> copiesByFact = new HashMap<>();
    for (Produced p : driver.produced()) {
      Planned pl = p.planned();
      List<Verdict> vs = verdicts.get(p.coordinates());
      String what = pl.kind() + " " + pl.fact() + " @" + p.coordinates();
      if (vs.size() > 1) {
        repeated[0] += vs.size() - 1;
        if (strictness == Strictness.EXACT) {
          problems.add("record decided more than once", what + " " + vs.stream().map(v -> v.getReason().name()).toList());
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
            problems.add("verdict of a record to escalate is not " + pl.escalation(), what + " " + v.getDisposition() + "/" + v.getReason());
          }
        }
      } else if (pl.kind() == Kind.REKEYED) {
        for (Verdict v : vs) {
          if (v.getDisposition() != Disposition.DUPLICATE_IGNORE || v.getReason() != Reason.ALREADY_APPLIED) {
            problems.add("re-keyed replay not ignored by the state machine", what + " " + v.getDisposition() + "/" + v.getReason());
          }
        }
      } else {
        copiesByFact.computeIfAbsent(pl.fact(), k -> new ArrayList<>()).add(p);
        for (Verdict v : vs) {
          if (v.getDisposition() == Disposition.ILLEGAL_TRANSITION_ESCALATE) {
            problems.add("copy of a legitimate fact escalated", what + " " + v.getReason() + ": " + v.getDetail());
          }
          if (pl.kind() == Kind.LATE_RESEND && v.getReason() != Reason.LEDGER_HIT) {
            problems.add("late re-send (L1 keys gone) not caught by the ledger", what + " " + v.getDisposition() + "/" + v.getReason());
          }
        }
      }
    }
    copiesByFact.forEach((fact, copies) -> {
      long accepted = copies.stream().filter(p -> verdicts.get(p.coordinates()).stream()
          .anyMatch(v -> v.getDisposition() == Disposition.ACCEPTED)).count();
      long ignoredCopies = copies.stream().filter(p -> verdicts.get(p.coordinates()).stream()
          .anyMatch(v -> v.getDisposition() == Disposition.DUPLICATE_IGNORE)).count();
      if (accepted > 1 || (accepted == 0 && strictness != Strictness.CRASH)) {
        problems.add("fact not accepted exactly once (ACCEPTED verdicts on its copies)", fact + " (" + copies.size() + " copies, "
            + accepted + " accepted)");
      }
      if (ignoredCopies < copies.size() - 1) {
        problems.add("injected duplicate not ignored", fact + " (" + copies.size() + " copies, " + ignoredCopies + " ignored)");
      }
    });
    return ignored;
  }

  private void checkTables(Problems problems) {
    Map<String, List<Object>> entities = new HashMap<>();
    for (List<Object> row : env.mysql.rows("SELECT entity_id, state, version, pending_key FROM " + env.database
        + ".og_entity WHERE machine = ?", OrderScenario.MACHINE)) {
      entities.put((String) row.get(0), row);
    }
    if (entities.size() != scenario.lines().size()) {
      problems.add("og_entity row count", entities.size() + " rows for " + scenario.lines().size() + " lines");
    }
    for (Line l : scenario.lines()) {
      List<Object> row = entities.get(l.id());
      if (row == null) {
        problems.add("entity missing in og_entity", l.id());
        continue;
      }
      if (!l.finalState().equals(row.get(1)) || ((Number) row.get(2)).intValue() != l.finalVersion() || row.get(3) != null) {
        problems.add("entity not in its final state", l.id() + " (" + l.fate() + "): state=" + row.get(1) + " version=" + row.get(2)
            + " pending=" + row.get(3) + ", expected " + l.finalState() + " v" + l.finalVersion());
      }
    }
    Map<String, Long> ledger = new HashMap<>();
    for (List<Object> row : env.mysql.rows("SELECT status, COUNT(*) FROM " + env.database + ".og_ledger GROUP BY status")) {
      ledger.put((String) row.get(0), ((Number) row.get(1)).longValue());
    }
    long transitions = scenario.expectedTransitions().size();
    if (ledger.getOrDefault("DONE", 0L) != transitions || ledger.getOrDefault("PENDING", 0L) != 0) {
      problems.add("og_ledger is not one DONE row per delivered transition", ledger + " for " + transitions + " transitions");
    }
  }

}
