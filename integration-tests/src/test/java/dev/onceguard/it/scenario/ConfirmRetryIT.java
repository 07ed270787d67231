package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.Source;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/**
 * The confirm step when MySQL drops the connection after COMMIT (DatabaseOutageIT hit it: the
 * answer was lost, the pipeline retried the confirm, and the retry found nothing PENDING). The
 * retry must count as a success, not as "claim lost, taken over by another owner" — that made the
 * applied record's verdict DUPLICATE_IGNORE/IN_FLIGHT and skipped the L1 write. A claim another
 * owner took over and confirmed must still answer false.
 */
class ConfirmRetryIT {

  @Test
  void confirm_repeatedAfterItCommitted_isStillASuccess_butNeverForAClaimAnotherOwnerConfirmed() {
    String database = "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    SidecarConfig cfg = new ConfigReader(Map.of()).parse("""
        kafka: {bootstrap-servers: 127.0.0.1:1}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: 2}
        %s
        routes:
          - name: ship
            topics: [ship]
            machine: line
            entity-id: /line_id
            event: /event
            business-key: [/order_id, /warehouse_id]
            target: 127.0.0.1:1
            lease: 5s
        """.formatted(ItEnv.mysqlHost(), ItEnv.mysqlPort(), ItEnv.mysqlUser(), ItEnv.mysqlPassword(), database,
        OrderScenario.MACHINE_YAML), "confirm-retry");
    RouteConfig route = cfg.routes().get(0);
    Extractor extractor = new Extractor(route, cfg.machines().get("line"));
    AtomicLong now = new AtomicLong(System.currentTimeMillis()); // stamps only: leases use the database clock
    Db db = new Db(cfg.mysql());
    try (Mysql mysql = new Mysql()) {
      try {
        new Migrations(db, "og_").migrate();
        MysqlGuardStore store = new MysqlGuardStore(db, "og_");
        Guard a = new Guard(store, IdempotencyCache.DISABLED, cfg.machines(), now::get, "owner-a");
        Guard b = new Guard(store, IdempotencyCache.DISABLED, cfg.machines(), now::get, "owner-b");

        // one owner: claim, confirm, confirm again (the retry after a lost answer)
        Claim c1 = accepted(a.claim(route, event(extractor, "o-1", "create"), new Source("create", 0, 1)));
        assertThat(a.confirm(route, c1).toCompletableFuture().join()).isTrue();
        assertThat(a.confirm(route, c1).toCompletableFuture().join()).as("the repeated confirm of a DONE claim of ours").isTrue();
        assertThat(mysql.rows("SELECT status, owner FROM " + database + ".og_ledger")).containsExactly(List.of("DONE", "owner-a"));

        // two owners: a is declared gone (leases are judged by the database clock, so a retired
        // owner stands for a lease run out), b takes the claim over and confirms; a's late confirm
        // is refused
        Claim c2 = accepted(a.claim(route, event(extractor, "o-2", "create"), new Source("create", 0, 2)));
        a.retire().toCompletableFuture().join();
        Claim taken = accepted(b.claim(route, event(extractor, "o-2", "create"), new Source("create", 0, 2)));
        assertThat(taken.redelivery()).isTrue();
        assertThat(b.confirm(route, taken).toCompletableFuture().join()).isTrue();
        assertThat(a.confirm(route, c2).toCompletableFuture().join()).as("confirm of a claim another owner confirmed").isFalse();
        assertThat(b.confirm(route, taken).toCompletableFuture().join()).isTrue();
      } finally {
        db.close();
        mysql.exec("DROP DATABASE IF EXISTS " + database);
      }
    }
  }

  private static ExtractedEvent event(Extractor x, String order, String event) {
    String json = "{\"line_id\":\"" + order + "/w-1\",\"order_id\":\"" + order + "\",\"warehouse_id\":\"w-1\",\"event\":\"" + event + "\"}";
    Extraction e = x.extract(null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders());
    assertThat(e).isInstanceOf(Extraction.Ok.class);
    return ((Extraction.Ok) e).event();
  }

  private static Claim accepted(CompletionStage<ClaimResult> r) {
    ClaimResult res = r.toCompletableFuture().join();
    assertThat(res).isInstanceOf(ClaimResult.Accepted.class);
    return ((ClaimResult.Accepted) res).claim();
  }
}
