package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.SidecarConfig.ApiSecurity;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * The {@code sidecar} mapping (the process: identity, listeners, shutdown, logs) and
 * {@code sidecar.auth}, declared and read. Every setting has a default: the mapping is optional.
 */
public final class SidecarSettings {
  private SidecarSettings() {}

  /** Environment variable giving {@code sidecar.log-format}'s default; it also applies before the file is read. */
  public static final String LOG_FORMAT_ENV = "ONCEGUARD_LOG_FORMAT";
  public static final List<String> LOG_FORMATS = List.of("text", "json");

  static final Section SECTION = Section.of("sidecar",
      "The process: its identity, its listeners, shutdown and logs. Optional: every setting has a default.");
  public static final Setting<String> INSTANCE_ID = SECTION.add(Setting.of("instance-id", SettingType.text("1 to 100 characters"),
      "onceguard", "prefix of the claim owner id stored in the ledger (a random suffix makes it unique per process run)")
      .shownAs("`$HOSTNAME`, else `onceguard`"));
  public static final Setting<String> GRPC_LISTEN = SECTION.add(Setting.of("grpc-listen", SettingType.address(0, "127.0.0.1:7700"),
      "127.0.0.1:7700", "the gRPC server of the Guard, Deliveries and health services (loopback: it lives in the business pod), "
          + "or a Unix domain socket"));
  public static final Setting<String> METRICS_LISTEN = SECTION.add(Setting.of("metrics-listen", SettingType.hostPort(0, "0.0.0.0:9400"),
      null, "Prometheus `GET /metrics` (the metrics: [operations](operations.md#metrics-and-alerts))"));
  public static final Setting<String> ADMIN_LISTEN = SECTION.add(Setting.of("admin-listen", SettingType.hostPort(0, "0.0.0.0:9401"),
      null, "the admin HTTP listener: `GET /healthz`, `GET /readyz`, `GET /metrics` ([probes](operations.md#probes)); "
          + "kubelet probes the pod IP, so use `0.0.0.0:PORT`"));
  public static final Setting<Duration> SHUTDOWN_TIMEOUT = SECTION.add(Setting.of("shutdown-timeout", SettingType.DURATION,
      Duration.ofSeconds(30), "drain deadline on SIGTERM"));
  public static final Setting<Duration> COMMIT_INTERVAL = SECTION.add(Setting.of("commit-interval", SettingType.DURATION,
      Duration.ofSeconds(1), "how often completed offset prefixes are committed"));
  public static final Setting<String> LOG_FORMAT = SECTION.add(Setting.of("log-format", SettingType.oneOf(LOG_FORMATS, f -> f),
      "text", "`text`: one line per event; `json`: one JSON object per line, with a record's coordinates as fields "
          + "([JSON logs](operations.md#json-logs))").shownAs("`$" + LOG_FORMAT_ENV + "`, else `text`"));
  public static final Setting<Duration> RELOAD_INTERVAL = SECTION.add(Setting.of("reload-interval",
      SettingType.durationAtLeast(Duration.ofMillis(100)), Duration.ofSeconds(10),
      "how often certificate, key, CA and token files (also the routes') are checked for changes"));

  static final Section AUTH = Section.of("sidecar.auth",
      "Who may call the Guard and Deliveries services; health stays open to every caller (probes). "
          + "See [security](security.md#grpc-tls-mtls-unix-sockets-and-the-guard-api-token).");
  public static final Setting<String> TOKEN_FILE = AUTH.add(Setting.of("token-file", SettingType.text("path of a file"), null,
      "calls must send `authorization: Bearer <token>` with the file's token (read again when it changes); "
          + "else `UNAUTHENTICATED`").shownAs("none (no token)"));
  public static final Setting<List<String>> ALLOWED_CLIENTS = AUTH.add(Setting.of("allowed-clients", SettingType.STRINGS, List.of(),
      "with mTLS, the client certificate names (subject CN or a DNS/URI/IP SAN) allowed to call; "
          + "none: any certificate the client CA signed").shownAs("none"));

  /** The settings of the {@code sidecar} mapping, as {@link SidecarConfig} holds them. */
  record Process(String instanceId, String grpcListen, String metricsListen, String adminListen, Duration shutdownTimeout,
      Duration commitInterval, String logFormat, ApiSecurity security) {}

  static Process read(NodeReader root) {
    NodeReader sidecar = root.section(SECTION, false);
    String instanceId = sidecar.get(INSTANCE_ID, defaultInstanceId());
    if (instanceId.isBlank() || instanceId.length() > 100) {
      sidecar.fail(INSTANCE_ID, "must be 1 to 100 characters (it prefixes the claim owner id stored in the ledger)");
    }
    String listen = sidecar.get(GRPC_LISTEN);
    if (UnixSocket.is(listen) && !Files.isDirectory(UnixSocket.pathOf(listen).getParent())) {
      sidecar.fail(GRPC_LISTEN, "directory " + UnixSocket.pathOf(listen).getParent() + " of the socket does not exist");
    }
    String metrics = sidecar.get(METRICS_LISTEN);
    String admin = sidecar.get(ADMIN_LISTEN);
    if (admin != null && (admin.equals(listen) || admin.equals(metrics))) {
      sidecar.fail(ADMIN_LISTEN, "'" + admin + "' is also sidecar." + (admin.equals(listen) ? "grpc-listen" : "metrics-listen")
          + "; give it a port of its own (it serves /metrics too)");
    }
    Duration shutdown = sidecar.get(SHUTDOWN_TIMEOUT);
    Duration commitInterval = sidecar.get(COMMIT_INTERVAL);
    String logFormat = readLogFormat(sidecar);
    Duration reload = sidecar.get(RELOAD_INTERVAL);
    TlsConfig tls = TlsSettings.readServer(sidecar, listen);
    ApiSecurity security = readAuth(sidecar, tls, reload);
    sidecar.done();
    return new Process(instanceId, listen, metrics, admin, shutdown, commitInterval, logFormat, security);
  }

  /** {@code sidecar.log-format}, by default {@value #LOG_FORMAT_ENV} or {@code text}. */
  private static String readLogFormat(NodeReader sidecar) {
    if (sidecar.has(LOG_FORMAT)) {
      return sidecar.get(LOG_FORMAT);
    }
    sidecar.get(LOG_FORMAT); // marks the key as known
    String fromEnv = sidecar.source().env(LOG_FORMAT_ENV);
    if (fromEnv == null || fromEnv.isBlank()) {
      return LOG_FORMAT.defaultValue();
    }
    try {
      return LOG_FORMAT.type().parse(fromEnv.trim());
    } catch (SettingType.Invalid e) {
      sidecar.fail(LOG_FORMAT, e.getMessage().replaceFirst("' is not", "' (from " + LOG_FORMAT_ENV + ") is not"));
      return LOG_FORMAT.defaultValue();
    }
  }

  /** {@code sidecar.auth}, with the listener's TLS it relies on. */
  private static ApiSecurity readAuth(NodeReader sidecar, TlsConfig tls, Duration reload) {
    NodeReader a = sidecar.section(AUTH, false);
    Path token = null;
    String tokenFile = a.string(TOKEN_FILE);
    if (tokenFile != null) {
      token = Path.of(tokenFile);
      String problem = tokenFileProblem(token);
      if (problem != null) {
        a.fail(TOKEN_FILE, problem);
      }
    }
    List<String> allowed = a.stringList(ALLOWED_CLIENTS);
    if (!allowed.isEmpty() && (tls == null || tls.caFile() == null)) {
      a.fail(ALLOWED_CLIENTS, "client names are only known with mTLS: set sidecar.tls.client-ca-file too");
    }
    a.done();
    return new ApiSecurity(tls, token, List.copyOf(allowed), reload);
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

  private static String defaultInstanceId() {
    String h = System.getenv("HOSTNAME");
    return h == null || h.isBlank() ? INSTANCE_ID.defaultValue() : h;
  }
}
