package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Two deployments with ledgers of their own (two databases) on one Redis with one key prefix and
 * the same route names: L1 answers "duplicate" only for facts of the ledger it stands in front of.
 */
class L1ScopeIT {
  static final String CONFIG = """
      machines:
        order:
          states: [created, paid]
          events:
            create: {to: created}
            pay: {from: [created], to: paid}
      routes:
        - name: orders
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id]
          target: 127.0.0.1:1
          redis-ttl: 1h
      """;

  GuardFixture x;
  GuardFixture y;
  /** The key prefix both deployments use (the default one would do the same). */
  final String sharedPrefix = "ogit:shared-" + UUID.randomUUID().toString().substring(0, 8) + ":";

  @BeforeEach
  void setUp() {
    x = new GuardFixture(CONFIG, 4);
    y = new GuardFixture(CONFIG, 4);
  }

  @AfterEach
  void tearDown() {
    try {
      x.close();
    } finally {
      y.close();
    }
  }

  static ClaimResult claim(GuardFixture fx, Guard g, String json, long offset) {
    return g.claim(fx.route("orders"), fx.event("orders", json), new Source("orders", 0, offset)).toCompletableFuture().join();
  }

  @Test
  void factConfirmedInOneDeployment_isClaimedInAnotherWithItsOwnLedger_notACacheHit() {
    Guard gx = x.guardWithKeyPrefix("x-1", sharedPrefix);
    Guard gy = y.guardWithKeyPrefix("y-1", sharedPrefix);
    String create = "{\"order_id\":\"o-1\",\"event\":\"create\"}";

    ClaimResult inX = claim(x, gx, create, 1);
    assertThat(inX).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(gx.confirm(x.route("orders"), ((ClaimResult.Accepted) inX).claim()).toCompletableFuture().join()).isTrue();
    // L1 is on and holds the fact for X: a copy there is a cache hit
    ClaimResult copyInX = claim(x, gx, create, 2);
    assertThat(((ClaimResult.Rejected) copyInX).verdict().getReason()).isEqualTo(Reason.CACHE_HIT);

    // Y's ledger has never seen the fact: Y applies it
    ClaimResult inY = claim(y, gy, create, 1);
    assertThat(inY).as("a fact of X's ledger is not a duplicate in Y").isInstanceOf(ClaimResult.Accepted.class);
    assertThat(gy.confirm(y.route("orders"), ((ClaimResult.Accepted) inY).claim()).toCompletableFuture().join()).isTrue();
    assertThat(y.scalar("SELECT COUNT(*) FROM og_ledger WHERE route = 'orders' AND status = 'DONE'")).isEqualTo(1);
    assertThat(y.string("SELECT state FROM og_entity WHERE machine = 'order' AND entity_id = 'o-1'")).isEqualTo("created");

    // a second sidecar on X's database shares X's keys
    Guard gx2 = x.guardWithKeyPrefix("x-2", sharedPrefix);
    ClaimResult copyInX2 = claim(x, gx2, create, 3);
    assertThat(((ClaimResult.Rejected) copyInX2).verdict().getLayer()).isEqualTo(Layer.CACHE);
  }

  @Test
  void ledgerId_isDrawnOncePerDatabase_keptByLaterMigrations_andDrawnAgainWhenDeleted() {
    assertThat(x.ledgerId).matches("[0-9a-f]{16}").isNotEqualTo(y.ledgerId);
    new Migrations(x.db, "og_").migrate();
    assertThat(x.store.ledgerId().toCompletableFuture().join()).isEqualTo(x.ledgerId);
    // an operator draws a new id (after restoring the database from a backup)
    assertThat(x.update("DELETE FROM og_ledger_id")).isEqualTo(1);
    String drawn = x.store.ledgerId().toCompletableFuture().join();
    assertThat(drawn).matches("[0-9a-f]{16}").isNotEqualTo(x.ledgerId);
    assertThat(x.store.ledgerId().toCompletableFuture().join()).isEqualTo(drawn);
  }
}
