package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.client.TcpGate;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.v1.Delivery;
import dev.onceguard.wire.Headers;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * An early arrival waits through a MySQL outage longer than its {@code early-arrival-timeout}.
 * The outage is real for this sidecar only: its MySQL connections go through a {@link TcpGate},
 * which drops them and refuses new ones. The timeout counts only time the store could answer, so
 * the waiting {@code deliver} is not escalated, and once its {@code ship} comes both are applied
 * in machine order.
 */
class EarlyArrivalOutageIT {
  static final Duration TIMEOUT = Duration.ofSeconds(8);
  static final Duration OUTAGE = Duration.ofSeconds(12);

  @Test
  void earlyDeliverWaitsThroughAnOutageLongerThanItsTimeout_notEscalated_appliedAfterItsShip() throws Exception {
    try (OneRouteEnv env = new OneRouteEnv("earlyout", 1);
        RecordingBusiness business = RecordingBusiness.start();
        TcpGate gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort())) {
      String mysqlAtServer = "mysql: {host: " + ItEnv.mysqlHost() + ", port: " + ItEnv.mysqlPort() + ",";
      String yaml = env.yaml("/line_id", business.target(), ItEnv.redisUri(), RecordingBusiness.freePort(), "",
          "early-arrival-timeout: " + TIMEOUT.toSeconds() + "s", "early-arrival-retry: 200ms",
          "retry: {initial-backoff: 100ms, max-backoff: 500ms}");
      assertThat(yaml).contains(mysqlAtServer);
      SidecarConfig cfg = new ConfigReader(Map.of())
          .parse(yaml.replace(mysqlAtServer, "mysql: {host: 127.0.0.1, port: " + gate.port() + ","), env.group);

      try (InProcessSidecar sidecar = InProcessSidecar.start(cfg)) {
        env.kafka.produce(List.of(env.record("L1", "create", "m-1"), env.record("L1", "pay", "m-2"),
            env.record("L1", "prepare", "m-3"), env.record("L1", "deliver", "m-4")));
        await().atMost(Duration.ofSeconds(60)).until(() -> business.okDeliveries().size() == 3);
        Thread.sleep(1_000); // the deliver waits for its ship, and the clock runs

        gate.cut();
        long cutAt = System.nanoTime();
        await().atMost(Duration.ofSeconds(10)).until(() -> sidecar.storeFailures() > 0);
        Thread.sleep(Math.max(0, OUTAGE.toMillis() - (System.nanoTime() - cutAt) / 1_000_000));
        gate.restore();
        long failuresInOutage = sidecar.storeFailures();

        // the store answers again once its claims stop failing; the deliver keeps waiting
        AtomicLong seen = new AtomicLong(-1);
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(1_500))
            .until(() -> seen.getAndSet(sidecar.storeFailures()) == sidecar.storeFailures());
        Thread.sleep(1_000);
        assertThat(reasons(env)).as("no escalation: the outage did not count towards the timeout").isEmpty();
        assertThat(business.okDeliveries()).hasSize(3);

        env.kafka.produce(List.of(env.record("L1", "ship", "m-5")));
        Map<TopicPartition, Long> end = env.kafka.endOffsets(env.topic);
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> env.kafka.committedOffsets(env.group, env.topic).equals(end));
        System.out.printf("EarlyArrivalOutageIT: %d store failures retried during the %d s outage%n", failuresInOutage,
            OUTAGE.toSeconds());
        assertThat(failuresInOutage).as("the outage was met").isPositive();
      }

      assertThat(business.okDeliveries()).extracting(Delivery::getEvent)
          .containsExactly("create", "pay", "prepare", "ship", "deliver");
      assertThat(reasons(env)).as("nothing escalated").isEmpty();
      assertThat(env.mysql.rows("SELECT state FROM " + env.database + ".og_entity WHERE entity_id = 'L1'"))
          .containsExactly(List.of("delivered"));
    }
  }

  /** Each escalation as its event and reason header. */
  private static List<String> reasons(OneRouteEnv env) {
    return env.kafka.readAll(env.escalations).stream()
        .map(r -> OneRouteEnv.field(r.value(), "event") + ":" + OneRouteEnv.header(r, Headers.REASON)).toList();
  }
}
