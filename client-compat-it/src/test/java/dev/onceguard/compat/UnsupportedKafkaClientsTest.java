package dev.onceguard.compat;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.client.OnceGuardConsumer;
import dev.onceguard.client.OnceGuardConsumerConfig;
import dev.onceguard.client.internal.KafkaClientsCompat;
import java.util.Map;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/** Runs on a kafka-clients line below the supported range (its own Surefire execution, see the pom). */
class UnsupportedKafkaClientsTest {
  private static final String EXPECTED = System.getProperty("kafka.clients.expected");

  @Test
  void constructor_onAnUnsupportedLine_throwsIllegalStateNamingTheSupportedRange() {
    assertThat(KafkaClientsCompat.runningVersion()).isEqualTo(EXPECTED);
    Map<String, Object> config = Map.of(
        OnceGuardConsumerConfig.TARGET_CONFIG, "localhost:1",
        OnceGuardConsumerConfig.ROUTE_CONFIG, LoopbackSidecar.ROUTE);

    assertThatThrownBy(() -> new OnceGuardConsumer<>(config, new StringDeserializer(), new StringDeserializer()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("kafka-clients " + EXPECTED)
        .hasMessageContaining(KafkaClientsCompat.SUPPORTED_RANGE);
  }
}
