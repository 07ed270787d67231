package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.OrderScenario.Settings;
import dev.onceguard.it.scenario.ScenarioChecker.Result;
import dev.onceguard.it.scenario.ScenarioChecker.Strictness;
import dev.onceguard.it.scenario.ScenarioDriver.Hook;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * MariaDB goes away under the sidecar: during the pay wave, every connection to the run's
 * database is killed, again and again for 3 seconds (from a separate connection; the shared
 * server keeps running). The sidecar must pause, retry, recover by itself, and the checker pass.
 */
class DatabaseOutageIT {
  static final int LINES = 1200;
  static final int PARTITIONS = 6;
  static final long OUTAGE_NANOS = TimeUnit.SECONDS.toNanos(3);

  @Test
  void mysqlConnectionsKilledMidRun_sidecarPausesAndRecovers_checkerPasses() throws Exception {
    OrderScenario scenario = OrderScenario.generate(Settings.of(LINES, PARTITIONS, 5150L));
    AtomicInteger killed = new AtomicInteger();
    AtomicLong deliveredBefore = new AtomicLong();
    AtomicLong deliveredAfter = new AtomicLong();
    try (ScenarioEnv env = new ScenarioEnv("DatabaseOutageIT", PARTITIONS);
        RecordingBusiness business = RecordingBusiness.start();
        InProcessSidecar sidecar = InProcessSidecar.start(env.config(ScenarioEnv.Instance.of("scn-dbout", business.target())))) {
      ScenarioDriver driver = new ScenarioDriver(scenario, env, business);
      driver.run(new Hook(1, 0.3, "killing the sidecar's MySQL connections for 3 s", () -> {
        deliveredBefore.set(business.okDeliveries().size());
        long until = System.nanoTime() + OUTAGE_NANOS;
        int rounds = 0;
        while (System.nanoTime() < until) {
          rounds++;
          List<List<Object>> ids = env.mysql.rows(
              "SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()", env.database);
          for (List<Object> row : ids) {
            try {
              env.mysql.exec("KILL " + ((Number) row.get(0)).longValue());
              killed.incrementAndGet();
            } catch (RuntimeException gone) {
              // the connection closed by itself meanwhile
            }
          }
          pace(50);
        }
        deliveredAfter.set(business.okDeliveries().size());
        driver.log("killed %d connections in %d rounds; deliveries %d -> %d during the outage", killed.get(), rounds,
            deliveredBefore.get(), deliveredAfter.get());
      }));
      Result r = new ScenarioChecker(scenario, env, business, driver, Strictness.EXACT).check();

      assertThat(killed.get()).as("connections of the sidecar were killed").isGreaterThan(0);
      assertThat(sidecar.storeFailures()).as("the sidecar noticed the outage and retried").isPositive();
      driver.log("store failures retried: %d; redeliveries: %d", sidecar.storeFailures(), r.redeliveries());
    }
  }

  private static void pace(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
