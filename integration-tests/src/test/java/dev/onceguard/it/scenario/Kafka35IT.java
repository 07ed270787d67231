package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ClusterScript;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.v1.Delivery;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * The sidecar (its kafka-clients 4.x) against a Kafka 3.5 cluster, the release a reference team
 * runs: three KRaft brokers of Kafka 3.5.2 from Maven Central ({@code ONCEGUARD_CLUSTER_KAFKA=3.5
 * scripts/cluster.sh up kafka}). Records flow to the business once each, re-sent duplicates are
 * dropped, and the consumer group commits every partition to its end. With
 * {@code answers.kafka35-out} set, writes its table there (make answers).
 */
class Kafka35IT {
  static final int FACTS = 60;

  @Test
  void sidecarOnKafka35Brokers_recordsFlow_duplicatesDropped_offsetsCommitted() throws Exception {
    try (ClusterScript cluster = ClusterScript.up(Map.of("ONCEGUARD_CLUSTER_KAFKA", "3.5"), "kafka")) {
      assertThat(cluster.env("ONCEGUARD_CLUSTER_KAFKA_RELEASE")).isEqualTo("3.5");
      assertThat(brokerVersion(cluster.dir())).as("the brokers' own version line").isEqualTo("3.5.2");
      try (OneRouteEnv env = new OneRouteEnv("k35", 3, new KafkaSupport(cluster.env("ONCEGUARD_CLUSTER_KAFKA_BOOTSTRAP"), (short) 3));
          RecordingBusiness business = RecordingBusiness.start();
          InProcessSidecar sidecar = InProcessSidecar.start(env.config(business.target()))) {
        List<ProducerRecord<byte[], byte[]>> facts = new ArrayList<>();
        List<ProducerRecord<byte[], byte[]>> resent = new ArrayList<>();
        for (int i = 0; i < FACTS; i++) {
          facts.add(env.record("k35-" + i, "create", "m-" + i));
          resent.add(env.record("k35-" + i, "create", "m-" + i + "-again"));
        }
        env.kafka.produce(facts);
        env.kafka.produce(resent);

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (sidecar.verdicts().values().stream().mapToLong(Long::longValue).sum() < 2L * FACTS && System.nanoTime() < deadline) {
          TimeUnit.MILLISECONDS.sleep(100);
        }
        Map<String, Long> perLine = business.okDeliveries().stream()
            .collect(Collectors.groupingBy(Delivery::getEntityId, Collectors.counting()));
        assertThat(perLine).as("every fact reached the business").hasSize(FACTS);
        assertThat(perLine).as("each once").allSatisfy((line, n) -> assertThat(n).as(line).isEqualTo(1L));
        Map<String, Long> verdicts = sidecar.verdicts();
        assertThat(sidecar.accepted()).as("facts forwarded and confirmed").isEqualTo(FACTS);
        assertThat(verdicts.entrySet().stream().filter(e -> e.getKey().startsWith("DUPLICATE_IGNORE/")).mapToLong(Map.Entry::getValue).sum())
            .as("re-sends dropped as duplicates: %s", verdicts).isEqualTo(FACTS);
        assertThat(env.kafka.readAll(env.escalations)).as("nothing escalated").isEmpty();
        env.awaitCommittedToEnd(Duration.ofSeconds(30));
        String out = System.getProperty("answers.kafka35-out");
        if (out != null) {
          Files.createDirectories(Path.of(out).toAbsolutePath().getParent());
          Files.writeString(Path.of(out), String.format(java.util.Locale.ROOT, "| Brokers | sidecar's kafka-clients | facts | delivered once | "
              + "re-sends dropped | escalated | offsets committed to the end |%n|---|---|---:|---:|---:|---:|---|%n"
              + "| 3 × Kafka %s (KRaft) | %s | %d | %d | %d | 0 | yes |%n", brokerVersion(cluster.dir()),
              org.apache.kafka.common.utils.internals.AppInfoParser.getVersion(), FACTS, perLine.size(), FACTS));
        }
      }
    }
  }

  /** The version the brokers print at start ("Kafka version: 3.5.2"), from kafka-1's server.log. */
  static String brokerVersion(Path clusterDir) throws Exception {
    try (Stream<String> lines = Files.lines(clusterDir.resolve("kafka-1").resolve("logs").resolve("server.log"))) {
      return lines.filter(l -> l.contains("Kafka version: ")).map(l -> l.replaceAll(".*Kafka version: (\\S+).*", "$1")).findFirst()
          .orElse("(no version line)");
    }
  }
}
