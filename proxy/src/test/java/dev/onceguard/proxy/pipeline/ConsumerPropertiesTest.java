package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.TestConfigs;
import dev.onceguard.proxy.config.SidecarConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.junit.jupiter.api.Test;

class ConsumerPropertiesTest {

  private static ConsumerProperties of(SidecarConfig c) {
    return ConsumerProperties.of(c, c.routes().get(0));
  }

  @Test
  void defaults_manualCommits_cooperativeSticky_earliest_routeGroup() {
    ConsumerProperties p = of(TestConfigs.oneRoute());
    assertThat(p.values())
        .containsEntry(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
        .containsEntry(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName())
        .containsEntry(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")
        .containsEntry(ConsumerConfig.GROUP_ID_CONFIG, "onceguard-orders")
        .containsEntry(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:9")
        .containsEntry(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "64")
        .containsEntry(ConsumerConfig.CLIENT_ID_CONFIG, "onceguard-test-1-orders");
    assertThat(p.ignored()).isEmpty();
  }

  @Test
  void userProperties_passThrough_andMayChangeDefaults() {
    ConsumerProperties p = of(TestConfigs.oneRoute("", "auto.offset.reset: latest\nsession.timeout.ms: \"10000\""));
    assertThat(p.values())
        .containsEntry(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest")
        .containsEntry(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    assertThat(p.ignored()).isEmpty();
  }

  @Test
  void userProperties_cannotOverrideOwnedSettings_andEachAttemptIsReported() {
    ConsumerProperties p = of(TestConfigs.oneRoute("", """
        enable.auto.commit: "true"
        group.id: other
        partition.assignment.strategy: org.apache.kafka.clients.consumer.RangeAssignor
        max.poll.records: "5000"
        """));
    assertThat(p.values())
        .containsEntry(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
        .containsEntry(ConsumerConfig.GROUP_ID_CONFIG, "onceguard-orders")
        .containsEntry(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName())
        .containsEntry(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "64");
    assertThat(p.ignored()).hasSize(4);
    assertThat(p.ignored().get(0)).contains("kafka.properties.group.id=other").contains("onceguard-orders");
  }

  @Test
  void userProperties_sameValueAsOwned_isNotReported() {
    assertThat(of(TestConfigs.oneRoute("", "enable.auto.commit: \"false\"")).ignored()).isEmpty();
  }

  @Test
  void consumerGroupProtocol_leavesAssignmentToTheBroker() {
    ConsumerProperties p = of(TestConfigs.oneRoute("", "group.protocol: consumer"));
    assertThat(p.values()).doesNotContainKey(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG);
  }

  @Test
  void maxPollRecords_followsThePerPartitionBound_cappedAt500() {
    assertThat(of(TestConfigs.oneRoute("max-in-flight-per-partition: 8", "")).values())
        .containsEntry(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "8");
    assertThat(of(TestConfigs.oneRoute("max-in-flight-per-partition: 5000", "")).values())
        .containsEntry(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
  }
}
