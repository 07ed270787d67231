package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.Source;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A takeover because the claim's owner stopped heartbeating reads the owner row as a row it
 * updates, and writes it: it waits for a heartbeat that holds the row and then sees it alive, and
 * the owner row is part of what the takeover writes (on Galera: its write set, so that a heartbeat
 * certified on another node meanwhile conflicts with it; see {@code GaleraIT}).
 */
class OwnerRowTakeoverIT {
  static final String CONFIG = """
      machines:
        order:
          states: [created, to_ship, shipped]
          events:
            create: {to: created}
            prepare: {from: [created], to: to_ship}
            ship: {from: [to_ship], to: shipped}
      routes:
        - name: orders
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id]
          target: 127.0.0.1:1
      """;

  static GuardFixture fx;
  static final AtomicLong offsets = new AtomicLong();

  @BeforeAll
  static void setUp() {
    fx = new GuardFixture(CONFIG, 4);
  }

  @AfterAll
  static void tearDown() {
    fx.close();
  }

  static String order(String id, String event) {
    return "{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\"}";
  }

  static CompletableFuture<ClaimResult> claim(Guard g, String json, Source s) {
    return g.claim(fx.route("orders"), fx.event("orders", json), s).toCompletableFuture();
  }

  /** An order in to_ship whose ship is claimed (30 s lease) by {@code owner}, which heartbeated once. */
  static Claim shipClaimedBy(Guard owner, String id, Source ship) {
    owner.heartbeat().toCompletableFuture().join();
    for (String ev : List.of("create", "prepare")) {
      Claim c = ((ClaimResult.Accepted) claim(owner, order(id, ev), new Source("orders", 0, offsets.incrementAndGet())).join()).claim();
      assertThat(owner.confirm(fx.route("orders"), c).toCompletableFuture().join()).isTrue();
    }
    return ((ClaimResult.Accepted) claim(owner, order(id, "ship"), ship).join()).claim();
  }

  /** The owner's heartbeat ran out (as 5 s after a kill -9), by the database's clock. */
  static void ownerDead(Guard owner) {
    assertThat(fx.update("UPDATE og_owner SET alive_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - 1 WHERE owner = ?",
        owner.owner())).isEqualTo(1);
  }

  @Test
  void takeoverFromADeadOwner_writesTheOwnerRow() {
    Guard dead = fx.guard("dead-1", null);
    Guard heir = fx.guard("heir-1", null);
    Source ship = new Source("orders", 0, offsets.incrementAndGet());
    shipClaimedBy(dead, "o-1", ship);
    ownerDead(dead);

    ClaimResult taken = claim(heir, order("o-1", "ship"), ship).join();

    assertThat(taken).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(((ClaimResult.Accepted) taken).claim().owner()).isEqualTo("heir-1");
    assertThat(fx.scalar("SELECT taken_over FROM og_owner WHERE owner = 'dead-1'"))
        .as("the owner row the takeover judged dead is written by it").isEqualTo(1);
  }

  @Test
  void takeoverAfterTheLeaseAlone_leavesALiveOwnersRowAsItIs() {
    Guard live = fx.guard("live-2", null);
    Guard heir = fx.guard("heir-2", null);
    Source ship = new Source("orders", 0, offsets.incrementAndGet());
    shipClaimedBy(live, "o-2", ship);
    live.heartbeat().toCompletableFuture().join();
    // the lease ran out while the owner still heartbeats (a business call that hangs)
    assertThat(fx.update("UPDATE og_ledger SET lease_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - 1 WHERE owner = ?"
        + " AND status = 'PENDING'", live.owner())).isEqualTo(1);

    assertThat(claim(heir, order("o-2", "ship"), ship).join()).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(fx.scalar("SELECT taken_over FROM og_owner WHERE owner = 'live-2'")).isZero();
  }

  @Test
  void heartbeatHoldingTheOwnerRow_makesTheTakeoverWait_andThenNotTakeOver() throws Exception {
    Guard owner = fx.guard("owner-3", null);
    Guard heir = fx.guard("heir-3", null);
    Source ship = new Source("orders", 0, offsets.incrementAndGet());
    Claim held = shipClaimedBy(owner, "o-3", ship);
    ownerDead(owner);

    try (Connection hb = DriverManager.getConnection("jdbc:mariadb://" + GuardFixture.HOST + ":" + GuardFixture.PORT + "/" + fx.database,
        GuardFixture.USER, GuardFixture.PASSWORD)) {
      // the owner's heartbeat, in flight: it holds the owner row and has not committed yet
      hb.setAutoCommit(false);
      try (PreparedStatement st = hb.prepareStatement(
          "UPDATE og_owner SET alive_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + 60000 WHERE owner = ?")) {
        st.setString(1, owner.owner());
        assertThat(st.executeUpdate()).isEqualTo(1);
      }
      CompletableFuture<ClaimResult> takeover = claim(heir, order("o-3", "ship"), ship);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (takeoversRunning() == 0 && !takeover.isDone() && System.nanoTime() < deadline) {
        Thread.sleep(50);
      }
      assertThat(takeover.isDone() ? takeover.join() : null)
          .as("the takeover waits for the heartbeat that holds the owner row, it does not decide on the last committed one")
          .isNull();
      Thread.sleep(200);
      assertThat(takeoversRunning()).as("the takeover statement waits for the owner row").isEqualTo(1);
      hb.commit();

      ClaimResult r = takeover.get(10, TimeUnit.SECONDS);
      assertThat(r).as("the owner is alive once its heartbeat committed: its claim is not taken over").isInstanceOf(ClaimResult.Wait.class);
      assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.OWN_LEASE_LIVE);
    }
    assertThat(fx.string("SELECT CONCAT(owner, '/', attempts) FROM og_ledger WHERE route = 'orders' AND dedup_key = ?", held.dedupKey()))
        .isEqualTo("owner-3/1");
    assertThat(fx.scalar("SELECT taken_over FROM og_owner WHERE owner = 'owner-3'")).isZero();
    assertThat(owner.confirm(fx.route("orders"), held).toCompletableFuture().join()).as("the owner still holds its claim").isTrue();
  }

  /**
   * Takeover statements of this fixture's database still running. (Not {@code innodb_trx}: the
   * server refreshes that table only when nobody read it for 100 ms, so polling it shows an old
   * snapshot.)
   */
  static long takeoversRunning() {
    return fx.scalar("SELECT COUNT(*) FROM information_schema.processlist WHERE db = ? AND command = 'Query'"
        + " AND info LIKE 'UPDATE og_ledger l LEFT JOIN og_owner%'", fx.database);
  }
}
