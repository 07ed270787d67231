package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.Source;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A sidecar dies holding a claim it sent to the business, and comes back with a changed
 * {@code fingerprint-exclude} or {@code business-key} (what a team does after a narrow-key
 * incident). The record is consumed again from the same offset: its claim is taken over by its
 * source coordinates, whatever the new key or fingerprint says, and delivered flagged; the entity
 * is never left busy behind the orphaned claim.
 */
class OrphanedClaimIT {
  static final String ROUTES = """
      machines:
        order:
          states: [created, paid, shipped]
          events:
            create: {to: created}
            pay: {from: [created], to: paid}
            ship: {from: [paid], to: shipped}
      routes:
        - name: orders
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /event]
          fingerprint-exclude: [/sent_at]
          target: 127.0.0.1:1
      """;

  GuardFixture fx;

  @BeforeEach
  void setUp() {
    fx = new GuardFixture(ROUTES, 4);
  }

  @AfterEach
  void tearDown() {
    fx.close();
  }

  /** The fixture's configuration with the route's {@code from} line replaced by {@code to}: the restarted sidecar's. */
  SidecarConfig changed(String from, String to) {
    assertThat(fx.yaml).contains(from);
    return new ConfigReader(Map.of()).parse(fx.yaml.replace(from, to), "changed");
  }

  static String record(String event, String note) {
    return "{\"order_id\":\"o-1\",\"event\":\"" + event + "\",\"note\":\"" + note + "\",\"sent_at\":1}";
  }

  ClaimResult claim(Guard g, SidecarConfig cfg, String json, long offset) {
    RouteConfig route = cfg.routes().get(0);
    var e = ((Extraction.Ok) new Extractor(route, cfg.machines().get("order"))
        .extract(null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders())).event();
    return g.claim(route, e, new Source("orders", 0, offset)).toCompletableFuture().join();
  }

  /**
   * The old sidecar: creates o-1, then claims pay at offset 5 (the business works on it) and dies
   * with the claim; its heartbeat and the claim's lease have run out by the time the new one looks.
   */
  Claim orphanPay() {
    Guard old = fx.guard("old-run", null);
    old.heartbeat().toCompletableFuture().join();
    ClaimResult.Accepted create = (ClaimResult.Accepted) claim(old, fx.config, record("create", "n"), 4);
    assertThat(old.confirm(fx.route("orders"), create.claim()).toCompletableFuture().join()).isTrue();
    Claim pay = ((ClaimResult.Accepted) claim(old, fx.config, record("pay", "n"), 5)).claim();
    fx.update("UPDATE og_owner SET alive_until = alive_until - 60000 WHERE owner = 'old-run'");
    fx.update("UPDATE og_ledger SET lease_until = lease_until - 60000 WHERE lease_until IS NOT NULL");
    fx.update("UPDATE og_entity SET pending_until = pending_until - 60000 WHERE pending_until IS NOT NULL");
    return pay;
  }

  Guard restarted(SidecarConfig cfg) {
    return new Guard(fx.store, IdempotencyCache.DISABLED, cfg.machines(), fx.clock, "new-run");
  }

  @Test
  void restartWithAnotherFingerprintExclude_takesTheDeadClaimOverFlagged_notAKeyCollision() {
    Claim orphan = orphanPay();
    SidecarConfig cfg = changed("fingerprint-exclude: [/sent_at]", "fingerprint-exclude: [/sent_at, /note]");
    Guard g = restarted(cfg);

    ClaimResult r = claim(g, cfg, record("pay", "n"), 5);

    assertThat(r).as("the same record at the same offset").isInstanceOf(ClaimResult.Accepted.class);
    Claim c = ((ClaimResult.Accepted) r).claim();
    assertThat(c.dedupKey()).isEqualTo(orphan.dedupKey());
    assertThat(c.redelivery()).as("the business may have seen it").isTrue();
    assertThat(g.confirm(cfg.routes().get(0), c).toCompletableFuture().join()).isTrue();
    assertThat(fx.string("SELECT state FROM og_entity WHERE entity_id = 'o-1'")).isEqualTo("paid");
    assertThat(fx.string("SELECT pending_key FROM og_entity WHERE entity_id = 'o-1'")).isEqualTo("null");
    assertThat(claim(g, cfg, record("ship", "n"), 6)).as("the next event of the entity goes on")
        .isInstanceOf(ClaimResult.Accepted.class);
  }

  @Test
  void restartWithAWiderBusinessKey_takesTheDeadClaimOverUnderItsOldKey_theEntityIsNotLeftBusy() {
    Claim orphan = orphanPay();
    SidecarConfig cfg = changed("business-key: [/order_id, /event]", "business-key: [/order_id, /event, /note]");
    Guard g = restarted(cfg);

    ClaimResult r = claim(g, cfg, record("pay", "n"), 5);

    assertThat(r).as("the same record at the same offset, under a new dedup key").isInstanceOf(ClaimResult.Accepted.class);
    Claim c = ((ClaimResult.Accepted) r).claim();
    assertThat(c.dedupKey()).as("delivered under the key the business was sent").isEqualTo(orphan.dedupKey());
    assertThat(c.redelivery()).isTrue();
    assertThat(g.confirm(cfg.routes().get(0), c).toCompletableFuture().join()).isTrue();
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE status = 'PENDING'")).as("nothing left pending").isZero();
    assertThat(fx.string("SELECT state FROM og_entity WHERE entity_id = 'o-1'")).isEqualTo("paid");
    assertThat(claim(g, cfg, record("ship", "n"), 6)).isInstanceOf(ClaimResult.Accepted.class);
  }

  @Test
  void aDistinctRecordMeetingTheDeadClaim_doesNotTakeItOver() {
    orphanPay();
    SidecarConfig cfg = changed("business-key: [/order_id, /event]", "business-key: [/order_id, /event, /note]");
    Guard g = restarted(cfg);

    ClaimResult r = claim(g, cfg, record("pay", "other"), 9);

    assertThat(r).as("another record (offset 9) waits: the dead claim is not its own").isInstanceOf(ClaimResult.Wait.class);
    assertThat(fx.string("SELECT pending_key FROM og_entity WHERE entity_id = 'o-1'")).isNotEqualTo("null");
  }
}
