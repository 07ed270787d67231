package dev.onceguard.proxy.config;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig.Mode;
import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import dev.onceguard.proxy.config.SidecarConfig.KafkaConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses the sidecar's YAML once and validates all of it, so that a bad setting fails start-up
 * with a message naming its path ({@code routes[0].business-key[2]: ...}). Unknown keys are
 * errors too (a typo must not silently fall back to a default). Defaults are public constants.
 *
 * <p>Environment references {@code ${NAME}} and {@code ${NAME:-default}} in string values are
 * expanded, so that secrets and per-deployment addresses can stay out of the file.
 */
public final class ConfigReader {
  public static final String DEFAULT_GRPC_LISTEN = "127.0.0.1:7700";
  public static final Duration DEFAULT_SHUTDOWN_TIMEOUT = Duration.ofSeconds(30);
  public static final Duration DEFAULT_COMMIT_INTERVAL = Duration.ofSeconds(1);
  public static final String DEFAULT_TABLE_PREFIX = "og_";
  public static final int DEFAULT_POOL_SIZE = 8;
  public static final Duration DEFAULT_DECISION_RETENTION = Duration.ofDays(14);
  public static final Duration DEFAULT_REDIS_TIMEOUT = Duration.ofMillis(200);
  public static final Duration DEFAULT_BREAKER_OPEN_FOR = Duration.ofSeconds(5);
  /** 30 days: the TTL only changes the L1 hit rate, never correctness (incident 1). */
  public static final Duration DEFAULT_REDIS_TTL = Duration.ofDays(30);
  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
  public static final Duration DEFAULT_HANDLER_TIMEOUT = Duration.ofSeconds(10);
  public static final Duration DEFAULT_EARLY_ARRIVAL_TIMEOUT = Duration.ofSeconds(60);
  public static final Duration DEFAULT_EARLY_ARRIVAL_RETRY = Duration.ofMillis(200);
  public static final int DEFAULT_MAX_IN_FLIGHT_PER_PARTITION = 64;
  public static final int DEFAULT_MAX_IN_FLIGHT = 512;
  /** The default uncommitted bound of a partition, in multiples of its in-flight bound. */
  public static final int DEFAULT_MAX_UNCOMMITTED_FACTOR = 10;
  public static final int DEFAULT_REORDER_WINDOW = 4;
  public static final Duration DEFAULT_INITIAL_BACKOFF = Duration.ofMillis(100);
  public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofSeconds(10);
  public static final int DEFAULT_MAX_ATTEMPTS = 20;

  private static final Pattern IDENT = Pattern.compile("[A-Za-z][A-Za-z0-9_]{0,31}");
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  private static final Pattern TOPIC = Pattern.compile("[A-Za-z0-9._-]{1,249}");
  private static final Pattern ENV = Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?}");
  private static final Pattern HOST_PORT = Pattern.compile("[^:\\s]+:\\d{1,5}");

  private final Map<String, String> env;

  public ConfigReader() {
    this(System.getenv());
  }

  /** For tests: a fixed environment for {@code ${NAME}} expansion. */
  public ConfigReader(Map<String, String> env) {
    this.env = env;
  }

  public SidecarConfig read(Path file) {
    String text;
    try {
      text = Files.readString(file);
    } catch (IOException e) {
      throw new ConfigException("cannot read config file " + file + ": " + e.getMessage(), e);
    }
    return parse(text, file.toString());
  }

  public SidecarConfig parse(String yaml, String sourceName) {
    JsonNode root;
    try {
      // a repeated key (two 'cancel:' events, two 'routes:') must fail, not let the last one win
      YAMLFactory yamlFactory = YAMLFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
      root = new ObjectMapper(yamlFactory).readTree(yaml);
    } catch (JacksonException e) {
      String line = e.getLocation() == null || e.getLocation().getLineNr() < 1 ? "" : " (line " + e.getLocation().getLineNr() + ")";
      throw new ConfigException(sourceName + ": not valid YAML: " + e.getOriginalMessage() + line, e);
    }
    if (root == null || !root.isObject()) {
      throw new ConfigException(sourceName + ": the configuration must be a YAML mapping");
    }
    return readRoot(new Node(root, "", env));
  }

  private SidecarConfig readRoot(Node root) {
    Node sidecar = root.optObject("sidecar");
    String instanceId = sidecar.string("instance-id", defaultInstanceId());
    if (instanceId.isBlank() || instanceId.length() > 100) {
      throw sidecar.error("instance-id", "must be 1 to 100 characters (it prefixes the claim owner id stored in the ledger)");
    }
    String listen = sidecar.string("grpc-listen", DEFAULT_GRPC_LISTEN);
    if (!HOST_PORT.matcher(listen).matches()) {
      throw sidecar.error("grpc-listen", "'" + listen + "' is not host:port");
    }
    String metrics = sidecar.string("metrics-listen", null);
    if (metrics != null && !HOST_PORT.matcher(metrics).matches()) {
      throw sidecar.error("metrics-listen", "'" + metrics + "' is not host:port");
    }
    String admin = sidecar.string("admin-listen", null);
    if (admin != null) {
      if (!HOST_PORT.matcher(admin).matches() || Integer.parseInt(admin.substring(admin.lastIndexOf(':') + 1)) > 65535) {
        throw sidecar.error("admin-listen", "'" + admin + "' is not host:port (port 0 to 65535), e.g. 0.0.0.0:9401");
      }
      if (admin.equals(listen) || admin.equals(metrics)) {
        throw sidecar.error("admin-listen", "'" + admin + "' is also sidecar." + (admin.equals(listen) ? "grpc-listen" : "metrics-listen")
            + "; give it a port of its own (it serves /metrics too)");
      }
    }
    Duration shutdown = sidecar.duration("shutdown-timeout", DEFAULT_SHUTDOWN_TIMEOUT);
    Duration commitInterval = sidecar.duration("commit-interval", DEFAULT_COMMIT_INTERVAL);
    sidecar.done();

    Node k = root.object("kafka");
    String bootstrap = k.requiredString("bootstrap-servers");
    Map<String, String> props = k.stringMap("properties");
    k.done();

    Node m = root.object("mysql");
    MysqlConfig mysql = new MysqlConfig(
        m.string("host", "127.0.0.1"),
        m.intRange("port", 3306, 1, 65535),
        m.identifier("database", null),
        m.string("user", "root"),
        m.string("password", ""),
        m.tablePrefix("table-prefix", DEFAULT_TABLE_PREFIX),
        m.intRange("pool-size", DEFAULT_POOL_SIZE, 1, 256),
        m.bool("migrate-on-start", true),
        m.duration("decision-retention", DEFAULT_DECISION_RETENTION));
    m.done();

    Node r = root.optObject("redis");
    String uri = r.string("uri", null);
    String redisMode = r.string("mode", "standalone");
    if (!redisMode.equals("standalone") && !redisMode.equals("cluster")) {
      throw r.error("mode", "'" + redisMode + "' is not one of standalone, cluster");
    }
    boolean cluster = redisMode.equals("cluster");
    if (uri != null) {
      String[] parts = uri.split(",");
      if (parts.length > 1 && !cluster) {
        throw r.error("uri", "several URIs are only allowed with mode: cluster (they are its seed nodes)");
      }
      for (String part : parts) {
        String u = part.trim();
        if (!u.startsWith("redis://") && !u.startsWith("rediss://")) {
          throw r.error("uri", "'" + u + "' is not a redis:// or rediss:// URI");
        }
      }
    }
    RedisConfig redis = new RedisConfig(
        uri,
        r.duration("timeout", DEFAULT_REDIS_TIMEOUT),
        r.string("key-prefix", "og:"),
        r.duration("breaker-open-for", DEFAULT_BREAKER_OPEN_FOR),
        cluster);
    r.done();

    Map<String, MachineConfig> machines = new LinkedHashMap<>();
    Node ms = root.optObject("machines");
    for (String name : ms.keys()) {
      Node mn = ms.object(name);
      if (!NAME.matcher(name).matches()) {
        throw ms.error(name, "machine name must match " + NAME.pattern());
      }
      machines.put(name, readMachine(name, mn));
    }
    ms.done();

    List<RouteConfig> routes = new ArrayList<>();
    List<Node> rs = root.list("routes");
    if (rs.isEmpty()) {
      throw new ConfigException("routes: at least one route is required");
    }
    Set<String> routeNames = new HashSet<>();
    Map<String, RouteConfig> entityModel = new HashMap<>();
    for (Node rn : rs) {
      RouteConfig rc = readRoute(rn, machines);
      if (!routeNames.add(rc.name())) {
        throw rn.error("name", "duplicate route name '" + rc.name() + "'");
      }
      checkSameEntityModel(rn, rc, entityModel);
      routes.add(rc);
    }
    root.done();
    return new SidecarConfig(
        instanceId, listen, metrics, admin, shutdown, commitInterval, new KafkaConfig(bootstrap, props), mysql, redis,
        Collections.unmodifiableMap(machines), List.copyOf(routes));
  }

  /**
   * Routes of one machine share its entities (one {@code og_entity} row per id), so they must
   * build ids from the same number of fields: a route keyed by order and one keyed by line would
   * never meet, and the composite encoding is unambiguous only for a fixed number of fields.
   */
  private static void checkSameEntityModel(Node rn, RouteConfig rc, Map<String, RouteConfig> firstOfMachine) {
    if (!rc.hasMachine()) {
      return;
    }
    RouteConfig first = firstOfMachine.putIfAbsent(rc.machine(), rc);
    if (first != null && first.entityId().size() != rc.entityId().size()) {
      throw rn.error("entity-id", rc.entityId().size() + " field(s) " + fieldNames(rc.entityId()) + ", but route '" + first.name()
          + "' of machine '" + rc.machine() + "' has " + first.entityId().size() + " " + fieldNames(first.entityId())
          + "; every route of a machine must identify its entities the same way");
    }
  }

  private static List<String> fieldNames(List<FieldSource> fields) {
    return fields.stream().map(FieldSource::name).toList();
  }

  private static String defaultInstanceId() {
    String h = System.getenv("HOSTNAME");
    return h == null || h.isBlank() ? "onceguard" : h;
  }

  private MachineConfig readMachine(String name, Node n) {
    List<String> states = n.stringList("states", true);
    Set<String> stateSet = new LinkedHashSet<>();
    for (int i = 0; i < states.size(); i++) {
      String s = states.get(i);
      if (!NAME.matcher(s).matches()) {
        throw new ConfigException(n.path("states[" + i + "]") + ": state name '" + s + "' must match " + NAME.pattern());
      }
      if (!stateSet.add(s)) {
        throw new ConfigException(n.path("states[" + i + "]") + ": duplicate state '" + s + "'");
      }
    }
    Set<String> terminal = new LinkedHashSet<>(n.stringList("terminal", false));
    for (String t : terminal) {
      if (!stateSet.contains(t)) {
        throw n.error("terminal", "unknown state '" + t + "' (declared states: " + stateSet + ")");
      }
    }
    Node evs = n.object("events");
    Map<String, EventConfig> events = new LinkedHashMap<>();
    for (String ev : evs.keys()) {
      if (!NAME.matcher(ev).matches()) {
        throw evs.error(ev, "event name must match " + NAME.pattern());
      }
      Node en = evs.object(ev);
      Set<String> from = new LinkedHashSet<>(en.stringList("from", false));
      String to = en.requiredString("to");
      for (String f : from) {
        if (!stateSet.contains(f)) {
          throw en.error("from", "unknown state '" + f + "' (declared states: " + stateSet + ")");
        }
        if (terminal.contains(f)) {
          throw en.error("from", "state '" + f + "' is terminal; no event may leave it");
        }
      }
      if (!stateSet.contains(to)) {
        throw en.error("to", "unknown state '" + to + "' (declared states: " + stateSet + ")");
      }
      en.done();
      events.put(ev, new EventConfig(ev, Collections.unmodifiableSet(from), to));
    }
    evs.done();
    if (events.isEmpty()) {
      throw n.error("events", "a machine needs at least one event");
    }
    if (events.values().stream().noneMatch(EventConfig::creating)) {
      throw n.error("events", "no creating event (an event without 'from'); entities could never be created");
    }
    // Reachability from the creating events' targets.
    Map<String, Set<String>> next = new HashMap<>();
    for (EventConfig e : events.values()) {
      for (String f : e.from()) {
        next.computeIfAbsent(f, x -> new LinkedHashSet<>()).add(e.to());
      }
    }
    Set<String> seen = new LinkedHashSet<>();
    ArrayDeque<String> todo = new ArrayDeque<>();
    events.values().stream().filter(EventConfig::creating).forEach(e -> todo.add(e.to()));
    while (!todo.isEmpty()) {
      String s = todo.poll();
      if (seen.add(s)) {
        todo.addAll(next.getOrDefault(s, Set.of()));
      }
    }
    for (String s : stateSet) {
      if (!seen.contains(s)) {
        throw n.error("states", "state '" + s + "' is unreachable from any creating event");
      }
    }
    List<String> cycles = new ArrayList<>();
    for (String s : stateSet) {
      // a state that can reach itself lies on a cycle
      Set<String> r = new HashSet<>();
      ArrayDeque<String> q = new ArrayDeque<>(next.getOrDefault(s, Set.of()));
      while (!q.isEmpty()) {
        String x = q.poll();
        if (r.add(x)) {
          q.addAll(next.getOrDefault(x, Set.of()));
        }
      }
      if (r.contains(s)) {
        cycles.add(s);
      }
    }
    n.done();
    List<String> cycleReport = cycles.isEmpty() ? List.of() : List.of("states on a cycle: " + cycles);
    return new MachineConfig(name, List.copyOf(states), Collections.unmodifiableSet(terminal), Collections.unmodifiableMap(events), cycleReport);
  }

  private RouteConfig readRoute(Node n, Map<String, MachineConfig> machines) {
    String name = n.requiredString("name");
    if (!NAME.matcher(name).matches()) {
      throw n.error("name", "route name '" + name + "' must match " + NAME.pattern());
    }
    List<String> topics = n.stringList("topics", true);
    for (int i = 0; i < topics.size(); i++) {
      if (!TOPIC.matcher(topics.get(i)).matches()) {
        throw new ConfigException(n.path("topics[" + i + "]") + ": '" + topics.get(i) + "' is not a valid Kafka topic name");
      }
    }
    String group = n.string("group", "onceguard-" + name);
    String machine = n.string("machine", null);
    MachineConfig mc = null;
    if (machine != null) {
      mc = machines.get(machine);
      if (mc == null) {
        throw n.error("machine", "unknown machine '" + machine + "' (configured: " + machines.keySet() + ")");
      }
    }
    List<FieldSource> entity = n.entityId("entity-id", mc != null);
    FieldSource event = n.fieldSource("event", mc != null);
    if (mc == null && (!entity.isEmpty() || event != null)) {
      throw n.error(!entity.isEmpty() ? "entity-id" : "event", "only meaningful with a 'machine'");
    }
    if (event instanceof FieldSource.Constant c && !mc.events().containsKey(c.value())) {
      throw n.error("event", "constant event '" + c.value() + "' is not an event of machine '" + machine + "' (events: " + mc.events().keySet() + ")");
    }
    List<FieldSource> key = n.fieldSourceList("business-key", true);
    n.rejectEmptyConstants("business-key", key);
    List<FieldSource> fp = n.fieldSourceList("fingerprint", false);
    List<String> fpExclude = n.stringList("fingerprint-exclude", false);
    for (int i = 0; i < fpExclude.size(); i++) {
      FieldSource fs = FieldSource.parse(fpExclude.get(i), null, n.path("fingerprint-exclude[" + i + "]"));
      if (!(fs instanceof FieldSource.ValuePointer)) {
        throw new ConfigException(n.path("fingerprint-exclude[" + i + "]") + ": must be a JSON pointer into the value");
      }
    }
    if (!fp.isEmpty() && !fpExclude.isEmpty()) {
      throw n.error("fingerprint-exclude", "give either 'fingerprint' (fields to include) or 'fingerprint-exclude', not both");
    }
    String modeText = n.string("mode", "push");
    Mode mode;
    try {
      mode = Mode.valueOf(modeText.toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw n.error("mode", "'" + modeText + "' is not one of push, pull");
    }
    String target = n.string("target", null);
    if (mode == Mode.PUSH && target == null) {
      throw n.error("target", "required in push mode: host:port of the business container's MessageHandler");
    }
    if (target != null && !HOST_PORT.matcher(target).matches()) {
      throw n.error("target", "'" + target + "' is not host:port");
    }
    Duration handlerTimeout = n.duration("handler-timeout", DEFAULT_HANDLER_TIMEOUT);
    Duration ttl = n.duration("redis-ttl", DEFAULT_REDIS_TTL);
    Duration lease = n.duration("lease", DEFAULT_LEASE);
    if (lease.compareTo(Duration.ofSeconds(1)) < 0) {
      throw n.error("lease", "must be at least 1s");
    }
    Duration early = n.duration("early-arrival-timeout", DEFAULT_EARLY_ARRIVAL_TIMEOUT);
    Duration earlyRetry = n.duration("early-arrival-retry", DEFAULT_EARLY_ARRIVAL_RETRY);
    String esc = n.string("escalation-topic", topics.get(0) + ".escalate");
    if (!TOPIC.matcher(esc).matches()) {
      throw n.error("escalation-topic", "'" + esc + "' is not a valid Kafka topic name");
    }
    if (topics.contains(esc)) {
      throw n.error("escalation-topic", "'" + esc + "' is also a source topic of this route");
    }
    String verdict = n.string("verdict-topic", null);
    if (verdict != null && !TOPIC.matcher(verdict).matches()) {
      throw n.error("verdict-topic", "'" + verdict + "' is not a valid Kafka topic name");
    }
    int perPartition = n.intRange("max-in-flight-per-partition", DEFAULT_MAX_IN_FLIGHT_PER_PARTITION, 1, 100_000);
    int total = n.intRange("max-in-flight", DEFAULT_MAX_IN_FLIGHT, 1, 1_000_000);
    int uncommitted = n.intRange("max-uncommitted-per-partition", DEFAULT_MAX_UNCOMMITTED_FACTOR * perPartition, 1, 10_000_000);
    if (uncommitted < perPartition) {
      throw n.error("max-uncommitted-per-partition", uncommitted + " is below max-in-flight-per-partition (" + perPartition + ")");
    }
    // the default shrinks with a small per-partition bound; an explicit value must fit in it
    int reorderWindow = n.intRange("reorder-window", Math.min(DEFAULT_REORDER_WINDOW, perPartition), 1, 64);
    if (reorderWindow > perPartition) {
      throw n.error("reorder-window", reorderWindow + " exceeds max-in-flight-per-partition (" + perPartition + ")");
    }
    Node rn = n.optObject("retry");
    RetryConfig retry = new RetryConfig(
        rn.duration("initial-backoff", DEFAULT_INITIAL_BACKOFF),
        rn.duration("max-backoff", DEFAULT_MAX_BACKOFF),
        rn.intRange("max-attempts", DEFAULT_MAX_ATTEMPTS, 1, 1_000_000));
    if (retry.maxBackoff().compareTo(retry.initialBackoff()) < 0) {
      throw rn.error("max-backoff", "must not be smaller than initial-backoff");
    }
    rn.done();
    n.done();
    return new RouteConfig(name, List.copyOf(topics), group, machine, entity, event, List.copyOf(key), List.copyOf(fp),
        List.copyOf(fpExclude), mode, target, handlerTimeout, ttl, lease, early, earlyRetry, esc, verdict, perPartition, total,
        uncommitted, reorderWindow, retry);
  }

  private static final Pattern DURATION = Pattern.compile("(\\d+)(ms|s|m|h|d)");

  /** Parses {@code 250ms}, {@code 30s}, {@code 5m}, {@code 2h}, {@code 30d}. */
  public static Duration parseDuration(String text, String path) {
    Matcher mt = DURATION.matcher(text.trim());
    if (!mt.matches()) {
      throw new ConfigException(path + ": '" + text + "' is not a duration (e.g. 250ms, 30s, 5m, 2h, 30d)");
    }
    try {
      long v = Long.parseLong(mt.group(1));
      return switch (mt.group(2)) {
        case "ms" -> Duration.ofMillis(v);
        case "s" -> Duration.ofSeconds(v);
        case "m" -> Duration.ofMinutes(v);
        case "h" -> Duration.ofHours(v);
        default -> Duration.ofDays(v);
      };
    } catch (NumberFormatException | ArithmeticException e) {
      throw new ConfigException(path + ": '" + text + "' is not a duration (too large)", e);
    }
  }

  /** A mapping being read, with its path; remembers which keys were consumed. */
  private static final class Node {
    private final JsonNode node;
    private final String path;
    private final Map<String, String> env;
    private final Set<String> used = new HashSet<>();

    Node(JsonNode node, String path, Map<String, String> env) {
      this.node = node;
      this.path = path;
      this.env = env;
    }

    String path(String key) {
      return path.isEmpty() ? key : path + "." + key;
    }

    ConfigException error(String key, String msg) {
      return new ConfigException(path(key) + ": " + msg);
    }

    List<String> keys() {
      List<String> ks = new ArrayList<>();
      if (node != null) {
        node.fieldNames().forEachRemaining(ks::add);
      }
      return ks;
    }

    private JsonNode get(String key) {
      used.add(key);
      if (node == null) {
        return null;
      }
      JsonNode v = node.get(key);
      return v == null || v.isNull() ? null : v;
    }

    /** Fails on keys nobody read: a typo must not fall back to a default silently. */
    void done() {
      if (node == null) {
        return;
      }
      for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
        String k = it.next();
        if (!used.contains(k)) {
          throw new ConfigException(path(k) + ": unknown setting");
        }
      }
    }

    Node object(String key) {
      JsonNode v = get(key);
      if (v == null) {
        throw error(key, "required section is missing");
      }
      if (!v.isObject()) {
        throw error(key, "must be a mapping");
      }
      return new Node(v, path(key), env);
    }

    Node optObject(String key) {
      JsonNode v = get(key);
      if (v != null && !v.isObject()) {
        throw error(key, "must be a mapping");
      }
      return new Node(v, path(key), env);
    }

    List<Node> list(String key) {
      JsonNode v = get(key);
      if (v == null) {
        return List.of();
      }
      if (!v.isArray()) {
        throw error(key, "must be a list");
      }
      List<Node> out = new ArrayList<>();
      for (int i = 0; i < v.size(); i++) {
        if (!v.get(i).isObject()) {
          throw new ConfigException(path(key) + "[" + i + "]: must be a mapping");
        }
        out.add(new Node(v.get(i), path(key) + "[" + i + "]", env));
      }
      return out;
    }

    private String expand(String s, String key) {
      Matcher mt = ENV.matcher(s);
      StringBuilder sb = new StringBuilder();
      while (mt.find()) {
        String val = env.get(mt.group(1));
        if (val == null) {
          if (mt.group(2) == null) {
            throw error(key, "environment variable " + mt.group(1) + " is not set (write ${" + mt.group(1) + ":-default} for a default)");
          }
          val = mt.group(3);
        }
        mt.appendReplacement(sb, Matcher.quoteReplacement(val));
      }
      mt.appendTail(sb);
      return sb.toString();
    }

    String string(String key, String def) {
      JsonNode v = get(key);
      if (v == null) {
        return def;
      }
      if (!v.isValueNode()) {
        throw error(key, "must be a single value");
      }
      return expand(v.asText(), key);
    }

    String requiredString(String key) {
      String s = string(key, null);
      if (s == null || s.isBlank()) {
        throw error(key, "required");
      }
      return s;
    }

    String identifier(String key, String def) {
      String s = def == null ? requiredString(key) : string(key, def);
      if (!IDENT.matcher(s).matches()) {
        throw error(key, "'" + s + "' is not a plain identifier (" + IDENT.pattern() + ")");
      }
      return s;
    }

    String tablePrefix(String key, String def) {
      String s = string(key, def);
      if (!s.isEmpty() && !Pattern.matches("[A-Za-z][A-Za-z0-9_]{0,15}", s)) {
        throw error(key, "'" + s + "' is not a valid table prefix (letters, digits, '_', at most 16)");
      }
      return s;
    }

    boolean bool(String key, boolean def) {
      String s = string(key, null);
      if (s == null) {
        return def;
      }
      if (s.equals("true") || s.equals("false")) {
        return Boolean.parseBoolean(s);
      }
      throw error(key, "'" + s + "' is not true or false");
    }

    int intRange(String key, int def, int min, int max) {
      String s = string(key, null);
      if (s == null) {
        return def;
      }
      int v;
      try {
        v = Integer.parseInt(s.trim());
      } catch (NumberFormatException e) {
        throw error(key, "'" + s + "' is not a whole number");
      }
      if (v < min || v > max) {
        throw error(key, v + " is out of range [" + min + ", " + max + "]");
      }
      return v;
    }

    Duration duration(String key, Duration def) {
      String s = string(key, null);
      return s == null ? def : parseDuration(s, path(key));
    }

    Map<String, String> stringMap(String key) {
      JsonNode v = get(key);
      if (v == null) {
        return Map.of();
      }
      if (!v.isObject()) {
        throw error(key, "must be a mapping of strings");
      }
      Map<String, String> out = new LinkedHashMap<>();
      Node child = new Node(v, path(key), env);
      for (String k : child.keys()) {
        out.put(k, child.string(k, ""));
      }
      return Collections.unmodifiableMap(out);
    }

    List<String> stringList(String key, boolean required) {
      JsonNode v = get(key);
      if (v == null) {
        if (required) {
          throw error(key, "required (a non-empty list)");
        }
        return List.of();
      }
      if (v.isValueNode()) {
        return List.of(expand(v.asText(), key));
      }
      if (!v.isArray()) {
        throw error(key, "must be a list");
      }
      List<String> out = new ArrayList<>();
      for (int i = 0; i < v.size(); i++) {
        if (!v.get(i).isValueNode() || v.get(i).isNull()) {
          throw new ConfigException(path(key) + "[" + i + "]: must be a string");
        }
        out.add(expand(v.get(i).asText(), key + "[" + i + "]"));
      }
      if (required && out.isEmpty()) {
        throw error(key, "must not be empty");
      }
      return out;
    }

    FieldSource fieldSource(String key, boolean required) {
      String s = string(key, null);
      if (s == null) {
        if (required) {
          throw error(key, "required with a machine: where to find it ('/json/pointer', 'header:NAME', 'key' or 'const:VALUE')");
        }
        return null;
      }
      return FieldSource.parse(s, key, path(key));
    }

    /**
     * One field source, or a list of them as in {@link #fieldSourceList} (a composite id such as
     * a fulfilment line); empty when absent and not required.
     */
    List<FieldSource> entityId(String key, boolean required) {
      JsonNode v = get(key);
      List<FieldSource> out;
      if (v == null || v.isValueNode()) {
        FieldSource single = fieldSource(key, required);
        out = single == null ? List.of() : List.of(single);
      } else {
        if (v.isArray() && v.isEmpty()) {
          throw error(key, "must not be empty: one field source, or a list of them");
        }
        out = fieldSourceList(key, required);
      }
      rejectEmptyConstants(key, out);
      return out;
    }

    /** An empty {@code const:} in a key makes every record MISSING_FIELD: a start-up error instead. */
    void rejectEmptyConstants(String key, List<FieldSource> fields) {
      for (int i = 0; i < fields.size(); i++) {
        if (fields.get(i) instanceof FieldSource.Constant c && c.value().isBlank()) {
          String p = get(key).isArray() ? path(key) + "[" + i + "]" : path(key);
          throw new ConfigException(p + ": an empty constant cannot identify anything (every record would be MISSING_FIELD)");
        }
      }
    }

    /** Items are a spec string, or {@code {name: N, from: SPEC}}. */
    List<FieldSource> fieldSourceList(String key, boolean required) {
      JsonNode v = get(key);
      if (v == null) {
        if (required) {
          throw error(key, "required: the business fields that identify one fact, e.g. [/order_id, /sku_id, /warehouse_id]");
        }
        return List.of();
      }
      if (!v.isArray()) {
        throw error(key, "must be a list");
      }
      List<FieldSource> out = new ArrayList<>();
      Set<String> names = new HashSet<>();
      for (int i = 0; i < v.size(); i++) {
        String p = path(key) + "[" + i + "]";
        JsonNode item = v.get(i);
        FieldSource fs;
        if (item.isTextual()) {
          fs = FieldSource.parse(expand(item.asText(), key + "[" + i + "]"), null, p);
        } else if (item.isObject()) {
          Node in = new Node(item, p, env);
          String nm = in.requiredString("name");
          fs = FieldSource.parse(in.requiredString("from"), nm, p);
          in.done();
        } else {
          throw new ConfigException(p + ": must be a field source string or {name, from}");
        }
        if (!names.add(fs.name())) {
          throw new ConfigException(p + ": duplicate field name '" + fs.name() + "' (give it a distinct 'name')");
        }
        out.add(fs);
      }
      if (required && out.isEmpty()) {
        throw error(key, "must not be empty");
      }
      return out;
    }
  }
}
