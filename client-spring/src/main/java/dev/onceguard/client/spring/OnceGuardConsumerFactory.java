package dev.onceguard.client.spring;

import dev.onceguard.client.EscalationListener;
import dev.onceguard.client.OnceGuardConsumer;
import dev.onceguard.client.OnceGuardConsumerConfig;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Deserializer;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.ConsumerPostProcessor;
import org.springframework.kafka.listener.ConsumerAwareRecordRecoverer;

/**
 * A Spring Kafka {@link ConsumerFactory} that creates {@link OnceGuardConsumer}s: a Spring Kafka
 * application receives the records its OnceGuard sidecar accepted by declaring this bean instead
 * of a {@code DefaultKafkaConsumerFactory}; {@code @KafkaListener} methods and container
 * factories stay as they are.
 *
 * <pre>{@code
 * @Bean
 * ConsumerFactory<String, String> consumerFactory() {
 *   return new OnceGuardConsumerFactory<>(Map.<String, Object>of(
 *       "onceguard.target", "localhost:7700",   // the sidecar
 *       "onceguard.route", "orders-shipping"),  // its pull-mode route
 *       new StringDeserializer(), new StringDeserializer());
 * }
 * }</pre>
 *
 * <p>What the container's settings mean here: every {@code AckMode} commits through
 * {@code commitSync}, which acknowledges OK the records it covers, so BATCH, RECORD, TIME,
 * COUNT, MANUAL and MANUAL_IMMEDIATE decide when records are acknowledged, as with Kafka; what is
 * not acknowledged when a consumer closes is redelivered by the sidecar (flagged
 * {@code onceguard-redelivery: true}). The {@code DefaultErrorHandler}'s retries work: it seeks
 * back to the failed record, which the next poll returns again; when its retries are exhausted
 * its recoverer runs and the record is committed, as with Kafka (use
 * {@link #rejectingRecoverer()} to escalate it instead). {@code groupId} is ignored (the route's
 * group is the sidecar's); {@code concurrency} opens one stream per consumer, all on the route.
 * Container property overrides ({@code enable.auto.commit}, {@code client.id}, ...) are applied
 * per consumer.
 *
 * <p>Runs on spring-kafka 3.3 (kafka-clients 3.x) and 4.x. Thread-safe.
 *
 * @param <K> key type
 * @param <V> value type
 */
public class OnceGuardConsumerFactory<K, V> implements ConsumerFactory<K, V> {
  private final Map<String, Object> configs;
  private final Supplier<Deserializer<K>> keyDeserializer;
  private final Supplier<Deserializer<V>> valueDeserializer;
  private final List<Listener<K, V>> listeners = Collections.synchronizedList(new ArrayList<>());
  private final List<ConsumerPostProcessor<K, V>> postProcessors = Collections.synchronizedList(new ArrayList<>());
  private volatile EscalationListener escalationListener;

  /**
   * A factory whose consumers create their deserializers from {@code key.deserializer} and
   * {@code value.deserializer}.
   *
   * @param configs see {@link OnceGuardConsumerConfig}; {@code onceguard.target} and
   *     {@code onceguard.route} are required
   */
  public OnceGuardConsumerFactory(Map<String, Object> configs) {
    this(configs, (Supplier<Deserializer<K>>) () -> null, () -> null);
  }

  /**
   * A factory whose consumers share these deserializers (as {@code DefaultKafkaConsumerFactory}
   * does with instances: they must be thread-safe when the container's concurrency is above 1).
   *
   * @param configs see {@link OnceGuardConsumerConfig}
   * @param keyDeserializer key deserializer, or {@code null} to use {@code key.deserializer}
   * @param valueDeserializer value deserializer, or {@code null} to use {@code value.deserializer}
   */
  public OnceGuardConsumerFactory(
      Map<String, Object> configs, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    this(configs, () -> keyDeserializer, () -> valueDeserializer);
  }

  /**
   * A factory that asks the suppliers for the deserializers of each consumer.
   *
   * @param configs see {@link OnceGuardConsumerConfig}
   * @param keyDeserializer supplies a key deserializer per consumer ({@code null}: from config)
   * @param valueDeserializer supplies a value deserializer per consumer ({@code null}: from config)
   */
  public OnceGuardConsumerFactory(
      Map<String, Object> configs, Supplier<Deserializer<K>> keyDeserializer, Supplier<Deserializer<V>> valueDeserializer) {
    if (configs == null || keyDeserializer == null || valueDeserializer == null) {
      throw new IllegalArgumentException("configs and deserializer suppliers must not be null");
    }
    this.configs = new HashMap<>(configs);
    this.keyDeserializer = keyDeserializer;
    this.valueDeserializer = valueDeserializer;
  }

  /**
   * Tells {@code listener} about each record of the route that the sidecar escalated, on the
   * consumer thread of whichever consumer received the notice (see {@link EscalationListener}).
   * Applies to consumers created afterwards: set it before the containers start.
   *
   * @param listener the listener, or {@code null} for none
   */
  public void setEscalationListener(EscalationListener listener) {
    this.escalationListener = listener;
  }

  /**
   * A recoverer for Spring Kafka's {@code DefaultErrorHandler} that answers REJECT for a record
   * whose retries are exhausted: the sidecar rolls the entity back and escalates it as
   * {@code BUSINESS_REJECTED} with the exception's message, instead of the record being committed.
   * Use it as {@code new DefaultErrorHandler(OnceGuardConsumerFactory.rejectingRecoverer(), backOff)}.
   *
   * @return the recoverer
   */
  public static ConsumerAwareRecordRecoverer rejectingRecoverer() {
    return (record, consumer, exception) -> {
      if (!(consumer instanceof OnceGuardConsumer<?, ?> og)) {
        throw new IllegalStateException("rejectingRecoverer needs an OnceGuardConsumer, got "
            + (consumer == null ? "null" : consumer.getClass().getName()));
      }
      String reason = exception == null ? "rejected by the listener" : String.valueOf(
          exception.getCause() != null ? exception.getCause().getMessage() : exception.getMessage());
      rejectRaw(og, record, reason);
    };
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static void rejectRaw(OnceGuardConsumer og, ConsumerRecord record, String reason) {
    og.reject(record, reason);
  }

  @Override
  public Consumer<K, V> createConsumer(String groupId, String clientIdPrefix, String clientIdSuffix, Properties properties) {
    Map<String, Object> c = new HashMap<>(configs);
    if (properties != null) {
      for (String name : properties.stringPropertyNames()) {
        c.put(name, properties.getProperty(name));
      }
      properties.forEach((k, v) -> {
        if (k instanceof String key && !(v instanceof String)) {
          c.put(key, v);
        }
      });
    }
    if (groupId != null) {
      c.put(ConsumerConfig.GROUP_ID_CONFIG, groupId); // ignored by the consumer; kept for the record
    }
    String clientId = clientId(c, clientIdPrefix, clientIdSuffix);
    if (clientId != null) {
      c.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
    }
    OnceGuardConsumer<K, V> created = new OnceGuardConsumer<>(c, keyDeserializer.get(), valueDeserializer.get());
    EscalationListener l = escalationListener;
    if (l != null) {
      created.setEscalationListener(l);
    }
    Consumer<K, V> consumer = created;
    for (ConsumerPostProcessor<K, V> pp : List.copyOf(postProcessors)) {
      consumer = pp.apply(consumer);
    }
    String id = clientId != null ? clientId : "onceguard-" + System.identityHashCode(created);
    for (Listener<K, V> listener : List.copyOf(listeners)) {
      listener.consumerAdded(id, consumer);
    }
    return consumer;
  }

  private static String clientId(Map<String, Object> c, String prefix, String suffix) {
    Object configured = c.get(ConsumerConfig.CLIENT_ID_CONFIG);
    String base = prefix != null && !prefix.isEmpty() ? prefix : configured == null ? null : configured.toString();
    if (base == null || base.isEmpty()) {
      return null;
    }
    return suffix == null ? base : base + suffix;
  }

  /** {@code enable.auto.commit} as configured, {@code true} if unset (the Kafka default). */
  @Override
  public boolean isAutoCommit() {
    Object v = configs.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
    return v == null ? OnceGuardConsumerConfig.DEFAULT_ENABLE_AUTO_COMMIT : Boolean.parseBoolean(v.toString());
  }

  @Override
  public Map<String, Object> getConfigurationProperties() {
    return Collections.unmodifiableMap(configs);
  }

  @Override
  public Deserializer<K> getKeyDeserializer() {
    return keyDeserializer.get();
  }

  @Override
  public Deserializer<V> getValueDeserializer() {
    return valueDeserializer.get();
  }

  @Override
  public void addListener(Listener<K, V> listener) {
    listeners.add(listener);
  }

  @Override
  public void addListener(int index, Listener<K, V> listener) {
    listeners.add(index, listener);
  }

  @Override
  public boolean removeListener(Listener<K, V> listener) {
    return listeners.remove(listener);
  }

  @Override
  public List<Listener<K, V>> getListeners() {
    return List.copyOf(listeners);
  }

  @Override
  public void addPostProcessor(ConsumerPostProcessor<K, V> postProcessor) {
    postProcessors.add(postProcessor);
  }

  @Override
  public boolean removePostProcessor(ConsumerPostProcessor<K, V> postProcessor) {
    return postProcessors.remove(postProcessor);
  }

  @Override
  public List<ConsumerPostProcessor<K, V>> getPostProcessors() {
    return List.copyOf(postProcessors);
  }
}
