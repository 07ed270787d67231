package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.proxy.config.SidecarConfig;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * A business container that is down (its port closed) for far longer than {@code retry.max-attempts}
 * allows for answered retries: the sidecar must pause and wait for it, not escalate every record
 * as BUSINESS_REJECTED. When it comes up, every record is applied once and the offsets catch up.
 */
class BusinessDownIT {
  static final int LINES = 60;

  @Test
  void businessDownLongerThanMaxAttempts_recordsWait_thenAllAppliedOnce_nothingEscalated() throws Exception {
    int port = RecordingBusiness.freePort();
    try (OneRouteEnv env = new OneRouteEnv("business-down", 2)) {
      // two attempts with 50..200 ms backoff: an answered RETRY would be rejected within ~0.3 s
      SidecarConfig cfg = env.config("127.0.0.1:" + port, "retry: {initial-backoff: 50ms, max-backoff: 200ms, max-attempts: 2}");
      List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
      for (int i = 0; i < LINES; i++) {
        records.add(env.record("L" + i, "create", "m-" + i));
      }
      env.kafka.produce(records);
      try (InProcessSidecar sidecar = InProcessSidecar.start(cfg)) {
        await().atMost(Duration.ofSeconds(30)).until(() -> env.kafka.activeMembers(env.group) == 1);
        // 4 s of a closed port: more than ten times what two answered retries would take
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
        List<Map<TopicPartition, Long>> samples = new ArrayList<>();
        while (System.nanoTime() < until) {
          samples.add(env.kafka.committedOffsets(env.group, env.topic));
          Thread.sleep(200);
        }
        assertThat(samples).as("nothing committed while the business is down")
            .allSatisfy(s -> assertThat(s.values()).allMatch(o -> o == 0));
        assertThat(env.kafka.endOffsets(env.escalations).values()).as("nothing escalated while it is down").allMatch(o -> o == 0);

        try (RecordingBusiness business = RecordingBusiness.startOn(port)) {
          await().atMost(Duration.ofSeconds(60)).until(() -> business.okCoordinates().size() == LINES);
          Map<TopicPartition, Long> end = env.kafka.endOffsets(env.topic);
          await().atMost(Duration.ofSeconds(30)).until(() -> env.kafka.committedOffsets(env.group, env.topic).equals(end));
          List<Call> ok = business.calls().stream().filter(Call::answeredOk).collect(Collectors.toList());
          assertThat(ok).hasSize(LINES);
          Set<String> lines = ok.stream().map(c -> c.delivery().getEntityId()).collect(Collectors.toSet());
          assertThat(lines).hasSize(LINES);
          assertThat(ok).as("every delivery came after more failed attempts than max-attempts")
              .allSatisfy(c -> assertThat(c.delivery().getAttempt()).isGreaterThan(2));
          assertThat(ok).as("no attempt could have reached the business: none is flagged a redelivery")
              .allSatisfy(c -> assertThat(c.delivery().getRedelivery()).isFalse());
        }
      }
      assertThat(env.kafka.endOffsets(env.escalations).values()).as("nothing escalated").allMatch(o -> o == 0);
      assertThat(env.mysql.rows("SELECT COUNT(*) FROM " + env.database + ".og_ledger WHERE status = 'DONE'"))
          .containsExactly(List.of((long) LINES));
    }
  }
}
