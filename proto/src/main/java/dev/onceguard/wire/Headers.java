package dev.onceguard.wire;

/**
 * Names of the Kafka headers OnceGuard adds: to escalated records and verdict records (written by
 * the sidecar), and to the {@code ConsumerRecord}s client-java builds from deliveries. Defined
 * once here so that writer and reader cannot drift.
 */
public final class Headers {
  private Headers() {}

  /** Common prefix of every OnceGuard header. */
  public static final String PREFIX = "onceguard-";

  /** {@code ACCEPTED}, {@code DUPLICATE_IGNORE} or {@code ILLEGAL_TRANSITION_ESCALATE}. */
  public static final String DISPOSITION = PREFIX + "disposition";
  /**
   * {@code true} on the verdict of a record that applied its key and was consumed again (the
   * verdict is ACCEPTED again; the business was not called again); absent otherwise.
   */
  public static final String REPLAYED = PREFIX + "replayed";
  /** Reason enum name, e.g. {@code KEY_COLLISION}. */
  public static final String REASON = PREFIX + "reason";
  /** Layer enum name, e.g. {@code STATE_MACHINE}. */
  public static final String LAYER = PREFIX + "layer";
  /** Human-readable detail. */
  public static final String DETAIL = PREFIX + "detail";
  /** Entity state when the verdict was taken (absent if unknown). */
  public static final String CURRENT_STATE = PREFIX + "current-state";
  /** Entity version when the verdict was taken, decimal. */
  public static final String CURRENT_VERSION = PREFIX + "current-version";
  /** States the event may be applied from, comma-separated. */
  public static final String EXPECTED_FROM = PREFIX + "expected-from";
  /** Route name. */
  public static final String ROUTE = PREFIX + "route";
  /** Entity id, if extracted. */
  public static final String ENTITY_ID = PREFIX + "entity-id";
  /** Event name, if extracted. */
  public static final String EVENT = PREFIX + "event";
  /** Dedup key (hex SHA-256), if extracted. */
  public static final String DEDUP_KEY = PREFIX + "dedup-key";
  /** Topic the record was consumed from. */
  public static final String ORIGINAL_TOPIC = PREFIX + "original-topic";
  /** Partition it was consumed from, decimal. */
  public static final String ORIGINAL_PARTITION = PREFIX + "original-partition";
  /** Offset it was consumed at, decimal. */
  public static final String ORIGINAL_OFFSET = PREFIX + "original-offset";
  /** CONFLICTING_FACT: business key of the record that applied the transition. */
  public static final String APPLIED_BUSINESS_KEY = PREFIX + "applied-business-key";
  /** CONFLICTING_FACT: dedup key of the record that applied the transition. */
  public static final String APPLIED_DEDUP_KEY = PREFIX + "applied-dedup-key";
  /** CONFLICTING_FACT: topic of the record that applied the transition. */
  public static final String APPLIED_TOPIC = PREFIX + "applied-topic";
  /** CONFLICTING_FACT: partition of the record that applied the transition, decimal. */
  public static final String APPLIED_PARTITION = PREFIX + "applied-partition";
  /** CONFLICTING_FACT: offset of the record that applied the transition, decimal. */
  public static final String APPLIED_OFFSET = PREFIX + "applied-offset";
  /**
   * On a record produced again by {@code onceguard redrive}: how many times it was redriven,
   * decimal. The sidecar copies a source record's headers to its escalation, so the count survives
   * the next escalation, and {@code redrive --max-redrives} refuses a record that keeps coming back.
   */
  public static final String REDRIVE_COUNT = PREFIX + "redrive-count";
  /** Time of the verdict, milliseconds since the epoch, decimal. */
  public static final String TIMESTAMP = PREFIX + "timestamp";
  /**
   * Present only on a copy the topic could not take whole (a source record near the size limit):
   * what was left out, comma-separated, in the order it is given up: {@value #OMITTED_VALUE} (the
   * record's value; the copy's value is then {@code null}), {@value #OMITTED_HEADERS} (the
   * record's own headers), {@value #OMITTED_KEY} (the record's key), {@value #OMITTED_DETAIL} (the
   * {@link #DETAIL} past its first 1,000 characters; on verdict records, the verdict's detail).
   * The original stays at {@link #ORIGINAL_TOPIC}, {@link #ORIGINAL_PARTITION},
   * {@link #ORIGINAL_OFFSET} for as long as that topic retains it.
   */
  public static final String OMITTED = PREFIX + "omitted";
  /** In {@link #OMITTED}: the value was left out. */
  public static final String OMITTED_VALUE = "value";
  /** In {@link #OMITTED}: the source record's own headers were left out. */
  public static final String OMITTED_HEADERS = "headers";
  /** In {@link #OMITTED}: the key was left out. */
  public static final String OMITTED_KEY = "key";
  /** In {@link #OMITTED}: the detail was cut to its first 1,000 characters. */
  public static final String OMITTED_DETAIL = "detail";
  /** With {@link #OMITTED} {@code value}: the size of the left-out value in bytes, decimal. */
  public static final String ORIGINAL_VALUE_SIZE = PREFIX + "original-value-size";

  /** On delivered records (client-java): {@code "true"} if the business may have seen it before. */
  public static final String REDELIVERY = PREFIX + "redelivery";
  /** On delivered records (client-java): attempt number for this claim, decimal, from 1. */
  public static final String ATTEMPT = PREFIX + "attempt";
  /** On delivered records (client-java): state before this transition; absent when creating. */
  public static final String FROM_STATE = PREFIX + "from-state";
  /** On delivered records (client-java): state once this delivery is confirmed. */
  public static final String TO_STATE = PREFIX + "to-state";
}
