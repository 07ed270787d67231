package dev.onceguard.client.internal;

import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.KafkaRecord;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * Turns a {@link Delivery} into the {@link ConsumerRecord} a {@code KafkaConsumer} would have
 * returned for the same Kafka record, plus the the delivery headers of {@link dev.onceguard.wire.Headers}.
 *
 * <p>Thread-safe if the deserializers are (the ones shipped with Kafka are stateless).
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class RecordConverter<K, V> {
  private final Deserializer<K> keyDeserializer;
  private final Deserializer<V> valueDeserializer;

  /**
   * Creates a converter.
   *
   * @param keyDeserializer turns key bytes into K; not called for a null key
   * @param valueDeserializer turns value bytes into V; not called for a null value (tombstone)
   */
  public RecordConverter(Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    if (keyDeserializer == null || valueDeserializer == null) {
      throw new IllegalArgumentException("key and value deserializers must not be null");
    }
    this.keyDeserializer = keyDeserializer;
    this.valueDeserializer = valueDeserializer;
  }

  /** The Kafka partition the delivered record was consumed from. */
  public static TopicPartition topicPartition(Delivery delivery) {
    return new TopicPartition(delivery.getRecord().getTopic(), delivery.getRecord().getPartition());
  }

  /**
   * Converts a delivery.
   *
   * @param delivery as received from the sidecar
   * @return the record
   * @throws RuntimeException whatever a deserializer throws, unwrapped, so that
   *     {@link FailureClassifier} sees it
   */
  public ConsumerRecord<K, V> toRecord(Delivery delivery) {
    KafkaRecord raw = delivery.getRecord();
    RecordHeaders headers = recordHeaders(raw);
    addDeliveryHeaders(headers, delivery);

    byte[] keyBytes = raw.hasKey() ? raw.getKey().toByteArray() : null;
    byte[] valueBytes = raw.hasValue() ? raw.getValue().toByteArray() : null;
    // Like KafkaConsumer: null bytes stay null without asking the deserializer.
    K key = keyBytes == null ? null : keyDeserializer.deserialize(raw.getTopic(), headers, keyBytes);
    V value = valueBytes == null ? null : valueDeserializer.deserialize(raw.getTopic(), headers, valueBytes);
    return record(raw, headers, keyBytes, valueBytes, key, value);
  }

  /**
   * The Kafka record of a delivery or an escalation notice as consumed: raw key and value, its
   * own headers only (no delivery headers).
   */
  public static ConsumerRecord<byte[], byte[]> rawRecord(Delivery delivery) {
    KafkaRecord raw = delivery.getRecord();
    byte[] keyBytes = raw.hasKey() ? raw.getKey().toByteArray() : null;
    byte[] valueBytes = raw.hasValue() ? raw.getValue().toByteArray() : null;
    return record(raw, recordHeaders(raw), keyBytes, valueBytes, keyBytes, valueBytes);
  }

  private static RecordHeaders recordHeaders(KafkaRecord raw) {
    RecordHeaders headers = new RecordHeaders();
    for (dev.onceguard.v1.Header h : raw.getHeadersList()) {
      headers.add(h.getKey(), h.hasValue() ? h.getValue().toByteArray() : null);
    }
    return headers;
  }

  private static <K, V> ConsumerRecord<K, V> record(
      KafkaRecord raw, RecordHeaders headers, byte[] keyBytes, byte[] valueBytes, K key, V value) {
    return new ConsumerRecord<>(
        raw.getTopic(),
        raw.getPartition(),
        raw.getOffset(),
        raw.getTimestampMs(),
        // The contract does not carry the timestamp type; CREATE_TIME is the broker default.
        TimestampType.CREATE_TIME,
        keyBytes == null ? ConsumerRecord.NULL_SIZE : keyBytes.length,
        valueBytes == null ? ConsumerRecord.NULL_SIZE : valueBytes.length,
        key,
        value,
        headers,
        Optional.empty());
  }

  private static void addDeliveryHeaders(RecordHeaders headers, Delivery d) {
    add(headers, Headers.ROUTE, d.getRoute());
    add(headers, Headers.DEDUP_KEY, d.getDedupKey());
    add(headers, Headers.ATTEMPT, Integer.toUnsignedString(d.getAttempt()));
    add(headers, Headers.REDELIVERY, Boolean.toString(d.getRedelivery()));
    addIfPresent(headers, Headers.ENTITY_ID, d.getEntityId());
    addIfPresent(headers, Headers.EVENT, d.getEvent());
    addIfPresent(headers, Headers.FROM_STATE, d.getFromState());
    addIfPresent(headers, Headers.TO_STATE, d.getToState());
  }

  private static void add(RecordHeaders headers, String key, String value) {
    headers.add(key, value.getBytes(StandardCharsets.UTF_8));
  }

  private static void addIfPresent(RecordHeaders headers, String key, String value) {
    if (!value.isEmpty()) {
      add(headers, key, value);
    }
  }
}
