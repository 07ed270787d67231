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
 * @param logFormat {@code text} (one line per event) or {@code json} (one JSON object per line)
 * @param tracing the {@code tracing} section; {@link TracingConfig#OFF} when absent
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
    String logFormat,
    TracingConfig tracing,
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

    @Override
    public String toString() {
      // property values may be secrets (sasl.jaas.config, ssl.keystore.password): names only
      return "KafkaConfig[" + bootstrapServers + ", properties " + properties.keySet() + (createTopics ? ", create-topics" : "") + "]";
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
      Duration decisionRetention,
      MysqlTls tls) {
    /** Without TLS ({@code mysql.ssl-mode: disable}). */
    public MysqlConfig(String host, int port, String database, String user, String password, String tablePrefix, int poolSize,
        boolean migrateOnStart, Duration decisionRetention) {
      this(host, port, database, user, password, tablePrefix, poolSize, migrateOnStart, decisionRetention, MysqlTls.DISABLED);
    }

    @Override
    public String toString() {
      // never print the password
      return "MysqlConfig[" + user + "@" + host + ":" + port + "/" + database + ", prefix=" + tablePrefix + ", pool=" + poolSize
          + (tls.mode() == SslMode.DISABLE ? "" : ", ssl-mode=" + tls.mode().setting()) + "]";
    }
  }

  /** {@code mysql.ssl-mode}: how the connection to MySQL is encrypted and how much of the server is checked. */
  public enum SslMode {
    /** Plaintext. */
    DISABLE("disable"),
    /** Encrypted; the server's certificate is not checked (protects against eavesdropping only). */
    REQUIRE("require"),
    /** Encrypted; the server's certificate must chain to the CA, whatever host name it names. */
    VERIFY_CA("verify-ca"),
    /** Encrypted; the certificate must chain to the CA and name {@code mysql.host}. */
    VERIFY_FULL("verify-full");

    private final String setting;

    SslMode(String setting) {
      this.setting = setting;
    }

    /** The value as written in the YAML. */
    public String setting() {
      return setting;
    }

    public boolean verifies() {
      return this == VERIFY_CA || this == VERIFY_FULL;
    }
  }

  /**
   * TLS to MySQL.
   *
   * @param ca {@code mysql.ssl-ca}: PEM file of the CA (or CAs) that signs the server's certificate;
   *     {@code null}: the JVM's default trust store
   * @param keystore {@code mysql.ssl-keystore}: PKCS12 file with the client's key and certificate,
   *     for users that {@code REQUIRE X509}; {@code null}: none
   * @param keystorePassword {@code mysql.ssl-keystore-password}
   */
  public record MysqlTls(SslMode mode, java.nio.file.Path ca, java.nio.file.Path keystore, String keystorePassword) {
    public static final MysqlTls DISABLED = new MysqlTls(SslMode.DISABLE, null);

    /** Without a client certificate. */
    public MysqlTls(SslMode mode, java.nio.file.Path ca) {
      this(mode, ca, null, null);
    }

    @Override
    public String toString() {
      // never print the key store's password
      return "MysqlTls[" + mode.setting() + (ca == null ? "" : ", ca " + ca) + (keystore == null ? "" : ", keystore " + keystore) + "]";
    }
  }

  /**
   * @param uri {@code redis://host:port[/db]}; for a cluster, one or more seed nodes separated by
   *     commas; {@code null} disables L1
   * @param keyPrefix prepended to every key this sidecar writes
   * @param cluster a Redis Cluster (lettuce's cluster client, which routes each key to its node)
   * @param sslCa {@code redis.ssl-ca}: PEM file of the CA that signs the servers' certificates, for
   *     {@code rediss://} URIs; {@code null}: the JVM's default trust store
   */
  public record RedisConfig(String uri, Duration timeout, String keyPrefix, Duration breakerOpenFor, boolean cluster,
      java.nio.file.Path sslCa) {
    /** A standalone Redis. */
    public RedisConfig(String uri, Duration timeout, String keyPrefix, Duration breakerOpenFor) {
      this(uri, timeout, keyPrefix, breakerOpenFor, false);
    }

    /** Without a CA of its own ({@code rediss://} URIs are checked against the JVM's default trust store). */
    public RedisConfig(String uri, Duration timeout, String keyPrefix, Duration breakerOpenFor, boolean cluster) {
      this(uri, timeout, keyPrefix, breakerOpenFor, cluster, null);
    }

    @Override
    public String toString() {
      // the URI may hold a password
      return "RedisConfig[" + uris().stream().map(Secrets::withoutUserInfo).toList() + ", prefix=" + keyPrefix
          + (cluster ? ", cluster" : "") + (sslCa == null ? "" : ", ssl-ca=" + sslCa) + "]";
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
    /** True when Guard and Deliveries calls must authenticate (a token, or an allowed client name). */
    public boolean authenticates() {
      return tokenFile != null || !allowedClients.isEmpty();
    }
  }
}
