package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.ops.ProbeFacts.RouteFacts;
import dev.onceguard.proxy.ops.Probes.Report;
import dev.onceguard.proxy.time.FakeTime;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ProbesTest {
  /** Two routes: {@code orders} (default group and escalation topic, a verdict topic) and {@code payments}. */
  static final SidecarConfig CONFIG = new ConfigReader(Map.of()).parse("""
      kafka: {bootstrap-servers: 'kafka:9092'}
      mysql: {database: og}
      routes:
        - name: orders
          topics: [orders]
          business-key: [/id]
          target: 127.0.0.1:7000
          verdict-topic: verdicts
        - name: payments
          topics: [payments]
          group: pay-group
          business-key: [/id]
          target: 127.0.0.1:7000
          escalation-topic: payments-dead
      """, "probes-test.yaml");
  private static final long NOW = 1_000_000;

  private final FakeTime time = new FakeTime(NOW);
  private final FakeProbeFacts facts = new FakeProbeFacts();
  private final Probes probes = new Probes(CONFIG, facts, time, Duration.ofSeconds(60), Duration.ofMillis(200));

  @BeforeEach
  void bothRoutesInTheirGroups() {
    facts.route("orders", new RouteFacts(true, 3, NOW, null));
    facts.route("payments", new RouteFacts(true, 0, NOW, null));
  }

  @Test
  void readiness_allChecksPass_ready_withEveryRouteAndTopicListed() {
    Report r = probes.readiness();

    assertThat(r.ok()).isTrue();
    assertThat(r.routeOk("orders")).isTrue();
    assertThat(r.routeOk("payments")).isTrue();
    assertThat(r.text()).startsWith("ready\n")
        .contains("ok    mysql: answered a ping")
        .contains("route orders:\n  ok    consumer: in group 'onceguard-orders', 3 partition(s) assigned")
        .contains("  ok    topic: source topic 'orders' exists, 1 partition(s)")
        .contains("  ok    topic: escalation topic 'orders.escalate' exists")
        .contains("  ok    topic: verdict topic 'verdicts' exists")
        .contains("route payments:\n  ok    consumer: in group 'pay-group', 0 partition(s) assigned")
        .contains("  ok    topic: escalation topic 'payments-dead' exists")
        .doesNotContain("FAIL");
  }

  @Test
  void readiness_mysqlPingFails_notReady_reasonFromTheDriver_everyRouteNotReady() {
    facts.ping = CompletableFuture.failedFuture(new SQLException("Connection refused"));

    Report r = probes.readiness();

    assertThat(r.ok()).isFalse();
    assertThat(r.failures()).containsExactly("MySQL: Connection refused");
    assertThat(r.text()).startsWith("not ready: MySQL: Connection refused\n").contains("FAIL  mysql: MySQL: Connection refused");
    assertThat(r.routeOk("orders")).isFalse();
    assertThat(r.routeOk("payments")).isFalse();
  }

  @Test
  void readiness_mysqlDoesNotAnswer_notReadyAfterTheCheckTimeout() {
    facts.ping = new CompletableFuture<>();

    long start = System.nanoTime();
    Report r = probes.readiness();

    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
    assertThat(r.ok()).isFalse();
    assertThat(r.failures()).containsExactly("MySQL: no answer within 0.2 s");
  }

  @Test
  void readiness_draining_notReady_andMysqlIsNotPinged() {
    facts.draining = true;

    Report r = probes.readiness();

    assertThat(r.ok()).isFalse();
    assertThat(r.failures()).containsExactly("draining: stopping after a signal");
    assertThat(r.text()).contains("skip  mysql: not pinged while draining");
    assertThat(facts.pings.get()).isZero();
  }

  @Test
  void readiness_escalationTopicMissing_onlyThatRouteNotReady_reasonNamesTheTopic() {
    facts.missing.add("payments-dead");

    Report r = probes.readiness();

    assertThat(r.ok()).isFalse();
    assertThat(r.failures()).containsExactly(
        "route payments: escalation topic 'payments-dead' does not exist (create it, or set kafka.create-topics: true)");
    assertThat(r.routeOk("payments")).isFalse();
    assertThat(r.routeOk("orders")).isTrue();
  }

  @Test
  void readiness_sourceAndVerdictTopicsMissing_eachNamed() {
    facts.missing.add("orders");
    facts.missing.add("verdicts");

    Report r = probes.readiness();

    assertThat(r.failures()).containsExactly(
        "route orders: source topic 'orders' does not exist (the sidecar never creates source topics)",
        "route orders: verdict topic 'verdicts' does not exist (create it, or set kafka.create-topics: true)");
  }

  @Test
  void readiness_kafkaMetadataUnreadable_notReady_namesBootstrap_andTopicsUnchecked() {
    facts.kafkaDown = new IllegalStateException("Timed out waiting for a node assignment");

    Report r = probes.readiness();

    assertThat(r.ok()).isFalse();
    assertThat(r.failures()).first().isEqualTo("Kafka metadata (kafka:9092): Timed out waiting for a node assignment");
    assertThat(r.failures()).contains("route payments: escalation topic 'payments-dead' not checked: Kafka metadata cannot be read");
  }

  @Test
  void readiness_consumerNotInGroupYet_orNotRunning_orFailed_routeNotReady() {
    facts.route("orders", new RouteFacts(false, 0, NOW, null));
    facts.routes.remove("payments");

    assertThat(probes.readiness().failures()).containsExactly(
        "route orders: consumer has not joined group 'onceguard-orders' yet",
        "route payments: consumer not running");

    facts.route("orders", new RouteFacts(true, 1, NOW, new IllegalStateException("fenced")));
    assertThat(probes.readiness().failures()).contains("route orders: consumer stopped after a failure: java.lang.IllegalStateException: fenced");
  }

  @Test
  void readiness_duringStartupWait_notReady_withTheWaitAsReason_whileLive() {
    facts.startupWait = "waiting for MySQL (attempt 3 failed, next in 4000 ms): Connection refused";
    facts.ping = CompletableFuture.failedFuture(new IllegalStateException("not connected yet"));
    facts.routes.clear();

    Report ready = probes.readiness();
    Report live = probes.liveness();

    assertThat(ready.ok()).isFalse();
    assertThat(ready.failures()).startsWith("starting: waiting for MySQL (attempt 3 failed, next in 4000 ms): Connection refused");
    assertThat(live.ok()).isTrue();
    assertThat(live.text()).startsWith("live\n").contains("ok    process: starting: waiting for MySQL");
  }

  @Test
  void liveness_pollLoopsTurning_live() {
    time.advance(Duration.ofSeconds(59));

    Report r = probes.liveness();

    assertThat(r.ok()).isTrue();
    assertThat(r.text()).contains("route orders:\n  ok    poll loop: last turn 59.0 s ago");
  }

  @Test
  void liveness_aPollLoopStalledPastTheBound_notLive_namingTheRoute() {
    facts.route("payments", new RouteFacts(true, 0, NOW + 30_000, null));
    time.advance(Duration.ofSeconds(75));

    Report r = probes.liveness();

    assertThat(r.ok()).isFalse();
    assertThat(r.failures()).containsExactly("route orders: poll loop has not turned for 75.0 s (bound 60.0 s): wedged");
  }

  @Test
  void liveness_drainingLoopsMayStop_stillLive() {
    facts.draining = true;
    time.advance(Duration.ofMinutes(5));

    Report r = probes.liveness();

    assertThat(r.ok()).isTrue();
    assertThat(r.text()).contains("ok    process: draining").contains("skip  poll loop: draining");
  }

  @Test
  void liveness_aConsumerStoppedByAFailure_notLive() {
    facts.route("orders", new RouteFacts(false, 0, NOW, new IllegalStateException("boom")));

    assertThat(probes.liveness().failures())
        .containsExactly("route orders: consumer stopped after a failure: java.lang.IllegalStateException: boom");
  }
}
