package dev.onceguard.proxy.config;

import java.time.Duration;
import java.util.List;

/**
 * One route: a consumer group over some topics, the extraction rules, the business it delivers to
 * and the guard's timings, each group of settings a record of its own. Immutable; built and
 * validated by {@link ConfigReader} from the settings {@link RouteSettings} declares.
 *
 * @param machine name of the state machine, or {@code null} for an append-only route (L1 + L2 only)
 */
public record RouteConfig(
    String name, String machine, Intake intake, Extraction extraction, Delivery delivery, Timings timings, Outputs outputs) {

  public enum Mode {
    PUSH,
    PULL
  }

  public boolean hasMachine() {
    return machine != null;
  }

  /**
   * What the route consumes and how much of it may be in process.
   *
   * @param maxUncommittedPerPartition a partition pauses while this many of its records are taken
   *     and not committable (at or after its oldest unfinished one), so that a stuck record bounds
   *     what a crash replays
   * @param reorderWindow records of one entity (per partition) that may be in process at once while
   *     the earlier ones wait as early arrivals, so that a swapped pair heals; 1 keeps strict
   *     per-entity offset order
   */
  public record Intake(List<String> topics, String group, int maxInFlightPerPartition, int maxInFlight,
      int maxUncommittedPerPartition, int reorderWindow) {}

  /**
   * Where a record's identity is found.
   *
   * @param entityId fields of the entity id, in order (one, or several for a composite entity such
   *     as a fulfilment line); empty without a machine. The id is their canonical encoding
   *     ({@code Extractor.canonicalEntityId})
   * @param event where the event name is; {@code null} without a machine
   * @param businessKey fields of the business key, in order; the dedup key is their digest
   * @param fingerprint fields of the content fingerprint; empty means the whole value (JSON
   *     canonicalised, {@code fingerprintExclude} removed, or the raw bytes if not JSON)
   * @param fingerprintExclude JSON pointers removed from the value before fingerprinting
   */
  public record Extraction(List<FieldSource> entityId, FieldSource event, List<FieldSource> businessKey,
      List<FieldSource> fingerprint, List<String> fingerprintExclude) {}

  /**
   * How a record reaches the business.
   *
   * @param mode PUSH (the sidecar calls the business's MessageHandler) or PULL (Deliveries stream)
   * @param target {@code host:port} of the business's MessageHandler (push mode), or
   *     {@code unix:///absolute/path} for a Unix domain socket; {@code null} in pull mode
   * @param handlerTimeout deadline of one call (pull: time to ack)
   * @param tls TLS on the channel to {@code target}, or {@code null} for plaintext
   */
  public record Delivery(Mode mode, String target, Duration handlerTimeout, RetryConfig retry, TlsConfig tls) {}

  /**
   * The guard's timings.
   *
   * @param redisTtl how long an L1 key lives (only the hit rate depends on it)
   * @param lease a claim is taken over after this
   * @param earlyArrivalTimeout how long an event waits for its from-state before {@code OUT_OF_ORDER}
   * @param earlyArrivalRetry how often a waiting event is tried again
   */
  public record Timings(Duration redisTtl, Duration lease, Duration earlyArrivalTimeout, Duration earlyArrivalRetry) {}

  /**
   * Where the route writes.
   *
   * @param escalationTopic where ILLEGAL_TRANSITION_ESCALATE records go
   * @param verdictTopic optional topic receiving every verdict; {@code null} for none
   */
  public record Outputs(String escalationTopic, String verdictTopic) {}

  /**
   * Backoff for business RETRY and transport errors, and for store outages.
   *
   * @param maxAttempts business attempts (RETRY answers, deadlines, errors) before the record counts
   *     as rejected; a business that cannot be reached (no connection) and store outages are retried
   *     without bound (the partition stays paused, nothing is skipped)
   */
  public record RetryConfig(Duration initialBackoff, Duration maxBackoff, int maxAttempts) {}
}
