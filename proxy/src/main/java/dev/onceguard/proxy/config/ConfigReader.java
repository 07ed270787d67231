package dev.onceguard.proxy.config;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig.Mode;
import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import dev.onceguard.proxy.config.SidecarConfig.ApiSecurity;
import dev.onceguard.proxy.config.SidecarConfig.KafkaConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlTls;
import dev.onceguard.proxy.config.SidecarConfig.SslMode;
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
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;

/**
 * Parses the sidecar's YAML once and validates all of it, so that a bad setting fails start-up
 * with a message naming its path ({@code routes[0].business-key[2]: ...}). Every problem of the
 * file is reported at once ({@link ConfigException#problems()}), not only the first. Unknown keys
 * are errors too (a typo must not silently fall back to a default), with the known key they are
 * closest to. {@code kafka.properties} are checked against the Kafka clients' own definitions
 * (type and allowed values). Defaults are public constants.
 *
 * <p>Environment references {@code ${NAME}} and {@code ${NAME:-default}} in string values are
 * expanded, so that secrets and per-deployment addresses can stay out of the file; so are
 * {@code ${file:/path}} references, replaced by the file's content without one trailing newline
 * (a mounted Kubernetes or Docker secret). What a file held never appears in a problem reported
 * here. In {@code kafka.properties} that set {@code config.providers}, {@code ${file:...}} references
 * are left to Kafka's own config providers (whose {@code ${file:/path:key}} looks like ours).
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
  /** Environment variable giving {@code sidecar.log-format}'s default; it also applies before the file is read. */
  public static final String LOG_FORMAT_ENV = "ONCEGUARD_LOG_FORMAT";
  /** The OpenTelemetry standard variable, {@code tracing.otlp-endpoint}'s default. */
  public static final String OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT";
  public static final List<String> LOG_FORMATS = List.of("text", "json");
  public static final Duration DEFAULT_RELOAD_INTERVAL = Duration.ofSeconds(10);

  private static final Pattern IDENT = Pattern.compile("[A-Za-z][A-Za-z0-9_]{0,31}");
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  private static final Pattern TOPIC = Pattern.compile("[A-Za-z0-9._-]{1,249}");
  /** {@code ${file:/path}} (group 1) or {@code ${NAME}} / {@code ${NAME:-default}} (groups 2 and 4). */
  private static final Pattern REF = Pattern.compile("\\$\\{(?:file:([^}]*)|([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?)}");
  private static final Pattern HOST_PORT = Pattern.compile("([^:\\s]+):(\\d{1,5})");

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
    Problems problems = new Problems();
    SidecarConfig config = readRoot(new Node(root, "", env, problems), problems);
    problems.throwIfAny();
    return config;
  }

  /**
   * The problems of one read, in the order found. Reading goes on after a problem with a fallback
   * value, so that one run reports them all; the fallback never reaches a caller.
   */
  private static final class Problems {
    private final List<String> found = new ArrayList<>();
    /** Values read from secret files: masked in every problem, whatever setting echoes a value. */
    private final Set<String> secrets = new HashSet<>();

    void add(String problem) {
      String shown = problem;
      for (String secret : secrets) {
        if (!secret.isBlank()) {
          shown = shown.replace(secret, "***");
        }
      }
      found.add(shown);
    }

    /** Runs one part of the read; a problem it throws is recorded and the read goes on without it. */
    <T> T attempt(Supplier<T> part) {
      try {
        return part.get();
      } catch (ConfigException e) {
        e.problems().forEach(this::add);
        return null;
      }
    }

    void throwIfAny() {
      if (!found.isEmpty()) {
        throw new ConfigException(found);
      }
    }
  }

  private SidecarConfig readRoot(Node root, Problems problems) {
    Node sidecar = root.optObject("sidecar");
    String instanceId = sidecar.string("instance-id", defaultInstanceId());
    if (instanceId.isBlank() || instanceId.length() > 100) {
      sidecar.fail("instance-id", "must be 1 to 100 characters (it prefixes the claim owner id stored in the ledger)");
    }
    String listen = sidecar.address("grpc-listen", DEFAULT_GRPC_LISTEN, 0, "127.0.0.1:7700");
    if (listen != null && UnixSocket.is(listen) && !Files.isDirectory(UnixSocket.pathOf(listen).getParent())) {
      sidecar.fail("grpc-listen", "directory " + UnixSocket.pathOf(listen).getParent() + " of the socket does not exist");
    }
    String metrics = sidecar.hostPort("metrics-listen", null, 0, "0.0.0.0:9400");
    String admin = sidecar.hostPort("admin-listen", null, 0, "0.0.0.0:9401");
    if (admin != null && (admin.equals(listen) || admin.equals(metrics))) {
      sidecar.fail("admin-listen", "'" + admin + "' is also sidecar." + (admin.equals(listen) ? "grpc-listen" : "metrics-listen")
          + "; give it a port of its own (it serves /metrics too)");
    }
    Duration shutdown = sidecar.duration("shutdown-timeout", DEFAULT_SHUTDOWN_TIMEOUT);
    Duration commitInterval = sidecar.duration("commit-interval", DEFAULT_COMMIT_INTERVAL);
    String logFormat = readLogFormat(sidecar);
    ApiSecurity security = readApiSecurity(sidecar, listen);
    sidecar.done();

    Node k = root.object("kafka");
    String bootstrap = k.requiredString("bootstrap-servers");
    if (bootstrap != null) {
      for (String server : bootstrap.split(",")) {
        // read as the Kafka clients read it (an optional SECURITY_PROTOCOL:// prefix, [IPv6]:port),
        // without resolving the host: this machine may not know the cluster's names
        String s = server.trim();
        String host = org.apache.kafka.common.utils.Utils.getHost(s);
        Integer port = org.apache.kafka.common.utils.Utils.getPort(s);
        if (host == null || host.isEmpty() || port == null || port < 1 || port > 65535) {
          k.fail("bootstrap-servers", "'" + s + "' is not host:port (port 1 to 65535), e.g. kafka-1:9092,kafka-2:9092");
        }
      }
    }
    Map<String, String> props = k.stringMap("properties");
    props.forEach((key, value) -> checkKafkaProperty(k, key, value));
    boolean createTopics = k.bool("create-topics", false);
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
        m.duration("decision-retention", DEFAULT_DECISION_RETENTION),
        mysqlTls(m));
    m.done();

    Node r = root.optObject("redis");
    String uri = r.string("uri", null);
    String redisMode = r.string("mode", "standalone");
    if (!redisMode.equals("standalone") && !redisMode.equals("cluster")) {
      r.fail("mode", "'" + redisMode + "' is not one of standalone, cluster");
    }
    boolean cluster = redisMode.equals("cluster");
    if (uri != null) {
      String[] parts = uri.split(",");
      if (parts.length > 1 && !cluster) {
        r.fail("uri", "several URIs are only allowed with mode: cluster (they are its seed nodes)");
      }
      for (String part : parts) {
        String problem = redisUriProblem(part.trim());
        if (problem != null) {
          r.fail("uri", problem);
        }
      }
    }
    Path redisCa = r.caFile("ssl-ca");
    if (redisCa != null && (uri == null || !uri.trim().startsWith("rediss://"))) {
      r.fail("ssl-ca", "only used with rediss:// URIs (TLS); redis.uri is " + (uri == null ? "not set" : "not rediss://"));
    }
    RedisConfig redis = new RedisConfig(
        uri,
        r.duration("timeout", DEFAULT_REDIS_TIMEOUT),
        r.string("key-prefix", "og:"),
        r.duration("breaker-open-for", DEFAULT_BREAKER_OPEN_FOR),
        cluster,
        redisCa);
    r.done();

    Map<String, MachineConfig> machines = new LinkedHashMap<>();
    Node ms = root.optObject("machines");
    for (String name : ms.keys()) {
      Node mn = ms.object(name);
      if (!NAME.matcher(name).matches()) {
        ms.fail(name, "machine name must match " + NAME.pattern());
      }
      MachineConfig mc = problems.attempt(() -> readMachine(name, mn));
      if (mc != null) {
        machines.put(name, mc);
      }
    }
    ms.done();

    List<RouteConfig> routes = new ArrayList<>();
    List<Node> rs = root.list("routes");
    if (!root.has("routes")) {
      root.missing("routes", "at least one route is required");
    } else if (root.node.get("routes").isEmpty()) {
      root.fail("routes", "at least one route is required");
    }
    Set<String> routeNames = new HashSet<>();
    Map<String, RouteConfig> entityModel = new HashMap<>();
    for (Node rn : rs) {
      RouteConfig rc = problems.attempt(() -> readRoute(rn, machines, ms.keys()));
      if (rc == null) {
        continue;
      }
      if (!routeNames.add(rc.name())) {
        rn.fail("name", "duplicate route name '" + rc.name() + "'");
      }
      checkSameEntityModel(rn, rc, entityModel);
      routes.add(rc);
    }
    TracingConfig tracing = readTracing(root.optObject("tracing"));
    root.done();
    return new SidecarConfig(
        instanceId, listen, metrics, admin, shutdown, commitInterval, new KafkaConfig(bootstrap, props, createTopics), mysql, redis,
        Collections.unmodifiableMap(machines), List.copyOf(routes), logFormat, tracing, security);
  }

  /** {@code sidecar.log-format}, by default {@value #LOG_FORMAT_ENV} or {@code text}. */
  private String readLogFormat(Node sidecar) {
    String fromEnv = env.get(LOG_FORMAT_ENV);
    boolean inFile = sidecar.has("log-format");
    String f = sidecar.string("log-format", fromEnv == null || fromEnv.isBlank() ? "text" : fromEnv.trim());
    if (!LOG_FORMATS.contains(f)) {
      String where = inFile ? "" : " (from " + LOG_FORMAT_ENV + ")";
      String near = closest(f, LOG_FORMATS);
      sidecar.fail("log-format", "'" + f + "'" + where + " is not one of " + String.join(", ", LOG_FORMATS)
          + (near == null ? "" : " (did you mean '" + near + "'?)"));
      return "text";
    }
    return f;
  }

  /** The {@code tracing} section; off without an endpoint (setting or {@value #OTLP_ENDPOINT_ENV}). */
  private TracingConfig readTracing(Node t) {
    String fromEnv = env.get(OTLP_ENDPOINT_ENV);
    boolean inFile = t.has("otlp-endpoint");
    String endpoint = t.string("otlp-endpoint", fromEnv == null || fromEnv.isBlank() ? null : fromEnv.trim());
    if (endpoint != null) {
      String problem = otlpEndpointProblem(endpoint);
      if (problem != null) {
        t.fail("otlp-endpoint", "'" + Secrets.withoutUserInfo(endpoint) + "'" + (inFile ? "" : " (from " + OTLP_ENDPOINT_ENV + ")") + " " + problem
            + ", e.g. http://otel-collector:4318");
        endpoint = null;
      }
    }
    double ratio = 1.0;
    String r = t.string("sample-ratio", null);
    if (r != null) {
      try {
        ratio = Double.parseDouble(r.trim());
        if (!(ratio >= 0 && ratio <= 1)) {
          t.fail("sample-ratio", r + " is out of range [0, 1]");
          ratio = 1.0;
        }
      } catch (NumberFormatException e) {
        t.fail("sample-ratio", "'" + r + "' is not a number from 0 to 1, e.g. 0.1");
      }
    }
    t.done();
    return new TracingConfig(endpoint, ratio);
  }

  /** Why {@code endpoint} is not an http(s) base URL with a host; {@code null} when it is. */
  private static String otlpEndpointProblem(String endpoint) {
    try {
      java.net.URI u = new java.net.URI(endpoint);
      if (!"http".equals(u.getScheme()) && !"https".equals(u.getScheme())) {
        return "is not an http:// or https:// URL (OTLP over HTTP, http/protobuf)";
      }
      if (u.getHost() == null || u.getHost().isEmpty()) {
        return "has no host";
      }
      return null;
    } catch (java.net.URISyntaxException e) {
      return "is not a URL (" + e.getReason() + ")";
    }
  }

  /** {@code sidecar.tls}, {@code sidecar.auth} and {@code sidecar.reload-interval}. */
  private static ApiSecurity readApiSecurity(Node sidecar, String listen) {
    Duration reload = sidecar.duration("reload-interval", DEFAULT_RELOAD_INTERVAL);
    if (reload.compareTo(Duration.ofMillis(100)) < 0) {
      sidecar.fail("reload-interval", "must be at least 100ms");
    }
    Node t = sidecar.optObject("tls");
    TlsConfig tls = null;
    if (t.node != null) {
      Path cert = pemCertificates(t, "cert-file", true);
      Path key = pemKey(t, "key-file", true, cert);
      Path ca = pemCertificates(t, "client-ca-file", false);
      tls = new TlsConfig(cert, key, ca, null);
      if (listen != null && UnixSocket.is(listen)) {
        sidecar.fail("tls", "meaningless on a Unix socket (grpc-listen " + listen + "): only this host reaches it, "
            + "and the socket file's permissions decide who; remove sidecar.tls or listen on host:port");
      }
    }
    t.done();
    Node a = sidecar.optObject("auth");
    Path token = null;
    String tokenFile = a.string("token-file", null);
    if (tokenFile != null) {
      token = Path.of(tokenFile);
      String problem = tokenFileProblem(token);
      if (problem != null) {
        a.fail("token-file", problem);
      }
    }
    List<String> allowed = a.stringList("allowed-clients", false);
    if (!allowed.isEmpty() && (tls == null || tls.caFile() == null)) {
      a.fail("allowed-clients", "client names are only known with mTLS: set sidecar.tls.client-ca-file too");
    }
    a.done();
    return new ApiSecurity(tls, token, List.copyOf(allowed), reload);
  }

  /** {@code routes[].target-tls}; {@code null} when absent. */
  private static TlsConfig readTargetTls(Node route, Mode mode, String target) {
    Node t = route.optObject("target-tls");
    if (t.node == null) {
      return null;
    }
    Path ca = pemCertificates(t, "ca-file", false);
    Path cert = pemCertificates(t, "cert-file", false);
    Path key = pemKey(t, "key-file", cert != null, cert);
    if (key != null && !t.has("cert-file")) {
      t.missing("cert-file", "required with key-file: the client certificate for mTLS");
    }
    String authority = t.string("authority", null);
    t.done();
    if (mode == Mode.PULL) {
      route.fail("target-tls", "only meaningful in push mode (in pull mode the business connects to sidecar.grpc-listen)");
    } else if (target != null && UnixSocket.is(target)) {
      route.fail("target-tls", "meaningless on a Unix socket target (" + target + "): only this host reaches it, "
          + "and the socket file's permissions decide who; remove target-tls or use host:port");
    }
    return new TlsConfig(cert, key, ca, authority);
  }

  /** A PEM certificate file setting; {@code null} when absent or unusable (reported, naming the file). */
  private static Path pemCertificates(Node n, String key, boolean required) {
    String s = required ? n.requiredString(key) : n.string(key, null);
    if (s == null) {
      return null;
    }
    String problem = PemFiles.certificatesProblem(Path.of(s));
    if (problem != null) {
      n.fail(key, problem);
      return null;
    }
    return Path.of(s);
  }

  /** A PEM private key setting, checked against {@code certFile} when that is usable. */
  private static Path pemKey(Node n, String key, boolean required, Path certFile) {
    String s = required ? n.requiredString(key) : n.string(key, null);
    if (s == null) {
      return null;
    }
    String problem = PemFiles.keyProblem(Path.of(s), certFile);
    if (problem != null) {
      n.fail(key, problem);
      return null;
    }
    return Path.of(s);
  }

  /** Why the bearer token file cannot be used, or {@code null}; never shows the token. */
  private static String tokenFileProblem(Path file) {
    try {
      if (Files.readString(file).isBlank()) {
        return "file " + file + " is empty (it must hold the bearer token)";
      }
      return null;
    } catch (java.nio.file.NoSuchFileException e) {
      return "file " + file + " does not exist";
    } catch (IOException | RuntimeException e) {
      return "file " + file + " cannot be read: " + e.getMessage();
    }
  }

  /**
   * Checks one {@code kafka.properties} entry the way the Kafka clients parse it: its type and its
   * validator (an enum such as {@code security.protocol}, a range), so that a bad value fails here,
   * naming {@code kafka.properties.<key>}, and not later inside a client blamed on something else.
   */
  private static void checkKafkaProperty(Node kafka, String key, String value) {
    List<ConfigDef> defs = List.of(ConsumerConfig.configDef(), ProducerConfig.configDef(), AdminClientConfig.configDef());
    boolean known = false;
    for (ConfigDef def : defs) {
      ConfigDef.ConfigKey ck = def.configKeys().get(key);
      if (ck == null) {
        continue;
      }
      known = true;
      try {
        Object parsed = ConfigDef.parseType(key, value, ck.type);
        if (ck.validator != null) {
          ck.validator.ensureValid(key, parsed);
        }
      } catch (org.apache.kafka.common.config.ConfigException e) {
        kafka.fail("properties." + key, e.getMessage());
        return;
      }
    }
    if (!known) {
      // A name close to a client property is a typo. Any other unknown name is passed on: the
      // clients hand their configuration to plugins (interceptors, SASL callback handlers, config
      // providers), whose own settings no ConfigDef here knows.
      Set<String> names = new HashSet<>();
      defs.forEach(d -> names.addAll(d.names()));
      String near = closest(key, names);
      if (near != null) {
        kafka.fail("properties." + key, "not a property of the Kafka consumer, producer or admin client (did you mean '" + near + "'?)");
      }
    }
  }

  /**
   * {@code mysql.ssl-mode} and {@code mysql.ssl-ca}. A CA only means something to a mode that
   * checks the server's certificate: with {@code disable} or {@code require} it would be ignored,
   * which is refused rather than let an operator believe the server is verified.
   */
  private static MysqlTls mysqlTls(Node m) {
    String modeText = m.string("ssl-mode", SslMode.DISABLE.setting());
    SslMode mode = null;
    for (SslMode candidate : SslMode.values()) {
      if (candidate.setting().equals(modeText.trim())) {
        mode = candidate;
      }
    }
    if (mode == null) {
      List<String> names = java.util.Arrays.stream(SslMode.values()).map(SslMode::setting).toList();
      String near = closest(modeText, names);
      m.fail("ssl-mode", "'" + modeText + "' is not one of " + String.join(", ", names) + (near == null ? "" : " (did you mean '" + near + "'?)"));
      mode = SslMode.DISABLE;
    }
    Path ca = m.caFile("ssl-ca");
    if (ca != null && !mode.verifies()) {
      m.fail("ssl-ca", "is only used with ssl-mode verify-ca or verify-full (ssl-mode is " + mode.setting()
          + ", which does not check the server's certificate)");
    }
    String keystoreText = m.string("ssl-keystore", null);
    String keystorePassword = m.string("ssl-keystore-password", null);
    Path keystore = null;
    if (keystoreText != null && !keystoreText.isBlank()) {
      keystore = Path.of(keystoreText.trim());
      if (mode == SslMode.DISABLE) {
        m.fail("ssl-keystore", "a client certificate needs TLS: set ssl-mode (require, verify-ca or verify-full)");
      }
      String problem = keystoreProblem(keystore, keystorePassword);
      if (problem != null) {
        m.fail("ssl-keystore", problem);
      }
    } else if (keystorePassword != null) {
      m.fail("ssl-keystore-password", "is only used with ssl-keystore");
    }
    return new MysqlTls(mode, ca, keystore, keystorePassword);
  }

  /** Why {@code file} is not a PKCS12 key store that opens with {@code password}; {@code null} when it is. */
  private static String keystoreProblem(Path file, String password) {
    try (java.io.InputStream in = Files.newInputStream(file)) {
      java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
      ks.load(in, password == null ? new char[0] : password.toCharArray());
      for (String alias : Collections.list(ks.aliases())) {
        if (ks.isKeyEntry(alias)) {
          return null;
        }
      }
      return "key store " + file + " holds no private key (it needs the client's key and certificate)";
    } catch (java.nio.file.NoSuchFileException e) {
      return "key store " + file + " does not exist";
    } catch (IOException | java.security.GeneralSecurityException e) {
      // the message may say "wrong password" (never the password itself)
      return "cannot open PKCS12 key store " + file + " with ssl-keystore-password: " + e.getMessage();
    }
  }

  /** Why {@code hostPort} is not {@code host:port} with a port from {@code minPort} to 65535; {@code null} when it is. */
  private static String hostPortProblem(String hostPort, int minPort) {
    Matcher mt = HOST_PORT.matcher(hostPort);
    if (!mt.matches() || Integer.parseInt(mt.group(2)) < minPort || Integer.parseInt(mt.group(2)) > 65535) {
      return "'" + hostPort + "' is not host:port (port " + minPort + " to 65535)";
    }
    return null;
  }

  private static String redisUriProblem(String uri) {
    if (!uri.startsWith("redis://") && !uri.startsWith("rediss://")) {
      return "'" + Secrets.withoutUserInfo(uri) + "' is not a redis:// or rediss:// URI";
    }
    try {
      java.net.URI u = new java.net.URI(uri);
      if (u.getHost() == null || u.getPort() > 65535 || u.getPort() == 0) {
        return "'" + Secrets.withoutUserInfo(uri) + "' has no host, or a port outside 1 to 65535";
      }
      return null;
    } catch (java.net.URISyntaxException e) {
      // the reason quotes the input (with its password): position only
      return "not a valid URI (" + e.getReason().replaceAll(":.*", "") + " at index " + e.getIndex() + ")";
    }
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
      rn.fail("entity-id", rc.entityId().size() + " field(s) " + fieldNames(rc.entityId()) + ", but route '" + first.name()
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

  /** Returns {@code null} when the machine's problems leave nothing to check its routes against. */
  private MachineConfig readMachine(String name, Node n) {
    List<String> states = n.stringList("states", true);
    if (states.isEmpty()) {
      return null; // reported; every event would fail against no states
    }
    Set<String> stateSet = new LinkedHashSet<>();
    for (int i = 0; i < states.size(); i++) {
      String s = states.get(i);
      if (!NAME.matcher(s).matches()) {
        n.failAt(n.path("states[" + i + "]"), "state name '" + s + "' must match " + NAME.pattern());
      } else if (!stateSet.add(s)) {
        n.failAt(n.path("states[" + i + "]"), "duplicate state '" + s + "'");
      }
    }
    Set<String> terminal = new LinkedHashSet<>(n.stringList("terminal", false));
    for (String t : terminal) {
      if (!stateSet.contains(t)) {
        n.fail("terminal", "unknown state '" + t + "' (declared states: " + stateSet + ")");
      }
    }
    Node evs = n.object("events");
    Map<String, EventConfig> events = new LinkedHashMap<>();
    for (String ev : evs.keys()) {
      if (!NAME.matcher(ev).matches()) {
        evs.fail(ev, "event name must match " + NAME.pattern());
      }
      Node en = evs.object(ev);
      Set<String> from = new LinkedHashSet<>(en.stringList("from", false));
      String to = en.requiredString("to");
      boolean valid = to != null;
      for (String f : from) {
        if (!stateSet.contains(f)) {
          en.fail("from", "unknown state '" + f + "' (declared states: " + stateSet + ")");
          valid = false;
        } else if (terminal.contains(f)) {
          en.fail("from", "state '" + f + "' is terminal; no event may leave it");
          valid = false;
        }
      }
      if (to != null && !stateSet.contains(to)) {
        en.fail("to", "unknown state '" + to + "' (declared states: " + stateSet + ")");
        valid = false;
      }
      en.done();
      if (valid) {
        events.put(ev, new EventConfig(ev, Collections.unmodifiableSet(from), to));
      }
    }
    evs.done();
    if (events.size() < evs.keys().size() || !n.has("events") || evs.broken) {
      // each event's problem, or the section's, is reported already; the graph checks below
      // would only repeat it (a state unreachable for want of the event left out)
      n.done();
      return null;
    }
    if (events.isEmpty()) {
      n.fail("events", "a machine needs at least one event");
      n.done();
      return null;
    }
    if (events.values().stream().noneMatch(EventConfig::creating)) {
      n.fail("events", "no creating event (an event without 'from'); entities could never be created");
      n.done();
      return null;
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
        n.fail("states", "state '" + s + "' is unreachable from any creating event");
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

  /**
   * @param declaredMachines every machine named in the file, also those whose own problems kept
   *     them out of {@code machines} (a route naming one is not blamed for it)
   * @return {@code null} when a problem leaves no route to build (every problem is recorded)
   */
  private RouteConfig readRoute(Node n, Map<String, MachineConfig> machines, List<String> declaredMachines) {
    String name = n.requiredString("name");
    if (name != null && !NAME.matcher(name).matches()) {
      n.fail("name", "route name '" + name + "' must match " + NAME.pattern());
    }
    List<String> topics = n.stringList("topics", true);
    for (int i = 0; i < topics.size(); i++) {
      if (!TOPIC.matcher(topics.get(i)).matches()) {
        n.failAt(n.path("topics[" + i + "]"), "'" + topics.get(i) + "' is not a valid Kafka topic name");
      }
    }
    String group = n.string("group", "onceguard-" + name);
    String machine = n.string("machine", null);
    MachineConfig mc = null;
    if (machine != null) {
      mc = machines.get(machine);
      if (mc == null && !declaredMachines.contains(machine)) {
        n.fail("machine", "unknown machine '" + machine + "' (configured: " + declaredMachines + ")");
      }
    }
    List<FieldSource> entity = n.entityId("entity-id", machine != null);
    FieldSource event = n.fieldSource("event", machine != null);
    if (machine == null && (!entity.isEmpty() || event != null)) {
      n.fail(!entity.isEmpty() ? "entity-id" : "event", "only meaningful with a 'machine'");
    }
    if (mc != null && event instanceof FieldSource.Constant c && !mc.events().containsKey(c.value())) {
      n.fail("event", "constant event '" + c.value() + "' is not an event of machine '" + machine + "' (events: " + mc.events().keySet() + ")");
    }
    List<FieldSource> key = n.fieldSourceList("business-key", true);
    n.rejectEmptyConstants("business-key", key);
    List<FieldSource> fp = n.fieldSourceList("fingerprint", false);
    List<String> fpExclude = n.stringList("fingerprint-exclude", false);
    for (int i = 0; i < fpExclude.size(); i++) {
      String p = n.path("fingerprint-exclude[" + i + "]");
      String spec = fpExclude.get(i);
      FieldSource fs = n.problems.attempt(() -> FieldSource.parse(spec, null, p));
      if (fs != null && !(fs instanceof FieldSource.ValuePointer)) {
        n.failAt(p, "must be a JSON pointer into the value");
      }
    }
    if (!fp.isEmpty() && !fpExclude.isEmpty()) {
      n.fail("fingerprint-exclude", "give either 'fingerprint' (fields to include) or 'fingerprint-exclude', not both");
    }
    String modeText = n.string("mode", "push");
    Mode mode = null;
    try {
      mode = Mode.valueOf(modeText.toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      n.fail("mode", "'" + modeText + "' is not one of push, pull");
    }
    String target = n.address("target", null, 1, "127.0.0.1:7000");
    if (mode == Mode.PUSH && target == null && !n.has("target")) {
      n.missing("target", "required in push mode: host:port of the business container's MessageHandler");
    }
    Duration handlerTimeout = n.duration("handler-timeout", DEFAULT_HANDLER_TIMEOUT);
    Duration ttl = n.duration("redis-ttl", DEFAULT_REDIS_TTL);
    Duration lease = n.duration("lease", DEFAULT_LEASE);
    if (lease.compareTo(Duration.ofSeconds(1)) < 0) {
      n.fail("lease", "must be at least 1s");
    }
    Duration early = n.duration("early-arrival-timeout", DEFAULT_EARLY_ARRIVAL_TIMEOUT);
    Duration earlyRetry = n.duration("early-arrival-retry", DEFAULT_EARLY_ARRIVAL_RETRY);
    String esc = n.string("escalation-topic", topics.isEmpty() ? null : topics.get(0) + ".escalate");
    if (esc != null && !TOPIC.matcher(esc).matches()) {
      n.fail("escalation-topic", "'" + esc + "' is not a valid Kafka topic name");
    } else if (esc != null && topics.contains(esc)) {
      n.fail("escalation-topic", "'" + esc + "' is also a source topic of this route");
    }
    String verdict = n.string("verdict-topic", null);
    if (verdict != null && !TOPIC.matcher(verdict).matches()) {
      n.fail("verdict-topic", "'" + verdict + "' is not a valid Kafka topic name");
    }
    int perPartition = n.intRange("max-in-flight-per-partition", DEFAULT_MAX_IN_FLIGHT_PER_PARTITION, 1, 100_000);
    int total = n.intRange("max-in-flight", DEFAULT_MAX_IN_FLIGHT, 1, 1_000_000);
    int uncommitted = n.intRange("max-uncommitted-per-partition", DEFAULT_MAX_UNCOMMITTED_FACTOR * perPartition, 1, 10_000_000);
    if (uncommitted < perPartition) {
      n.fail("max-uncommitted-per-partition", uncommitted + " is below max-in-flight-per-partition (" + perPartition + ")");
    }
    // the default shrinks with a small per-partition bound; an explicit value must fit in it
    int reorderWindow = n.intRange("reorder-window", Math.min(DEFAULT_REORDER_WINDOW, perPartition), 1, 64);
    if (reorderWindow > perPartition) {
      n.fail("reorder-window", reorderWindow + " exceeds max-in-flight-per-partition (" + perPartition + ")");
    }
    Node rn = n.optObject("retry");
    RetryConfig retry = new RetryConfig(
        rn.duration("initial-backoff", DEFAULT_INITIAL_BACKOFF),
        rn.duration("max-backoff", DEFAULT_MAX_BACKOFF),
        rn.intRange("max-attempts", DEFAULT_MAX_ATTEMPTS, 1, 1_000_000));
    if (retry.maxBackoff().compareTo(retry.initialBackoff()) < 0) {
      rn.fail("max-backoff", "must not be smaller than initial-backoff");
    }
    rn.done();
    TlsConfig targetTls = readTargetTls(n, mode, target);
    RouteConfig.LedgerContent ledgerContent = readLedgerContent(n);
    n.done();
    if (name == null || topics.isEmpty() || esc == null || mode == null) {
      return null;
    }
    return new RouteConfig(name, List.copyOf(topics), group, machine, entity, event, List.copyOf(key), List.copyOf(fp),
        List.copyOf(fpExclude), mode, target, handlerTimeout, ttl, lease, early, earlyRetry, esc, verdict, perPartition, total,
        uncommitted, reorderWindow, retry, targetTls, ledgerContent);
  }

  /** {@code response-max-bytes}, {@code store-payload}, {@code store-payload-max-bytes}. */
  private static RouteConfig.LedgerContent readLedgerContent(Node n) {
    RouteConfig.LedgerContent d = RouteConfig.LedgerContent.DEFAULT;
    // MEDIUMBLOB columns hold up to 16 MiB; a row that large is already a poor ledger row
    int response = n.intRange("response-max-bytes", d.responseMaxBytes(), 0, 16 * 1024 * 1024 - 1);
    String modeText = n.string("store-payload", d.storePayload().name().toLowerCase(java.util.Locale.ROOT));
    RouteConfig.StorePayload mode = d.storePayload();
    try {
      mode = RouteConfig.StorePayload.valueOf(modeText.toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      n.fail("store-payload", "'" + modeText + "' is not one of none, digest, full");
    }
    int payload = n.intRange("store-payload-max-bytes", d.storePayloadMaxBytes(), 1, 16 * 1024 * 1024 - 1);
    return new RouteConfig.LedgerContent(response, mode, payload);
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

  /**
   * The name among {@code known} that {@code key} is most likely a typo of (at most two edits,
   * a swap of neighbours counting as one; {@code _} and {@code -} alike), or {@code null}.
   */
  static String closest(String key, java.util.Collection<String> known) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    String k = key.toLowerCase(java.util.Locale.ROOT).replace('_', '-');
    for (String candidate : known) {
      int d = editDistance(k, candidate.toLowerCase(java.util.Locale.ROOT).replace('_', '-'));
      int limit = Math.min(k.length(), candidate.length()) <= 4 ? 1 : 2;
      if (d <= limit && (d < bestDistance || d == bestDistance && candidate.compareTo(best) < 0)) {
        best = candidate;
        bestDistance = d;
      }
    }
    return best;
  }

  /** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
  private static int editDistance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      d[i][0] = i;
    }
    for (int j = 0; j <= b.length(); j++) {
      d[0][j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2) && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }

  /**
   * A mapping being read, with its path; remembers which keys were consumed. A setting with a
   * problem records it in the shared {@link Problems} and reads as its default (or {@code null} /
   * empty), so that the rest of the file is still checked.
   */
  private static final class Node {
    private final JsonNode node;
    private final String path;
    private final Map<String, String> env;
    final Problems problems;
    /** A section that is missing or not a mapping: that is reported once, not each of its settings. */
    private final boolean broken;
    private final Set<String> used = new HashSet<>();
    /** Unknown keys already reported (as the likely typo of a required one). */
    private final Set<String> reported = new HashSet<>();
    /** {@code ${file:...}} are left as written: Kafka's config providers resolve them. */
    private boolean keepRefs;

    Node(JsonNode node, String path, Map<String, String> env, Problems problems) {
      this(node, path, env, problems, false);
    }

    private Node(JsonNode node, String path, Map<String, String> env, Problems problems, boolean broken) {
      this.node = node;
      this.path = path;
      this.env = env;
      this.problems = problems;
      this.broken = broken;
    }

    String path(String key) {
      return path.isEmpty() ? key : path + "." + key;
    }

    void fail(String key, String msg) {
      failAt(path(key), msg);
    }

    void failAt(String fullPath, String msg) {
      problems.add(fullPath + ": " + msg);
    }

    /**
     * A required setting is absent. When the mapping has an unknown key that is a likely typo of
     * it ({@code busines-key}), that key is the problem, reported as unknown with the suggestion.
     */
    void missing(String key, String msg) {
      if (broken) {
        return;
      }
      for (String k : keys()) {
        if (!k.equals(key) && !used.contains(k) && !reported.contains(k) && key.equals(closest(k, List.of(key)))) {
          reported.add(k);
          fail(k, "unknown setting (did you mean '" + key + "'?)");
          return;
        }
      }
      fail(key, msg);
    }

    /** The key is present with a value (not YAML null). */
    boolean has(String key) {
      return node != null && node.hasNonNull(key);
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

    /** Reports keys nobody read: a typo must not fall back to a default silently. */
    void done() {
      if (node == null) {
        return;
      }
      for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
        String k = it.next();
        if (!used.contains(k) && !reported.contains(k)) {
          String near = closest(k, used);
          fail(k, "unknown setting" + (near == null ? "" : " (did you mean '" + near + "'?)"));
        }
      }
    }

    private Node broken(String key) {
      return new Node(null, path(key), env, problems, true);
    }

    Node object(String key) {
      JsonNode v = get(key);
      if (v == null) {
        missing(key, "required section is missing");
        return broken(key);
      }
      if (!v.isObject()) {
        fail(key, "must be a mapping");
        return broken(key);
      }
      return new Node(v, path(key), env, problems);
    }

    Node optObject(String key) {
      JsonNode v = get(key);
      if (v != null && !v.isObject()) {
        fail(key, "must be a mapping");
        return broken(key);
      }
      return new Node(v, path(key), env, problems);
    }

    List<Node> list(String key) {
      JsonNode v = get(key);
      if (v == null) {
        return List.of();
      }
      if (!v.isArray()) {
        fail(key, "must be a list");
        return List.of();
      }
      List<Node> out = new ArrayList<>();
      for (int i = 0; i < v.size(); i++) {
        if (!v.get(i).isObject()) {
          failAt(path(key) + "[" + i + "]", "must be a mapping");
        } else {
          out.add(new Node(v.get(i), path(key) + "[" + i + "]", env, problems));
        }
      }
      return out;
    }

    /**
     * Expands {@code ${NAME}} and {@code ${file:/path}}; {@code null} (reported) when a variable
     * without default is not set or a file cannot be read.
     */
    private String expand(String s, String key) {
      Matcher mt = REF.matcher(s);
      StringBuilder sb = new StringBuilder();
      while (mt.find()) {
        String val;
        if (mt.group(1) != null) {
          if (keepRefs) {
            val = mt.group();
          } else {
            try {
              val = Secrets.readFile(mt.group(1));
            } catch (Secrets.Unreadable e) {
              fail(key, e.getMessage());
              return null;
            }
            problems.secrets.add(val);
          }
        } else {
          val = env.get(mt.group(2));
          if (val == null) {
            if (mt.group(3) == null) {
              fail(key, "environment variable " + mt.group(2) + " is not set (write ${" + mt.group(2) + ":-default} for a default)");
              return null;
            }
            val = mt.group(4);
          }
        }
        mt.appendReplacement(sb, Matcher.quoteReplacement(val));
      }
      mt.appendTail(sb);
      return sb.toString();
    }

    /** The value, or {@code def} when absent; {@code null} when it has a problem (reported). */
    private String value(String key, String def) {
      JsonNode v = get(key);
      if (v == null) {
        return def;
      }
      if (!v.isValueNode()) {
        fail(key, "must be a single value");
        return null;
      }
      return expand(v.asText(), key);
    }

    String string(String key, String def) {
      String s = value(key, def);
      return s == null ? def : s;
    }

    /** {@code null} (reported) when absent or blank. */
    String requiredString(String key) {
      JsonNode v = get(key);
      String s = value(key, null);
      if (v == null || s != null && s.isBlank()) {
        missing(key, "required");
        return null;
      }
      return s;
    }

    String identifier(String key, String def) {
      String s = def == null ? requiredString(key) : string(key, def);
      if (s != null && !IDENT.matcher(s).matches()) {
        fail(key, "'" + s + "' is not a plain identifier (" + IDENT.pattern() + ")");
      }
      return s;
    }

    /**
     * A PEM file of one or more CA certificates, checked now so that a wrong path or a key given
     * for a certificate fails start-up naming the setting; {@code null} when absent or bad (reported).
     */
    Path caFile(String key) {
      String s = string(key, null);
      if (s == null || s.isBlank()) {
        return null;
      }
      Path file = Path.of(s.trim());
      try (java.io.InputStream in = Files.newInputStream(file)) {
        if (java.security.cert.CertificateFactory.getInstance("X.509").generateCertificates(in).isEmpty()) {
          fail(key, "CA file " + file + " holds no PEM certificate");
          return null;
        }
        return file;
      } catch (java.nio.file.NoSuchFileException e) {
        fail(key, "CA file " + file + " does not exist");
      } catch (IOException e) {
        fail(key, "cannot read CA file " + file + ": " + e.getMessage());
      } catch (java.security.cert.CertificateException e) {
        fail(key, "CA file " + file + " is not a PEM certificate: " + e.getMessage());
      }
      return null;
    }

    String tablePrefix(String key, String def) {
      String s = string(key, def);
      if (!s.isEmpty() && !Pattern.matches("[A-Za-z][A-Za-z0-9_]{0,15}", s)) {
        fail(key, "'" + s + "' is not a valid table prefix (letters, digits, '_', at most 16)");
      }
      return s;
    }

    /**
     * {@code host:port} with a port from {@code minPort} (0: any free port, for a listener) to
     * 65535; {@code null} (reported) when it is not.
     */
    String hostPort(String key, String def, int minPort, String example) {
      String s = value(key, def);
      if (s == null || s.equals(def)) {
        return s;
      }
      String problem = hostPortProblem(s, minPort);
      if (problem != null) {
        fail(key, problem + ", e.g. " + example);
        return null;
      }
      return s;
    }

    /** {@link #hostPort}, or a Unix socket address {@code unix:///absolute/path}. */
    String address(String key, String def, int minPort, String example) {
      String s = value(key, def);
      if (s == null || s.equals(def)) {
        return s;
      }
      String problem = UnixSocket.is(s) ? UnixSocket.problem(s) : hostPortProblem(s, minPort);
      if (problem != null) {
        fail(key, problem + ", e.g. " + (UnixSocket.is(s) ? "unix:///run/onceguard/grpc.sock" : example));
        return null;
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
      fail(key, "'" + s + "' is not true or false");
      return def;
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
        fail(key, "'" + s + "' is not a whole number");
        return def;
      }
      if (v < min || v > max) {
        fail(key, v + " is out of range [" + min + ", " + max + "]");
        return def;
      }
      return v;
    }

    Duration duration(String key, Duration def) {
      String s = string(key, null);
      if (s == null) {
        return def;
      }
      Duration d = problems.attempt(() -> parseDuration(s, path(key)));
      return d == null ? def : d;
    }

    Map<String, String> stringMap(String key) {
      JsonNode v = get(key);
      if (v == null) {
        return Map.of();
      }
      if (!v.isObject()) {
        fail(key, "must be a mapping of strings");
        return Map.of();
      }
      Map<String, String> out = new LinkedHashMap<>();
      Node child = new Node(v, path(key), env, problems);
      child.keepRefs = v.has("config.providers");
      for (String k : child.keys()) {
        String s = child.value(k, "");
        if (s != null) {
          out.put(k, s);
        }
      }
      return Collections.unmodifiableMap(out);
    }

    List<String> stringList(String key, boolean required) {
      JsonNode v = get(key);
      if (v == null) {
        if (required) {
          missing(key, "required (a non-empty list)");
        }
        return List.of();
      }
      if (v.isValueNode()) {
        String s = expand(v.asText(), key);
        return s == null ? List.of() : List.of(s);
      }
      if (!v.isArray()) {
        fail(key, "must be a list");
        return List.of();
      }
      List<String> out = new ArrayList<>();
      for (int i = 0; i < v.size(); i++) {
        if (!v.get(i).isValueNode() || v.get(i).isNull()) {
          failAt(path(key) + "[" + i + "]", "must be a string");
          continue;
        }
        String s = expand(v.get(i).asText(), key + "[" + i + "]");
        if (s != null) {
          out.add(s);
        }
      }
      if (required && v.isEmpty()) {
        fail(key, "must not be empty");
      }
      return out;
    }

    /** {@code null} when absent or with a problem (reported). */
    FieldSource fieldSource(String key, boolean required) {
      JsonNode v = get(key);
      String s = value(key, null);
      if (v == null) {
        if (required) {
          missing(key, "required with a machine: where to find it ('/json/pointer', 'header:NAME', 'key' or 'const:VALUE')");
        }
        return null;
      }
      return s == null ? null : problems.attempt(() -> FieldSource.parse(s, key, path(key)));
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
      } else if (v.isArray() && v.isEmpty()) {
        fail(key, "must not be empty: one field source, or a list of them");
        out = List.of();
      } else {
        out = fieldSourceList(key, required);
      }
      rejectEmptyConstants(key, out);
      return out;
    }

    /** An empty {@code const:} in a key makes every record MISSING_FIELD: a start-up error instead. */
    void rejectEmptyConstants(String key, List<FieldSource> fields) {
      JsonNode v = get(key);
      for (int i = 0; i < fields.size(); i++) {
        if (fields.get(i) instanceof FieldSource.Constant c && c.value().isBlank()) {
          String p = v != null && v.isArray() ? path(key) + "[" + indexOf(v, c) + "]" : path(key);
          failAt(p, "an empty constant cannot identify anything (every record would be MISSING_FIELD)");
        }
      }
    }

    /** The position in the YAML list of an item (problems may have left others out of the parsed list). */
    private static int indexOf(JsonNode list, FieldSource.Constant c) {
      for (int i = 0; i < list.size(); i++) {
        JsonNode item = list.get(i);
        String spec = item.isTextual() ? item.asText() : item.path("from").asText();
        if (spec.equals(c.spec())) {
          return i;
        }
      }
      return 0;
    }

    /** Items are a spec string, or {@code {name: N, from: SPEC}}; items with a problem are left out (reported). */
    List<FieldSource> fieldSourceList(String key, boolean required) {
      JsonNode v = get(key);
      if (v == null) {
        if (required) {
          missing(key, "required: the business fields that identify one fact, e.g. [/order_id, /sku_id, /warehouse_id]");
        }
        return List.of();
      }
      if (!v.isArray()) {
        fail(key, "must be a list");
        return List.of();
      }
      List<FieldSource> out = new ArrayList<>();
      Set<String> names = new HashSet<>();
      for (int i = 0; i < v.size(); i++) {
        String p = path(key) + "[" + i + "]";
        JsonNode item = v.get(i);
        FieldSource fs = null;
        if (item.isTextual()) {
          String spec = expand(item.asText(), key + "[" + i + "]");
          fs = spec == null ? null : problems.attempt(() -> FieldSource.parse(spec, null, p));
        } else if (item.isObject()) {
          Node in = new Node(item, p, env, problems);
          String nm = in.requiredString("name");
          String from = in.requiredString("from");
          if (nm != null && from != null) {
            fs = problems.attempt(() -> FieldSource.parse(from, nm, p));
          }
          in.done();
        } else {
          failAt(p, "must be a field source string or {name, from}");
        }
        if (fs == null) {
          continue;
        }
        if (!names.add(fs.name())) {
          failAt(p, "duplicate field name '" + fs.name() + "' (give it a distinct 'name')");
          continue;
        }
        out.add(fs);
      }
      if (required && v.isEmpty()) {
        fail(key, "must not be empty");
      }
      return out;
    }
  }
}
