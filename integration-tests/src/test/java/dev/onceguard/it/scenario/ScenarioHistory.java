package dev.onceguard.it.scenario;

import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.scenario.ScenarioDriver.Produced;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.util.List;
import java.util.Map;

/**
 * What a finished scenario run left behind, as upstream and the business see it: the records
 * produced, every business call, the escalation topics, the verdict topic and the guard's two
 * tables. Plain data: {@link ScenarioChecker} reads it from a real run, {@code ScenarioJudgeTest}
 * writes doctored ones, {@link ScenarioJudge} judges either.
 *
 * @param calls every business call, OK or not, in the order the business answered them
 * @param verdicts by the judged record's {@code topic-partition@offset}, in topic order
 */
record ScenarioHistory(List<Produced> produced, List<Call> calls, List<Escalated> escalations, Map<String, List<Verdict>> verdicts,
    List<LedgerRow> ledger, List<EntityRow> entities) {

  /** One record of a route's escalation topic, headers by name (last value wins). */
  record Escalated(String route, Map<String, String> headers, byte[] key, byte[] value) {
    String header(String name) {
      return headers.get(name);
    }

    /** {@code topic-partition@offset} of the record it escalates, from the original-* headers. */
    String originalCoordinates() {
      return header(Headers.ORIGINAL_TOPIC) + "-" + header(Headers.ORIGINAL_PARTITION) + "@" + header(Headers.ORIGINAL_OFFSET);
    }
  }

  /** One {@code og_ledger} row (the columns the checker judges). */
  record LedgerRow(String route, String dedupKey, String businessKey, String entityId, String event, String fromState,
      String toState, String status, int attempts, String sourceTopic, int sourcePartition, long sourceOffset) {
    String sourceCoordinates() {
      return sourceTopic + "-" + sourcePartition + "@" + sourceOffset;
    }
  }

  /** One {@code og_entity} row of the scenario's machine. */
  record EntityRow(String entityId, String state, long version, String pendingKey) {}
}
