package dev.onceguard.it.scenario;

import static org.awaitility.Awaitility.await;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.ScenarioDriver.Produced;
import dev.onceguard.it.scenario.ScenarioHistory.EntityRow;
import dev.onceguard.it.scenario.ScenarioHistory.Escalated;
import dev.onceguard.it.scenario.ScenarioHistory.LedgerRow;
import dev.onceguard.it.scenario.ScenarioJudge.Findings;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.awaitility.core.ConditionTimeoutException;

/**
 * Judges a finished scenario run from the outside, the way upstream and the business would see it.
 * Waits until the run settled (every route group's commits at the end offsets, every expected
 * escalation written, every record decided), reads what the business received, the escalation
 * and verdict topics and the guard's tables into a {@link ScenarioHistory}, and has
 * {@link ScenarioJudge} judge it (what is asserted is listed there). All problems are reported at
 * once, by kind.
 */
final class ScenarioChecker {
  /** How long the run may take to settle (escalations, verdicts, commits) after the last wave. */
  static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(90);

  /** What a run produced, for test-specific assertions and the report. */
  record Result(int produced, int delivered, int redeliveries, int notOkCalls, Map<String, Integer> escalated,
      Map<String, Integer> ignored, int repeatedEscalations, int repeatedVerdicts, double wallSeconds, double throughput) {}

  /** How much replaying the run's faults allow. */
  enum Strictness {
    /** No crash, rebalance or outage: every record decided once, every transition delivered exactly once. */
    EXACT,
    /**
     * Rebalances or outages may replay records (repeated verdicts) and take claims over
     * (redeliveries, bounded by the ledger's takeovers); every fact is still accepted exactly once.
     */
    REPLAYS,
    /**
     * Processes are killed as well: records are consumed again by other instances; a record that
     * was confirmed before its verdict was written is answered ACCEPTED again (flagged replayed),
     * so every fact is still accepted exactly once, and its copy's last verdict is ACCEPTED.
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

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private static String originalCoordinates(ConsumerRecord<byte[], byte[]> r) {
    return header(r, Headers.ORIGINAL_TOPIC) + "-" + header(r, Headers.ORIGINAL_PARTITION) + "@" + header(r, Headers.ORIGINAL_OFFSET);
  }

  private static Escalated escalated(String route, ConsumerRecord<byte[], byte[]> r) {
    Map<String, String> headers = new HashMap<>();
    for (Header h : r.headers()) {
      headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
    }
    return new Escalated(route, headers, r.key(), r.value());
  }

  /**
   * A run's history and the judge's findings, asserting nothing; {@code unsettled} says what the
   * run was still waiting for when it did not settle, else null.
   */
  record Judged(ScenarioHistory history, Findings findings, double wallSeconds, String unsettled) {}

  Result check() {
    Judged j = settle(true);
    ScenarioHistory history = j.history();
    Findings f = j.findings();
    double wall = j.wallSeconds();
    Result res = new Result(history.produced().size(), f.delivered(), f.redeliveries(), f.notOkCalls(), f.escalated(), f.ignored(),
        f.repeatedEscalations(), f.repeatedVerdicts(), wall, history.produced().size() / wall);
    long takeovers = history.ledger().stream().filter(r -> r.attempts() > 1).count();
    System.out.printf("SCENARIO %s: lines=%d records=%d delivered=%d (transitions=%d, redeliveries=%d, not-OK calls=%d, "
            + "ledger rows taken over=%d) escalated=%s ignored=%s repeated-escalations=%d repeated-verdicts=%d L1-keys-wiped=%d "
            + "wall=%.1fs throughput=%.0f records/s%n",
        env.name, scenario.lines().size(), res.produced(), res.delivered(), scenario.expectedTransitions().size(), res.redeliveries(),
        res.notOkCalls(), takeovers, res.escalated(), res.ignored(), res.repeatedEscalations(), res.repeatedVerdicts(),
        driver.l1KeysWiped(), wall, res.throughput());
    String report = f.report(env.name);
    if (j.unsettled() != null) {
      throw new AssertionError(j.unsettled() + "\n" + (report == null ? "" : report));
    }
    if (report != null) {
      throw new AssertionError(report);
    }
    return res;
  }

  /**
   * Judges the run without asserting: for experiments whose configuration is expected to do
   * damage. Settles on commits and verdicts only, not on the planned escalations (a reduced
   * configuration may never write them).
   */
  Judged observe() {
    return settle(false);
  }

  private Judged settle(boolean awaitEscalations) {
    Set<String> producedCoords = new HashSet<>();
    Set<String> expectedEscalations = new HashSet<>();
    for (Produced p : driver.produced()) {
      producedCoords.add(p.coordinates());
      if (p.planned().escalation() != null) {
        expectedEscalations.add(p.coordinates());
      }
    }

    // ---- settle: commits at the end, every expected escalation written, every record decided
    List<Escalated> escalations = new ArrayList<>();
    Map<String, List<Verdict>> verdicts = new LinkedHashMap<>();
    String[] waitingFor = {""};
    String unsettled = null;
    try {
      await().atMost(SETTLE_TIMEOUT).pollInterval(Duration.ofMillis(500)).until(() -> {
        for (String r : OrderScenario.ROUTES) {
          Map<Integer, String> behind = driver.uncommitted(r);
          if (!behind.isEmpty()) {
            waitingFor[0] = "route " + r + " group's commits (partition=committed/end): " + behind;
            return false;
          }
        }
        readTopics(escalations, verdicts);
        Set<String> escalated = new HashSet<>();
        escalations.forEach(e -> escalated.add(e.originalCoordinates()));
        long missingEsc = expectedEscalations.stream().filter(c -> !escalated.contains(c)).count();
        if (awaitEscalations && missingEsc > 0) {
          waitingFor[0] = missingEsc + " expected escalations";
          return false;
        }
        long undecided = producedCoords.stream().filter(c -> !verdicts.containsKey(c)).count();
        if (undecided > 0) {
          waitingFor[0] = undecided + " records without a verdict";
          return false;
        }
        return true;
      });
    } catch (ConditionTimeoutException e) {
      // judge what there is anyway: the report then says which records went where instead
      unsettled = env.name + ": the run did not settle within " + SETTLE_TIMEOUT + ": still waiting for " + waitingFor[0];
      readTopics(escalations, verdicts);
    }
    double wall = (System.nanoTime() - driver.startNanos()) / 1e9;

    ScenarioHistory history = new ScenarioHistory(List.copyOf(driver.produced()), business.calls(), escalations, verdicts, ledgerRows(),
        entityRows());
    return new Judged(history, new ScenarioJudge(scenario, strictness).judge(history), wall, unsettled);
  }

  /** Replaces the lists' contents with the escalation topics' and the verdict topic's records. */
  private void readTopics(List<Escalated> escalations, Map<String, List<Verdict>> verdicts) {
    escalations.clear();
    for (String r : OrderScenario.ROUTES) {
      for (ConsumerRecord<byte[], byte[]> e : env.kafka.readAll(env.escalationTopics.get(r))) {
        escalations.add(escalated(r, e));
      }
    }
    verdicts.clear();
    for (ConsumerRecord<byte[], byte[]> v : env.kafka.readAll(env.verdictTopic)) {
      verdicts.computeIfAbsent(originalCoordinates(v), k -> new ArrayList<>()).add(parse(v.value()));
    }
  }

  private static Verdict parse(byte[] v) {
    try {
      return Verdict.parseFrom(v);
    } catch (InvalidProtocolBufferException e) {
      throw new AssertionError("verdict topic holds a record that is not a Verdict", e);
    }
  }

  private List<LedgerRow> ledgerRows() {
    List<LedgerRow> out = new ArrayList<>();
    for (List<Object> r : env.mysql.rows("SELECT route, dedup_key, business_key, entity_id, event, from_state, to_state, status, attempts,"
        + " source_topic, source_partition, source_offset FROM " + env.database + ".og_ledger")) {
      out.add(new LedgerRow((String) r.get(0), (String) r.get(1), (String) r.get(2), (String) r.get(3), (String) r.get(4), (String) r.get(5),
          (String) r.get(6), (String) r.get(7), ((Number) r.get(8)).intValue(), (String) r.get(9), ((Number) r.get(10)).intValue(),
          ((Number) r.get(11)).longValue()));
    }
    return out;
  }

  private List<EntityRow> entityRows() {
    List<EntityRow> out = new ArrayList<>();
    for (List<Object> r : env.mysql.rows("SELECT entity_id, state, version, pending_key FROM " + env.database
        + ".og_entity WHERE machine = ?", OrderScenario.MACHINE)) {
      out.add(new EntityRow((String) r.get(0), (String) r.get(1), ((Number) r.get(2)).longValue(), (String) r.get(3)));
    }
    return out;
  }
}
