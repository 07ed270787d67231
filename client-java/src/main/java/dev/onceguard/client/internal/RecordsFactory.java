package dev.onceguard.client.internal;

import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Builds the {@link ConsumerRecords} a poll returns. A seam for two reasons: the constructor
 * differs between kafka-clients lines ({@link KafkaClientsCompat} picks it), and tests make
 * this step fail to prove that a batch that was never returned is never acknowledged.
 */
public interface RecordsFactory {
  /**
   * Builds a poll's result.
   *
   * @param records each partition's records, in the order poll returns them
   * @param nextOffsets each partition's highest offset + 1 (kept by kafka-clients 4.0 and later)
   * @return the records
   */
  <K, V> ConsumerRecords<K, V> create(
      Map<TopicPartition, List<ConsumerRecord<K, V>>> records, Map<TopicPartition, OffsetAndMetadata> nextOffsets);
}
