package dev.onceguard.proxy.config;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The whole, validated sidecar configuration. Built by {@link ConfigReader}.
 *
 * @param metricsListen {@code host:port} of the Prometheus endpoint, or {@code null} for none
 * @param adminListen {@code host:port} of the admin HTTP endpoint ({@code /healthz}, {@code /readyz},
 *     {@code /metrics}), or {@code null} for none
 * @param grpcListen {@code host:port} of the gRPC server, or {@code unix:///absolute/path} for a Unix
 *     domain socket
 * @param security TLS of the gRPC server and who may call its Guard and Deliveries services
 */
public record SidecarConfig(
    String instanceId,
    String grpcListen,
    String metricsListen,
    String adminListen,
    Duration shutdownTimeout,
    Duration commitInterval,
    KafkaConfig kafka,
    MysqlConfig mysql,
    RedisConfig redis,
    Map<String, MachineConfig> machines,
    List<RouteConfig> routes,
    ApiSecurity security) {

  /**
   * @param properties extra Kafka client properties, applied to consumers and producers (after
   *     OnceGuard's own defaults, before the settings OnceGuard must own such as manual commits)
   * @param createTopics {@code run} creates missing escalation and verdict topics at start (never
   *     source topics) instead of refusing to start
   */
  public record KafkaConfig(String bootstrapServers, Map<String, String> properties, boolean createTopics) {
    /** Without topic creation. */
    public KafkaConfig(String bootstrapServers, Map<String, String> properties) {
      this(bootstrapServers, properties, false);
    }
  }

  public record MysqlConfig(
      String host,
      int port,
      String database,
      String user,
      String password,
      String tablePrefix,
      int poolSize,
      boolean migrateOnStart,
      Duration decisionRetention) {
    @Override
    public String toString() {
      // never print the password
      return "MysqlConfig[" + user + "@" + host + ":" + port + "/" + database + ", prefix=" + tablePrefix + ", pool=" + poolSize + "]";
    }
  }

  /**
   * @param uri {@code redis://host:port[/db]}; for a cluster, one or more seed nodes separated by
   *     commas; {@code null} disables L1
   * @param keyPrefix prepended to every key this sidecar writes
   * @param cluster a Redis Cluster (lettuce's cluster client, which routes each key to its node)
   */
  public record RedisConfig(String uri, Duration timeout, String keyPrefix, Duration breakerOpenFor, boolean cluster) {
    /** A standalone Redis. */
    public RedisConfig(String uri, Duration timeout, String keyPrefix, Duration breakerOpenFor) {
      this(uri, timeout, keyPrefix, breakerOpenFor, false);
    }

    public boolean enabled() {
      return uri != null;
    }

    /** The URIs in {@link #uri}, one per seed node. */
    public List<String> uris() {
      return uri == null ? List.of() : Arrays.stream(uri.split(",")).map(String::trim).filter(x -> !x.isEmpty()).toList();
    }
  }

  /**
   * How the sidecar's gRPC server is secured. Health stays open to every caller (probes).
   *
   * @param tls TLS on {@code grpc-listen} ({@code sidecar.tls}), or {@code null} for plaintext
   * @param tokenFile file holding the bearer token that Guard and Deliveries callers must send
   *     ({@code sidecar.auth.token-file}), or {@code null}
   * @param allowedClients with mTLS, client certificate names (subject CN or a DNS/URI/IP SAN)
   *     allowed to call Guard and Deliveries ({@code sidecar.auth.allowed-clients}); empty: any
   *     certificate the client CA signed
   * @param reloadInterval how often certificate, key, CA and token files (also the routes') are
   *     checked for changes ({@code sidecar.reload-interval})
   */
  public record ApiSecurity(TlsConfig tls, java.nio.file.Path tokenFile, List<String> allowedClients, Duration reloadInterval) {
    /** Plaintext, no authentication: the default. */
    public static ApiSecurity none() {
      return new ApiSecurity(null, null, List.of(), ConfigReader.DEFAULT_RELOAD_INTERVAL);
    }

    /** True when Guard and Deliveries calls must authenticate (a token, or an allowed client name). */
    public boolean authenticates() {
      return tokenFile != null || !allowedClients.isEmpty();
    }
  }
}
