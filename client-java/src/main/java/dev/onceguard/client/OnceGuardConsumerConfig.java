package dev.onceguard.client;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Range;
import org.apache.kafka.common.config.ConfigDef.Type;
import org.apache.kafka.common.config.ConfigException;

/**
 * Settings of {@link OnceGuardConsumer}: every key with its type, default, validator and doc in
 * one definition, like Kafka's {@link ConsumerConfig}.
 *
 * <p>The consumer reads the {@code onceguard.*} keys below and the Kafka keys it can honour
 * ({@code enable.auto.commit}, {@code max.poll.records}, {@code client.id},
 * {@code key.deserializer}, {@code value.deserializer}, {@code reconnect.backoff.ms},
 * {@code reconnect.backoff.max.ms}). Every other key, {@code bootstrap.servers} and
 * {@code group.id} included, is ignored, so the same {@code Properties} can configure a
 * {@code KafkaConsumer} and an {@code OnceGuardConsumer}: the route's sidecar owns the
 * brokers, the consumer group and the offsets.
 */
public final class OnceGuardConsumerConfig {
  private OnceGuardConsumerConfig() {}

  /** {@code onceguard.target}: the sidecar's gRPC address. */
  public static final String TARGET_CONFIG = "onceguard.target";
  static final String TARGET_DOC =
      "gRPC target of the sidecar, e.g. 127.0.0.1:7700 or dns:///onceguard:7700. The consumer"
          + " creates and owns a channel to it: plaintext (the sidecar runs in the same pod), or TLS and a"
          + " bearer token with onceguard.tls.* and onceguard.token-file."
          + " Required unless a Channel is passed to the constructor.";

  /** {@code onceguard.route}: the route whose accepted records this consumer receives. */
  public static final String ROUTE_CONFIG = "onceguard.route";
  static final String ROUTE_DOC =
      "Name of the sidecar route to subscribe to; it must be configured in pull mode. The route,"
          + " not subscribe(), decides which topics are consumed.";

  /** {@code onceguard.window}: maximum unacknowledged deliveries on the stream. */
  public static final String WINDOW_CONFIG = "onceguard.window";
  static final String WINDOW_DOC =
      "Maximum deliveries the sidecar sends before they are acknowledged (committed, rejected or"
          + " retried); 0 uses the route's default. Records returned by poll() and not yet"
          + " committed count against it, so with enable.auto.commit=false poll() returns nothing"
          + " once this many records are uncommitted.";
  /** Default of {@link #WINDOW_CONFIG}: the route's default. */
  public static final int DEFAULT_WINDOW = 0;

  /**
   * {@code onceguard.escalation.listener}: an {@link EscalationListener} instance, or its class
   * (a {@code Class} or a class name, with a public no-arg constructor). Not part of
   * {@link #configDef()}, whose types cannot hold an instance. Unset: no escalation notices.
   */
  public static final String ESCALATION_LISTENER_CONFIG = "onceguard.escalation.listener";

  /** {@code onceguard.tls.enabled}: TLS to the sidecar, trusting the JVM's default trust store unless a CA file is set. */
  public static final String TLS_ENABLED_CONFIG = "onceguard.tls.enabled";
  /** {@code onceguard.tls.ca-file}: PEM CA certificates the sidecar's certificate must chain to; implies TLS. */
  public static final String TLS_CA_FILE_CONFIG = "onceguard.tls.ca-file";
  /** {@code onceguard.tls.cert-file}: PEM client certificate chain for mTLS; implies TLS. */
  public static final String TLS_CERT_FILE_CONFIG = "onceguard.tls.cert-file";
  /** {@code onceguard.tls.key-file}: the PKCS#8 PEM key of {@link #TLS_CERT_FILE_CONFIG}. */
  public static final String TLS_KEY_FILE_CONFIG = "onceguard.tls.key-file";
  /** {@code onceguard.tls.authority}: the name expected in the sidecar's certificate instead of the target's host. */
  public static final String TLS_AUTHORITY_CONFIG = "onceguard.tls.authority";
  /** {@code onceguard.token-file}: file with the bearer token of the sidecar's {@code sidecar.auth.token-file}. */
  public static final String TOKEN_FILE_CONFIG = "onceguard.token-file";

  /** Default of {@code enable.auto.commit}, as in Kafka. */
  public static final boolean DEFAULT_ENABLE_AUTO_COMMIT = true;
  /** Default of {@code max.poll.records}, as in Kafka. */
  public static final int DEFAULT_MAX_POLL_RECORDS = 500;
  /** Default of {@code reconnect.backoff.ms}: first wait before resubscribing. */
  public static final long DEFAULT_RECONNECT_BACKOFF_MS = 50L;
  /** Default of {@code reconnect.backoff.max.ms}: longest wait before resubscribing. */
  public static final long DEFAULT_RECONNECT_BACKOFF_MAX_MS = 1000L;

  private static final ConfigDef CONFIG =
      new ConfigDef()
          .define(TARGET_CONFIG, Type.STRING, null, OnceGuardConsumerConfig::nullOrNonBlank, Importance.HIGH, TARGET_DOC)
          .define(ROUTE_CONFIG, Type.STRING, ConfigDef.NO_DEFAULT_VALUE, OnceGuardConsumerConfig::nonBlank, Importance.HIGH, ROUTE_DOC)
          .define(WINDOW_CONFIG, Type.INT, DEFAULT_WINDOW, Range.atLeast(0), Importance.MEDIUM, WINDOW_DOC)
          .define(TLS_ENABLED_CONFIG, Type.BOOLEAN, false, Importance.MEDIUM,
              "TLS on the consumer's own channel to the sidecar (set when sidecar.tls is). Without"
                  + " onceguard.tls.ca-file the JVM's default trust store decides.")
          .define(TLS_CA_FILE_CONFIG, Type.STRING, null, OnceGuardConsumerConfig::nullOrNonBlank, Importance.MEDIUM,
              "PEM file of the CA certificates the sidecar's certificate must chain to. Implies TLS.")
          .define(TLS_CERT_FILE_CONFIG, Type.STRING, null, OnceGuardConsumerConfig::nullOrNonBlank, Importance.MEDIUM,
              "PEM client certificate chain, for a sidecar that requires client certificates"
                  + " (sidecar.tls.client-ca-file). Needs onceguard.tls.key-file; implies TLS.")
          .define(TLS_KEY_FILE_CONFIG, Type.STRING, null, OnceGuardConsumerConfig::nullOrNonBlank, Importance.MEDIUM,
              "Unencrypted PKCS#8 PEM private key of onceguard.tls.cert-file.")
          .define(TLS_AUTHORITY_CONFIG, Type.STRING, null, OnceGuardConsumerConfig::nullOrNonBlank, Importance.LOW,
              "Name the sidecar's certificate must carry, instead of the target's host.")
          .define(TOKEN_FILE_CONFIG, Type.STRING, null, OnceGuardConsumerConfig::nullOrNonBlank, Importance.MEDIUM,
              "File holding the bearer token the sidecar requires (sidecar.auth.token-file); sent on"
                  + " every call, read again when the file changes.")
          .define(
              ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
              Type.BOOLEAN,
              DEFAULT_ENABLE_AUTO_COMMIT,
              Importance.MEDIUM,
              "If true, every poll() first commits (acknowledges OK) the records returned by the"
                  + " previous polls, and close() and unsubscribe() commit them too, as KafkaConsumer"
                  + " does. auto.commit.interval.ms is ignored: holding acknowledgements back would"
                  + " hold the window closed.")
          .define(
              ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
              Type.INT,
              DEFAULT_MAX_POLL_RECORDS,
              Range.atLeast(1),
              Importance.MEDIUM,
              "Maximum records one poll() returns.")
          .define(
              ConsumerConfig.CLIENT_ID_CONFIG,
              Type.STRING,
              "",
              Importance.LOW,
              "Subscriber id sent to the sidecar, for its logs. Empty: consumer-<route>-<n>.")
          .define(
              ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
              Type.CLASS,
              null,
              Importance.HIGH,
              "Deserializer class for keys, used when none is passed to the constructor.")
          .define(
              ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
              Type.CLASS,
              null,
              Importance.HIGH,
              "Deserializer class for values, used when none is passed to the constructor.")
          .define(
              ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG,
              Type.LONG,
              DEFAULT_RECONNECT_BACKOFF_MS,
              Range.atLeast(0L),
              Importance.LOW,
              "First wait before resubscribing after the stream to the sidecar ended; doubles per"
                  + " failed attempt.")
          .define(
              ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG,
              Type.LONG,
              DEFAULT_RECONNECT_BACKOFF_MAX_MS,
              Range.atLeast(0L),
              Importance.LOW,
              "Longest wait before resubscribing.");

  /**
   * The definition of every key the consumer reads, e.g. for {@link ConfigDef#toHtmlTable()}.
   *
   * @return a fresh copy; changing it has no effect on consumers
   */
  public static ConfigDef configDef() {
    return new ConfigDef(CONFIG);
  }

  private static void nonBlank(String name, Object value) {
    if (value == null || value.toString().isBlank()) {
      throw new ConfigException(name, value, "must not be empty");
    }
  }

  private static void nullOrNonBlank(String name, Object value) {
    if (value != null && value.toString().isBlank()) {
      throw new ConfigException(name, value, "must not be empty when set");
    }
  }
}
