package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.RouteConfig.Delivery;
import dev.onceguard.proxy.config.RouteConfig.Extraction;
import dev.onceguard.proxy.config.RouteConfig.Intake;
import dev.onceguard.proxy.config.RouteConfig.Mode;
import dev.onceguard.proxy.config.RouteConfig.Outputs;
import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import dev.onceguard.proxy.config.RouteConfig.Timings;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The items of the {@code routes} list, declared and read into {@link RouteConfig}s. */
public final class RouteSettings {
  private RouteSettings() {}

  static final Section ROUTE = Section.of("routes[]",
      "The routes, at least one: each a consumer group over some topics, the fields that identify a record, the business it "
          + "goes to and the guard's timings.");
  public static final Setting<String> NAME = ROUTE.add(Setting.required("name", SettingType.text("name"), "",
      "the route's name, matching `" + MachineSettings.NAME.pattern() + "`; unique"));
  public static final Setting<List<String>> TOPICS = ROUTE.add(Setting.required("topics", SettingType.STRINGS, "",
      "the source topics"));
  public static final Setting<String> GROUP = ROUTE.add(Setting.of("group", SettingType.text("consumer group"), null,
      "the route's consumer group").shownAs("`onceguard-<name>`"));
  public static final Setting<String> MACHINE = ROUTE.add(Setting.of("machine", SettingType.text("machine name"), null,
      "the state machine the route's events move; without one the route uses L1 + L2 only (append-only events)"));
  public static final Setting<List<FieldSource>> ENTITY_ID = ROUTE.add(Setting.required("entity-id", SettingType.FIELD_SOURCES,
      "with a machine", "the entity the event moves: one field source, or a list of them for a composite entity "
          + "(every route of a machine the same number)"));
  public static final Setting<FieldSource> EVENT = ROUTE.add(Setting.required("event", SettingType.FIELD_SOURCE, "with a machine",
      "where the event name is"));
  public static final Setting<List<FieldSource>> BUSINESS_KEY = ROUTE.add(Setting.required("business-key", SettingType.FIELD_SOURCES,
      "", "the fields that identify one fact; the dedup key is their SHA-256 (machine routes prefix the event name)"));
  public static final Setting<List<FieldSource>> FINGERPRINT = ROUTE.add(Setting.of("fingerprint", SettingType.FIELD_SOURCES, List.of(),
      "the content fields compared when a key comes again").shownAs("the whole value"));
  public static final Setting<List<String>> FINGERPRINT_EXCLUDE = ROUTE.add(Setting.of("fingerprint-exclude", SettingType.STRINGS,
      List.of(), "JSON pointers of volatile fields (`/message_id`, `/sent_at`) left out of the fingerprint; not with `fingerprint`")
      .shownAs("none"));
  public static final Setting<Mode> MODE = ROUTE.add(Setting.of("mode",
      SettingType.oneOf(Arrays.asList(Mode.values()), m -> m.name().toLowerCase(Locale.ROOT)), Mode.PUSH,
      "`push`: call `target`'s `MessageHandler`; `pull`: serve `Deliveries.Subscribe`"));
  public static final Setting<String> TARGET = ROUTE.add(Setting.required("target", SettingType.address(1, "127.0.0.1:7000"),
      "in push mode", "the business container's `MessageHandler`, or a Unix domain socket shared in the pod"));
  public static final Setting<Duration> HANDLER_TIMEOUT = ROUTE.add(Setting.of("handler-timeout", SettingType.DURATION,
      Duration.ofSeconds(10), "deadline of one `Handle` call (pull: time to ack)"));
  /** 30 days: the TTL only changes the L1 hit rate, never correctness (incident 1). */
  public static final Setting<Duration> REDIS_TTL = ROUTE.add(Setting.of("redis-ttl", SettingType.DURATION, Duration.ofDays(30),
      "how long an L1 key lives; only the hit rate depends on it ([choosing it](operations.md#choosing-the-redis-ttl-why-30-days))"));
  public static final Setting<Duration> LEASE = ROUTE.add(Setting.of("lease", SettingType.durationAtLeast(Duration.ofSeconds(1)),
      Duration.ofSeconds(30), "a claim is taken over after this (or 5 s after its process stopped heartbeating, whichever is "
          + "first); renewed while forwarding"));
  public static final Setting<Duration> EARLY_ARRIVAL_TIMEOUT = ROUTE.add(Setting.of("early-arrival-timeout", SettingType.DURATION,
      Duration.ofSeconds(60), "how long an event waits for its from-state before `OUT_OF_ORDER` (time while the store cannot "
          + "answer does not count)"));
  public static final Setting<Duration> EARLY_ARRIVAL_RETRY = ROUTE.add(Setting.of("early-arrival-retry", SettingType.DURATION,
      Duration.ofMillis(200), "how often a waiting event is tried again"));
  public static final Setting<String> ESCALATION_TOPIC = ROUTE.add(Setting.of("escalation-topic", SettingType.TOPIC, null,
      "where `ILLEGAL_TRANSITION_ESCALATE` records go; not a source topic").shownAs("`<first topic>.escalate`"));
  public static final Setting<String> VERDICT_TOPIC = ROUTE.add(Setting.of("verdict-topic", SettingType.TOPIC, null,
      "receives every verdict (protobuf `Verdict`), for reconciliation"));
  public static final Setting<Integer> MAX_IN_FLIGHT_PER_PARTITION = ROUTE.add(Setting.of("max-in-flight-per-partition",
      SettingType.whole(1, 100_000), 64, "records of one partition in process at once; the partition pauses at the bound"));
  public static final Setting<Integer> MAX_IN_FLIGHT = ROUTE.add(Setting.of("max-in-flight", SettingType.whole(1, 1_000_000), 512,
      "records of the route in process at once; its partitions pause at the bound"));
  /** The default is this factor times {@code max-in-flight-per-partition}. */
  public static final int MAX_UNCOMMITTED_FACTOR = 10;
  public static final Setting<Integer> MAX_UNCOMMITTED_PER_PARTITION = ROUTE.add(Setting.of("max-uncommitted-per-partition",
      SettingType.whole(1, 10_000_000), null, "a partition also pauses while this many of its records are taken at or after its "
          + "oldest unfinished one (what a crash would replay); at least `max-in-flight-per-partition`")
      .shownAs(MAX_UNCOMMITTED_FACTOR + " × `max-in-flight-per-partition`"));
  public static final Setting<Integer> REORDER_WINDOW = ROUTE.add(Setting.of("reorder-window", SettingType.whole(1, 64), 4,
      "records of one entity in one partition that may be in process while the earlier ones wait as early arrivals, so that "
          + "a swapped pair heals; `1` keeps strict offset order; at most `max-in-flight-per-partition`")
      .shownAs("`4`, at most `max-in-flight-per-partition`"));

  static final Section RETRY = Section.of("routes[].retry",
      "Backoff (full jitter) for business `RETRY` answers and deadlines. A business that cannot be reached at all (connection "
          + "refused, TLS handshake refused) and store outages are retried without bound: the partitions pause.");
  public static final Setting<Duration> INITIAL_BACKOFF = RETRY.add(Setting.of("initial-backoff", SettingType.DURATION,
      Duration.ofMillis(100), "the first wait"));
  public static final Setting<Duration> MAX_BACKOFF = RETRY.add(Setting.of("max-backoff", SettingType.DURATION,
      Duration.ofSeconds(10), "the longest wait; the business's `retry_after_ms` is honoured up to it, never longer"));
  public static final Setting<Integer> MAX_ATTEMPTS = RETRY.add(Setting.of("max-attempts", SettingType.whole(1, 1_000_000), 20,
      "`RETRY` answers or deadlines after which the record is rejected (`BUSINESS_REJECTED`)"));

  /**
   * @param machines the sound machines by name
   * @param declaredMachines every machine named in the file, also those whose own problems kept
   *     them out of {@code machines} (a route naming one is not blamed for it)
   * @return {@code null} when a problem leaves no route to build (every problem is recorded)
   */
  static RouteConfig read(NodeReader n, Map<String, MachineConfig> machines, List<String> declaredMachines) {
    String name = n.get(NAME);
    if (name != null && !MachineSettings.NAME.matcher(name).matches()) {
      n.fail(NAME, "route name '" + name + "' must match " + MachineSettings.NAME.pattern());
    }
    List<String> topics = n.stringList(TOPICS);
    for (int i = 0; i < topics.size(); i++) {
      if (!isTopic(topics.get(i))) {
        n.failAt(n.path("topics[" + i + "]"), "'" + topics.get(i) + "' is not a valid Kafka topic name");
      }
    }
    String group = n.get(GROUP, "onceguard-" + name);
    String machine = n.get(MACHINE);
    Extraction extraction = readExtraction(n, machine, machines, declaredMachines);
    // an unreadable mode (reported) leaves no rule for the target to check against
    Mode mode = n.has(MODE) ? n.get(MODE, null) : MODE.defaultValue();
    String target = n.get(TARGET);
    if (mode == Mode.PUSH && target == null && !n.has(TARGET)) {
      n.missing(TARGET, "required in push mode: host:port of the business container's MessageHandler");
    }
    Duration handlerTimeout = n.get(HANDLER_TIMEOUT);
    Timings timings = new Timings(n.get(REDIS_TTL), n.get(LEASE), n.get(EARLY_ARRIVAL_TIMEOUT), n.get(EARLY_ARRIVAL_RETRY));
    Outputs outputs = readOutputs(n, topics);
    Intake intake = readIntake(n, topics, group);
    RetryConfig retry = readRetry(n);
    TlsConfig tls = TlsSettings.readTarget(n, mode, target);
    n.done();
    if (name == null || topics.isEmpty() || mode == null || outputs.escalationTopic() == null) {
      return null;
    }
    return new RouteConfig(name, machine, intake, extraction, new Delivery(mode, target, handlerTimeout, retry, tls), timings, outputs);
  }

  private static boolean isTopic(String s) {
    try {
      SettingType.TOPIC.parse(s);
      return true;
    } catch (SettingType.Invalid e) {
      return false;
    }
  }

  private static Extraction readExtraction(NodeReader n, String machine, Map<String, MachineConfig> machines,
      List<String> declaredMachines) {
    MachineConfig mc = null;
    if (machine != null) {
      mc = machines.get(machine);
      if (mc == null && !declaredMachines.contains(machine)) {
        n.fail(MACHINE, "unknown machine '" + machine + "' (configured: " + declaredMachines + ")");
      }
    }
    List<FieldSource> entity = FieldSourceSettings.entityId(n, ENTITY_ID, machine != null);
    FieldSource event = FieldSourceSettings.fieldSource(n, EVENT, machine != null);
    if (machine == null && (!entity.isEmpty() || event != null)) {
      n.fail(!entity.isEmpty() ? ENTITY_ID : EVENT, "only meaningful with a 'machine'");
    }
    if (mc != null && event instanceof FieldSource.Constant c && !mc.events().containsKey(c.value())) {
      n.fail(EVENT, "constant event '" + c.value() + "' is not an event of machine '" + machine + "' (events: " + mc.events().keySet() + ")");
    }
    List<FieldSource> key = FieldSourceSettings.fieldSources(n, BUSINESS_KEY, true);
    FieldSourceSettings.rejectEmptyConstants(n, BUSINESS_KEY, key);
    List<FieldSource> fp = FieldSourceSettings.fieldSources(n, FINGERPRINT, false);
    List<String> fpExclude = n.stringList(FINGERPRINT_EXCLUDE);
    for (int i = 0; i < fpExclude.size(); i++) {
      String p = n.path("fingerprint-exclude[" + i + "]");
      String spec = fpExclude.get(i);
      FieldSource fs = n.problems().attempt(() -> FieldSource.parse(spec, null, p));
      if (fs != null && !(fs instanceof FieldSource.ValuePointer)) {
        n.failAt(p, "must be a JSON pointer into the value");
      }
    }
    if (!fp.isEmpty() && !fpExclude.isEmpty()) {
      n.fail(FINGERPRINT_EXCLUDE, "give either 'fingerprint' (fields to include) or 'fingerprint-exclude', not both");
    }
    return new Extraction(entity, event, List.copyOf(key), List.copyOf(fp), List.copyOf(fpExclude));
  }

  /** {@code null} escalation topic when there is no valid one (reported). */
  private static Outputs readOutputs(NodeReader n, List<String> topics) {
    String esc = n.get(ESCALATION_TOPIC, topics.isEmpty() ? null : topics.get(0) + ".escalate");
    if (esc != null && !isTopic(esc)) {
      n.fail(ESCALATION_TOPIC, "'" + esc + "' is not a valid Kafka topic name");
      esc = null;
    } else if (esc != null && topics.contains(esc)) {
      n.fail(ESCALATION_TOPIC, "'" + esc + "' is also a source topic of this route");
    }
    return new Outputs(esc, n.get(VERDICT_TOPIC));
  }

  private static Intake readIntake(NodeReader n, List<String> topics, String group) {
    int perPartition = n.get(MAX_IN_FLIGHT_PER_PARTITION);
    int total = n.get(MAX_IN_FLIGHT);
    int uncommitted = n.get(MAX_UNCOMMITTED_PER_PARTITION, MAX_UNCOMMITTED_FACTOR * perPartition);
    if (uncommitted < perPartition) {
      n.fail(MAX_UNCOMMITTED_PER_PARTITION, uncommitted + " is below max-in-flight-per-partition (" + perPartition + ")");
    }
    // the default shrinks with a small per-partition bound; an explicit value must fit in it
    int reorderWindow = n.get(REORDER_WINDOW, Math.min(REORDER_WINDOW.defaultValue(), perPartition));
    if (reorderWindow > perPartition) {
      n.fail(REORDER_WINDOW, reorderWindow + " exceeds max-in-flight-per-partition (" + perPartition + ")");
    }
    return new Intake(List.copyOf(topics), group, perPartition, total, uncommitted, reorderWindow);
  }

  private static RetryConfig readRetry(NodeReader route) {
    NodeReader rn = route.section(RETRY, false);
    RetryConfig retry = new RetryConfig(rn.get(INITIAL_BACKOFF), rn.get(MAX_BACKOFF), rn.get(MAX_ATTEMPTS));
    if (retry.maxBackoff().compareTo(retry.initialBackoff()) < 0) {
      rn.fail(MAX_BACKOFF, "must not be smaller than initial-backoff");
    }
    rn.done();
    return retry;
  }
}
