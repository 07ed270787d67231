package dev.onceguard.client.internal;

import dev.onceguard.client.EscalationListener;
import dev.onceguard.client.OnceGuardConsumerConfig;
import dev.onceguard.client.SidecarSecurity;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.config.ConfigException;

/**
 * The consumer's configuration, parsed and validated once.
 *
 * @param target sidecar gRPC target, or {@code null} when a channel is given
 * @param route route to subscribe to
 * @param window maximum unacknowledged deliveries, 0 for the route's default
 * @param subscriber subscriber id sent to the sidecar
 * @param autoCommit whether poll/close/unsubscribe commit what earlier polls returned
 * @param maxPollRecords maximum records per poll
 * @param reconnectBackoffMs first wait before resubscribing
 * @param reconnectBackoffMaxMs longest wait before resubscribing
 * @param keyDeserializerClass from {@code key.deserializer}, or {@code null}
 * @param valueDeserializerClass from {@code value.deserializer}, or {@code null}
 * @param originals every given key and value, for {@code Deserializer.configure}
 * @param escalationListener from {@code onceguard.escalation.listener}, or {@code null}
 * @param security TLS and token of the channel this consumer opens ({@code onceguard.tls.*},
 *     {@code onceguard.token-file})
 */
public record ConsumerSettings(
    String target,
    String route,
    int window,
    String subscriber,
    boolean autoCommit,
    int maxPollRecords,
    long reconnectBackoffMs,
    long reconnectBackoffMaxMs,
    Class<?> keyDeserializerClass,
    Class<?> valueDeserializerClass,
    Map<String, Object> originals,
    EscalationListener escalationListener,
    SidecarSecurity security) {

  private static final AtomicInteger CONSUMER_SEQUENCE = new AtomicInteger();

  /**
   * Parses and validates a configuration.
   *
   * @param configs keys of {@link OnceGuardConsumerConfig}; other keys are ignored
   * @param channelGiven whether the caller passes its own channel (then no target is needed)
   * @return the settings
   * @throws ConfigException naming the key that is missing or invalid
   */
  public static ConsumerSettings parse(Map<String, ?> configs, boolean channelGiven) {
    if (configs == null) {
      throw new ConfigException("consumer configuration must not be null");
    }
    Map<String, Object> parsed = OnceGuardConsumerConfig.configDef().parse(configs);
    String target = (String) parsed.get(OnceGuardConsumerConfig.TARGET_CONFIG);
    if (target == null && !channelGiven) {
      throw new ConfigException(
          OnceGuardConsumerConfig.TARGET_CONFIG, null, "required unless a Channel is passed to the constructor");
    }
    long backoff = (Long) parsed.get(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG);
    long backoffMax = (Long) parsed.get(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG);
    if (backoffMax < backoff) {
      throw new ConfigException(
          ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG,
          backoffMax,
          "must not be less than " + ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG + " (" + backoff + ")");
    }
    String route = ((String) parsed.get(OnceGuardConsumerConfig.ROUTE_CONFIG)).strip();
    String clientId = (String) parsed.get(ConsumerConfig.CLIENT_ID_CONFIG);
    String subscriber =
        clientId.isBlank() ? "consumer-" + route + "-" + CONSUMER_SEQUENCE.incrementAndGet() : clientId;
    return new ConsumerSettings(
        target == null ? null : target.strip(),
        route,
        (Integer) parsed.get(OnceGuardConsumerConfig.WINDOW_CONFIG),
        subscriber,
        (Boolean) parsed.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG),
        (Integer) parsed.get(ConsumerConfig.MAX_POLL_RECORDS_CONFIG),
        backoff,
        backoffMax,
        (Class<?>) parsed.get(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG),
        (Class<?>) parsed.get(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG),
        Map.copyOf(configs.entrySet().stream()
            .filter(e -> e.getValue() != null)
            .collect(HashMap<String, Object>::new, (m, e) -> m.put(e.getKey(), e.getValue()), Map::putAll)),
        escalationListener(configs.get(OnceGuardConsumerConfig.ESCALATION_LISTENER_CONFIG)),
        security(parsed));
  }

  private static SidecarSecurity security(Map<String, Object> parsed) {
    String ca = (String) parsed.get(OnceGuardConsumerConfig.TLS_CA_FILE_CONFIG);
    String cert = (String) parsed.get(OnceGuardConsumerConfig.TLS_CERT_FILE_CONFIG);
    String key = (String) parsed.get(OnceGuardConsumerConfig.TLS_KEY_FILE_CONFIG);
    String authority = (String) parsed.get(OnceGuardConsumerConfig.TLS_AUTHORITY_CONFIG);
    String token = (String) parsed.get(OnceGuardConsumerConfig.TOKEN_FILE_CONFIG);
    if ((cert == null) != (key == null)) {
      String missing = cert == null ? OnceGuardConsumerConfig.TLS_CERT_FILE_CONFIG : OnceGuardConsumerConfig.TLS_KEY_FILE_CONFIG;
      throw new ConfigException(missing, null, "required with " + (cert == null
          ? OnceGuardConsumerConfig.TLS_KEY_FILE_CONFIG : OnceGuardConsumerConfig.TLS_CERT_FILE_CONFIG));
    }
    boolean tls = (Boolean) parsed.get(OnceGuardConsumerConfig.TLS_ENABLED_CONFIG) || ca != null || cert != null;
    if (!tls && authority != null) {
      throw new ConfigException(OnceGuardConsumerConfig.TLS_AUTHORITY_CONFIG, authority, "only applies with TLS");
    }
    return new SidecarSecurity(tls, path(ca), path(cert), path(key), authority, path(token), null);
  }

  private static Path path(String s) {
    return s == null ? null : Path.of(s.strip());
  }

  private static EscalationListener escalationListener(Object value) {
    String key = OnceGuardConsumerConfig.ESCALATION_LISTENER_CONFIG;
    if (value == null || value instanceof EscalationListener) {
      return (EscalationListener) value;
    }
    Class<?> type;
    if (value instanceof Class<?> c) {
      type = c;
    } else if (value instanceof String name && !name.isBlank()) {
      try {
        type = Class.forName(name.strip(), true, Thread.currentThread().getContextClassLoader() != null
            ? Thread.currentThread().getContextClassLoader() : ConsumerSettings.class.getClassLoader());
      } catch (ClassNotFoundException e) {
        throw new ConfigException(key, value, "class not found");
      }
    } else {
      throw new ConfigException(key, value, "must be an EscalationListener, its Class or its class name");
    }
    if (!EscalationListener.class.isAssignableFrom(type)) {
      throw new ConfigException(key, type.getName(), "is not a " + EscalationListener.class.getName());
    }
    try {
      return (EscalationListener) type.getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new ConfigException(key, type.getName(), "cannot be instantiated with a public no-arg constructor: " + e);
    }
  }

  /**
   * Copies the string-keyed entries of {@code Properties}, as {@code KafkaConsumer} does.
   *
   * @param properties consumer properties
   * @return a map view of them
   */
  public static Map<String, Object> toMap(Properties properties) {
    if (properties == null) {
      throw new ConfigException("consumer properties must not be null");
    }
    Map<String, Object> map = new HashMap<>();
    for (Map.Entry<Object, Object> e : properties.entrySet()) {
      if (e.getKey() instanceof String) {
        map.put((String) e.getKey(), e.getValue());
      }
    }
    for (String name : properties.stringPropertyNames()) {
      map.putIfAbsent(name, properties.getProperty(name)); // defaults of a Properties chain
    }
    return map;
  }
}
