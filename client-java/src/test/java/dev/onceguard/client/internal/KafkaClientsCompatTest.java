package dev.onceguard.client.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class KafkaClientsCompatTest {
  private static final TopicPartition P0 = new TopicPartition("orders", 0);

  @ParameterizedTest
  @ValueSource(strings = {"3.0.0", "3.0.2", "3.6.2", "3.9.1", "4.0.0", "4.4.0", "4.5.0-SNAPSHOT", "7.6.1-ccs", "8.0.0-ce"})
  void requireSupported_acceptsThe3xAnd4xLines(String version) {
    assertThatCode(() -> KafkaClientsCompat.requireSupported(version)).doesNotThrowAnyException();
  }

  @ParameterizedTest
  @ValueSource(strings = {"2.8.2", "2.7.0", "1.1.1", "5.0.0", "6.2.0-ccs", "9.0.0-ccs"})
  void requireSupported_otherLines_throwIllegalStateNamingTheRange(String version) {
    assertThatThrownBy(() -> KafkaClientsCompat.requireSupported(version))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("kafka-clients " + version)
        .hasMessageContaining(KafkaClientsCompat.SUPPORTED_RANGE);
  }

  @Test
  void requireSupported_unreadableVersion_isAcceptedWhenTheNeededConstructorIsThere() {
    assertThatCode(() -> KafkaClientsCompat.requireSupported("unknown")).doesNotThrowAnyException();
  }

  @Test
  void runningVersion_readsTheKafkaClientsOnTheClasspath() {
    // kafka-clients 4.4 moved AppInfoParser to common.utils.internals; the lookup finds either
    assertThat(KafkaClientsCompat.runningVersion()).matches("4\\.\\d+\\.\\d+.*");
  }

  @Test
  void recordsFactory_on4x_keepsNextOffsets() {
    ConsumerRecord<String, String> record = new ConsumerRecord<>("orders", 0, 7, "k", "v");
    Map<TopicPartition, OffsetAndMetadata> next = Map.of(P0, new OffsetAndMetadata(8));

    ConsumerRecords<String, String> records =
        KafkaClientsCompat.recordsFactory().create(Map.of(P0, List.of(record)), next);

    assertThat(records.records(P0)).containsExactly(record);
    assertThat(records.nextOffsets()).isEqualTo(next);
  }
}
