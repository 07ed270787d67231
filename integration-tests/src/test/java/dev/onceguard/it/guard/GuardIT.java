package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The guard's layers and the claim/confirm protocol against the real MariaDB and Redis. */
class GuardIT {
  static final String CONFIG = """
      machines:
        order:
          states: [created, paid, to_ship, shipped, delivered, cancelled]
          terminal: [delivered, cancelled]
          events:
            create: {to: created}
            pay: {from: [created], to: paid}
            prepare: {from: [paid], to: to_ship}
            ship: {from: [to_ship], to: shipped}
            deliver: {from: [shipped], to: delivered}
            cancel: {from: [created, paid, to_ship], to: cancelled}
        parcel:
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
          business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
          fingerprint-exclude: [/message_id, /sent_at]
          target: 127.0.0.1:1
          redis-ttl: 1h
        - name: orders-by-message
          topics: [orders-m]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /message_id]
          fingerprint-exclude: [/message_id, /sent_at]
          target: 127.0.0.1:1
        - name: orders-short
          topics: [orders-short]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
          fingerprint-exclude: [/message_id, /sent_at]
          target: 127.0.0.1:1
          lease: 1s
        - name: parcels-short
          topics: [parcels-short]
          machine: parcel
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
          fingerprint-exclude: [/message_id, /sent_at]
          target: 127.0.0.1:1
          lease: 1s
        - name: parcels
          topics: [parcels]
          machine: parcel
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
          fingerprint-exclude: [/message_id, /sent_at]
          target: 127.0.0.1:1
        - name: lines-full
          topics: [lines]
          business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:1
        - name: lines-short
          topics: [lines-s]
          business-key: [/order_id, /sku_id, /batch_no]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:1
        - name: lines-kept
          topics: [lines-k]
          business-key: [/order_id, /sku_id, /batch_no]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:1
          store-payload: full
          store-payload-max-bytes: 200
        - name: lines-bare
          topics: [lines-b]
          business-key: [/order_id, /sku_id, /batch_no]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:1
          store-payload: none
      """;

  static GuardFixture fx;
  static final AtomicLong offsets = new AtomicLong();

  @BeforeAll
  static void setUp() {
    fx = new GuardFixture(CONFIG, 24);
  }

  @AfterAll
  static void tearDown() {
    fx.close();
  }

  static String order(String id, String event) {
    return order(id, event, "W1", "m-" + offsets.incrementAndGet());
  }

  static String order(String id, String event, String warehouse, String messageId) {
    return "{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\",\"sku_id\":\"S1\",\"warehouse_id\":\"" + warehouse
        + "\",\"batch_no\":7,\"message_id\":\"" + messageId + "\",\"qty\":2}";
  }

  static Source src() {
    return new Source("orders", 0, offsets.incrementAndGet());
  }

  static ClaimResult claim(Guard g, String route, String json, Source s) {
    return g.claim(fx.route(route), fx.event(route, json), s).toCompletableFuture().join();
  }

  /** Claims and, if accepted, confirms at once (as a business that said OK). */
  static Verdict apply(Guard g, String route, String json) {
    ClaimResult r = claim(g, route, json, src());
    if (r instanceof ClaimResult.Accepted a) {
      assertThat(g.confirm(fx.route(route), a.claim()).toCompletableFuture().join()).isTrue();
      return a.verdict();
    }
    if (r instanceof ClaimResult.Rejected x) {
      return x.verdict();
    }
    throw new AssertionError("unexpected " + r);
  }

  static String uniq(String p) {
    return p + "-" + offsets.incrementAndGet() + "-" + System.nanoTime();
  }

  /** Creates an order and drives it to {@code state} through the machine. */
  static String orderIn(Guard g, String state) {
    String id = uniq("o");
    List<String> path = List.of("create", "pay", "prepare", "ship", "deliver");
    List<String> states = List.of("created", "paid", "to_ship", "shipped", "delivered");
    for (int i = 0; i <= states.indexOf(state); i++) {
      assertThat(apply(g, "orders", order(id, path.get(i))).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    }
    return id;
  }

  String entityState(String id) {
    return fx.string("SELECT state FROM og_entity WHERE machine = 'order' AND entity_id = ?", id);
  }

  long ledgerRows(String route, String dedupKey) {
    return fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE route = ? AND dedup_key = ?", route, dedupKey);
  }

  // ------------------------------------------------------------------------- incident 1

  @Test
  void connectionsTheServerKilledWhileIdle_areReplaced_andTheNextStepsSucceed() throws Exception {
    // one worker, so the steps below are sure to meet the connection that was killed
    var m = fx.config.mysql();
    Db one = new Db(new dev.onceguard.proxy.config.SidecarConfig.MysqlConfig(m.host(), m.port(), m.database(), m.user(), m.password(),
        m.tablePrefix(), 1, false, m.decisionRetention()));
    Guard g = guardOwning(new MysqlGuardStore(one, "og_", 1), uniq("killed"));
    String id = orderIn(g, "paid");
    // every connection to the database is killed by the server (a restart, wait_timeout, a proxy)
    int killed = 0;
    try (java.sql.Connection admin = java.sql.DriverManager.getConnection(
            "jdbc:mariadb://" + dev.onceguard.it.ItEnv.mysqlHost() + ":" + dev.onceguard.it.ItEnv.mysqlPort() + "/",
            dev.onceguard.it.ItEnv.mysqlUser(), dev.onceguard.it.ItEnv.mysqlPassword());
        java.sql.Statement st = admin.createStatement()) {
      List<Long> ids = new ArrayList<>();
      try (java.sql.ResultSet r = st.executeQuery("SELECT id FROM information_schema.processlist WHERE db = '" + fx.database + "'")) {
        while (r.next()) {
          ids.add(r.getLong(1));
        }
      }
      for (long pid : ids) {
        st.execute("KILL CONNECTION " + pid);
        killed++;
      }
    }
    assertThat(killed).as("connections the store held").isPositive();
    // the next steps find their connections dead, and get new ones instead of an outage
    assertThat(apply(g, "orders", order(id, "prepare", "W1", "m-prepare")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(apply(g, "orders", order(id, "ship", "W1", "m-ship")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(fx.string("SELECT state FROM og_entity WHERE machine = 'order' AND entity_id = ?", id)).isEqualTo("shipped");
    g.close();
  }

  @Test
  void lateCompensation_afterRedisKeyExpired_isLedgerDuplicate_notAcceptedTwice() throws Exception {
    Guard g = fx.guard("late-" + uniq("g"));
    String id = orderIn(g, "paid");
    String compensation = order(id, "prepare", "W1", "m-original");
    assertThat(apply(g, "orders", compensation).getDisposition()).isEqualTo(Disposition.ACCEPTED);

    // while the key lives, L1 answers
    Verdict cached = apply(g, "orders", order(id, "prepare", "W1", "m-resent-1"));
    assertThat(cached.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(cached.getReason()).isEqualTo(Reason.CACHE_HIT);
    assertThat(cached.hasOriginalAgeMs()).as("L1 keeps when the original was confirmed").isTrue();
    assertThat(cached.getOriginalAgeMs()).isBetween(0L, 60_000L);

    // nine days later the idempotency key is gone
    assertThat(fx.flushRedis()).isGreaterThan(0);
    long nineDays = java.time.Duration.ofDays(9).toMillis();
    fx.clock.advance(nineDays);
    Verdict late = apply(g, "orders", order(id, "prepare", "W1", "m-resent-9-days-later"));
    assertThat(late.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(late.getLayer()).isEqualTo(Layer.LEDGER);
    assertThat(late.getReason()).isEqualTo(Reason.LEDGER_HIT);
    assertThat(late.getOriginalAgeMs()).as("age from the ledger row's confirmation").isBetween(nineDays, nineDays + 60_000L);
    g.record(late, new Source("orders", 0, 1)).toCompletableFuture().join();
    assertThat(fx.scalar("SELECT original_age_ms FROM og_decision WHERE dedup_key = ? AND reason = 'LEDGER_HIT'", late.getDedupKey()))
        .as("the decision log keeps the age too (ttl-advice --from-db reads it)").isEqualTo(late.getOriginalAgeMs());
    fx.clock.advance(-nineDays);

    // ttl-advice reads it back: a 9-day-old duplicate, which a 14-day TTL would have answered
    java.nio.file.Path config = java.nio.file.Files.createTempFile("og-ttl-advice", ".yaml");
    java.io.StringWriter out = new java.io.StringWriter();
    try {
      java.nio.file.Files.writeString(config, fx.yaml);
      int code = new picocli.CommandLine(new dev.onceguard.proxy.ops.Main()).setOut(new java.io.PrintWriter(out))
          .execute("ttl-advice", "--config", config.toString(), "--from-db", "--route", "orders");
      assertThat(code).as(out.toString()).isZero();
    } finally {
      java.nio.file.Files.deleteIfExists(config);
    }
    assertThat(out.toString()).contains("route 'orders'").contains("1 duplicates missed L1").contains("p99 9 d")
        .contains("7 d 0.0%, 14 d 100.0%");
    assertThat(entityState(id)).isEqualTo("to_ship");
    assertThat(fx.scalar("SELECT version FROM og_entity WHERE entity_id = ?", id)).isEqualTo(3);
  }

  @Test
  void resendWithNewMessageId_keyIncludesIt_contentSame_isAlreadyApplied() {
    Guard g = fx.guard(uniq("g"));
    String id = uniq("o");
    for (String ev : List.of("create", "pay", "prepare", "ship")) {
      assertThat(apply(g, "orders-by-message", order(id, ev, "W1", "m-" + ev)).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    }
    // upstream re-sent "prepare" with a new message id: a new dedup key (the id is part of it), the
    // same content (the fingerprint leaves the id out): the state machine and the fingerprint agree
    Verdict v = apply(g, "orders-by-message", order(id, "prepare", "W1", "m-prepare-resent"));
    assertThat(v.getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(v.getReason()).isEqualTo(Reason.ALREADY_APPLIED);
    assertThat(v.getCurrentState()).isEqualTo("shipped");
    assertThat(v.hasApplied()).isFalse();
  }

  @Test
  void appliedTransition_byRecordWithOtherContent_escalatesConflictingFact_namingTheAppliedRow() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "shipped");
    // a second warehouse ships the same order: a distinct fact that an order-level entity cannot
    // hold (incident 2, one layer down); never ignored
    String second = order(id, "ship", "W2", "m-w2");
    Verdict v = apply(g, "orders", second);
    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(v.getLayer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(v.getCurrentState()).isEqualTo("shipped");
    assertThat(v.getApplied().getBusinessKey()).contains("W1").doesNotContain("W2");
    assertThat(v.getApplied().getRoute()).isEqualTo("orders");
    assertThat(v.getApplied().getSourceTopic()).isEqualTo("orders");
    assertThat(v.getApplied().getDedupKey()).isEqualTo(fx.event("orders", order(id, "ship")).dedupKey());
    assertThat(differing(v)).as("the applied row's digests name what differs").containsExactly("/warehouse_id CHANGED \"W2\"");
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND event = 'ship'", id)).isEqualTo(1);
    // a re-send of "prepare" with a new batch number changes the content too: same answer
    Verdict batch = apply(g, "orders", order(id, "prepare").replace("\"batch_no\":7", "\"batch_no\":8"));
    assertThat(batch.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
  }

  @Test
  void appliedTransition_withNoLedgerRowToCompare_escalatesConflictingFact() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "paid");
    // the row that applied "pay" is gone (retention, or written outside OnceGuard)
    assertThat(fx.update("DELETE FROM og_ledger WHERE entity_id = ? AND event = 'pay'", id)).isEqualTo(1);
    fx.flushRedis();
    Verdict v = apply(g, "orders", order(id, "pay", "W1", "m-late").replace("\"batch_no\":7", "\"batch_no\":3"));
    assertThat(v.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(v.hasApplied()).isFalse();
    assertThat(v.getDetail()).contains("no confirmed ledger row");
  }

  @Test
  void appliedTransition_sameContentAppliedOnlyInAnotherMachine_isNotAlreadyApplied_butConflictingFact() {
    Guard g = fx.guard(uniq("g"), null);
    String id = uniq("o");
    // two machines whose entity ids overlap: the order and the parcel of one id, both paid
    String pay = order(id, "pay", "W1", "m-pay");
    assertThat(apply(g, "orders", order(id, "create")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(apply(g, "orders", pay).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(apply(g, "parcels", order(id, "create")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    String otherPay = pay.replace("\"batch_no\":7", "\"batch_no\":8");
    assertThat(apply(g, "parcels", otherPay).getDisposition()).isEqualTo(Disposition.ACCEPTED);

    // the order's pay arrives for the parcel: the parcel's pay was applied by other content; the
    // DONE row with this content is the order's, which says nothing about the parcel
    Verdict v = apply(g, "parcels", pay);
    assertThat(v.getReason()).as(v.getDetail()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getApplied().getRoute()).isEqualTo("parcels");
    assertThat(v.getApplied().getBusinessKey()).contains("batch_no=8");
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND event = 'pay' AND status = 'DONE'", id))
        .as("the order's and the parcel's pay").isEqualTo(2);
    // the same content on another route of the order's machine is still a re-send of what the order applied
    Verdict resent = apply(g, "orders-by-message", order(id, "pay", "W1", "m-pay-resent"));
    assertThat(resent.getReason()).isEqualTo(Reason.ALREADY_APPLIED);
  }

  // ------------------------------------------------------------------------- incident 2

  @Test
  void underSpecifiedKey_crossWarehousePair_escalatesKeyCollision() {
    Guard g = fx.guard(uniq("g"));
    String id = uniq("o");
    Verdict first = apply(g, "lines-short", order(id, "ship", "W1", "m1"));
    Verdict second = apply(g, "lines-short", order(id, "ship", "W2", "m2"));
    assertThat(first.getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(second.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(second.getReason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(second.getLayer()).isEqualTo(Layer.LEDGER);
    // and a true replay of the first is still a plain duplicate
    fx.flushRedis();
    Verdict replay = apply(g, "lines-short", order(id, "ship", "W1", "m1-resent"));
    assertThat(replay.getReason()).isEqualTo(Reason.LEDGER_HIT);
  }

  /** The fields a verdict names as differing from the applied fact. */
  static List<String> differing(Verdict v) {
    return v.getDifferingFieldsList().stream().map(d -> d.getPointer() + " " + d.getChange() + " " + d.getValue()).toList();
  }

  /**
   * Every path that can answer "duplicate" compares the fingerprint first: a changed payload under
   * a key that was applied (or is held) is escalated, never ignored, on each of them, and names the
   * field that differs, while the unchanged copy on the same path is the duplicate.
   */
  @Test
  void changedPayload_isNeverADuplicate_onL1_ledger_takeover_groupCommit_orGuardApi() throws Exception {
    // L1: the key is in Redis (the unchanged copy is a CACHE_HIT), the changed payload misses it
    Guard cached = fx.guard(uniq("fp-l1"));
    String line = uniq("fp-line");
    assertThat(apply(cached, "lines-short", order(line, "ship", "W1", "m1")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(apply(cached, "lines-short", order(line, "ship", "W1", "m1-again")).getReason()).isEqualTo(Reason.CACHE_HIT);
    Verdict l1 = apply(cached, "lines-short", order(line, "ship", "W2", "m2"));
    assertThat(l1.getReason()).as(l1.getDetail()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(differing(l1)).containsExactly("/warehouse_id CHANGED \"W2\"");
    assertThat(l1.getApplied().getBusinessKey()).isEqualTo(fx.event("lines-short", order(line, "ship")).businessKey());
    assertThat(l1.getDetail()).contains("differing fields: /warehouse_id");

    // ledger: no L1 in front; the unchanged copy is a LEDGER_HIT, the changed one a collision
    Guard ledgerOnly = guardOwning(new MysqlGuardStore(fx.db, "og_", 1), uniq("fp-ledger"));
    assertThat(apply(ledgerOnly, "lines-short", order(line, "ship", "W1", "m1-third")).getReason()).isEqualTo(Reason.LEDGER_HIT);
    Verdict ledger = apply(ledgerOnly, "lines-short", order(line, "ship", "W1", "m3").replace("\"qty\":2", "\"qty\":5"));
    assertThat(ledger.getReason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(differing(ledger)).containsExactly("/qty CHANGED 5");

    // takeover: a dead owner's claim whose lease ran out is taken over by an unchanged copy only
    Guard dead = fx.guard(uniq("fp-dead"), null);
    Guard heir = fx.guard(uniq("fp-heir"), null);
    String id = orderIn(dead, "to_ship");
    String ship = order(id, "ship", "W1", "m-ship");
    assertThat(claim(dead, "orders-short", ship, src())).isInstanceOf(ClaimResult.Accepted.class);
    sleep(1100);
    Verdict takeover = ((ClaimResult.Rejected) claim(heir, "orders-short", ship.replace("\"qty\":2", "\"qty\":3"), src())).verdict();
    assertThat(takeover.getReason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(differing(takeover)).containsExactly("/qty CHANGED 3");
    assertThat(((ClaimResult.Accepted) claim(heir, "orders-short", ship, src())).claim().redelivery()).isTrue();

    // group commit: a replay and a changed copy of an applied record, in one group behind a blocked claim
    MysqlGuardStore grouped = new MysqlGuardStore(fx.db, "og_", 1);
    Guard g = guardOwning(grouped, uniq("fp-grp"));
    Guard setup = fx.guard(uniq("fp-grp-setup"), null);
    String blocker = orderIn(setup, "created");
    String paid = orderIn(setup, "paid");
    RowLock lock = RowLock.hold(blocker);
    var first = claimOrder(g, order(blocker, "pay"));
    var replay = claimOrder(g, order(paid, "pay"));
    var changed = claimOrder(g, order(paid, "pay").replace("\"qty\":2", "\"qty\":4"));
    Thread.sleep(100);
    lock.release();
    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(((ClaimResult.Rejected) replay.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.LEDGER_HIT);
    Verdict group = ((ClaimResult.Rejected) changed.get(10, TimeUnit.SECONDS)).verdict();
    assertThat(group.getReason()).isEqualTo(Reason.KEY_COLLISION);
    assertThat(differing(group)).containsExactly("/qty CHANGED 4");
    assertThat(grouped.groupCounts()[1]).as("the replay and the changed copy were claimed in one group").isEqualTo(3);

    // Guard API: the same guard behind the gRPC service, L1 in front
    try (dev.onceguard.proxy.time.ExecutorScheduler timer = new dev.onceguard.proxy.time.ExecutorScheduler("fp-api")) {
      dev.onceguard.proxy.api.GuardService api = new dev.onceguard.proxy.api.GuardService(fx.config, cached, timer);
      dev.onceguard.v1.SubmitResponse apiChanged = submit(api, "lines-short", order(line, "ship", "W3", "m4"));
      assertThat(apiChanged.getOutcome()).isEqualTo(dev.onceguard.v1.SubmitResponse.Outcome.CONFLICT);
      assertThat(differing(apiChanged.getVerdict())).containsExactly("/warehouse_id CHANGED \"W3\"");
      assertThat(submit(api, "lines-short", order(line, "ship", "W1", "m5")).getOutcome())
          .isEqualTo(dev.onceguard.v1.SubmitResponse.Outcome.DUPLICATE);
    }
  }

  /**
   * Explain shows what a row keeps of the applied record, as its route says: store-payload full
   * keeps the value (up to its cap) and the digests, none keeps neither (and a conflict then names
   * no fields); the source coordinates are always there.
   */
  @Test
  void explain_returnsTheAppliedFactsSourceAndKeptContent_asTheRouteOptsIn() {
    Guard g = fx.guard(uniq("kept"), null);
    String line = order(uniq("kept"), "ship", "W1", "m1");
    Source at = src();
    ClaimResult.Accepted a = (ClaimResult.Accepted) claim(g, "lines-kept", line, at);
    assertThat(g.confirm(fx.route("lines-kept"), a.claim()).toCompletableFuture().join()).isTrue();

    dev.onceguard.v1.LedgerEntry kept = g.explain(fx.route("lines-kept"), a.claim().dedupKey(), null, 5).toCompletableFuture().join()
        .getLedger(0);
    assertThat(kept.getSourceTopic() + "/" + kept.getSourcePartition() + "@" + kept.getSourceOffset()).isEqualTo(at.toString());
    assertThat(kept.getPayload().toStringUtf8()).isEqualTo(line);
    assertThat(kept.getFieldDigestsList()).extracting(dev.onceguard.v1.FieldDigest::getPointer)
        .containsExactly("/batch_no", "/event", "/order_id", "/qty", "/sku_id", "/warehouse_id");
    Verdict collision = apply(g, "lines-kept", line.replace("\"W1\"", "\"W2\""));
    assertThat(differing(collision)).containsExactly("/warehouse_id CHANGED \"W2\"");

    String big = order(uniq("kept-big"), "ship").replace("\"qty\":2", "\"qty\":2,\"note\":\"" + "n".repeat(300) + "\"");
    ClaimResult.Accepted b = (ClaimResult.Accepted) claim(g, "lines-kept", big, src());
    dev.onceguard.v1.LedgerEntry cut = g.explain(fx.route("lines-kept"), b.claim().dedupKey(), null, 5).toCompletableFuture().join()
        .getLedger(0);
    assertThat(cut.hasPayload()).isFalse();
    assertThat(cut.getPayloadOmittedBytes()).isEqualTo(big.length());
    assertThat(cut.getFieldDigestsCount()).isEqualTo(7);

    String bareLine = order(uniq("bare"), "ship", "W1", "m1");
    assertThat(apply(g, "lines-bare", bareLine).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    Verdict bare = apply(g, "lines-bare", bareLine.replace("\"W1\"", "\"W2\""));
    assertThat(bare.getReason()).as("the fingerprint still decides").isEqualTo(Reason.KEY_COLLISION);
    assertThat(bare.getDifferingFieldsList()).as("no digests kept: no fields named").isEmpty();
    dev.onceguard.v1.LedgerEntry none = g.explain(fx.route("lines-bare"), bare.getDedupKey(), null, 5).toCompletableFuture().join()
        .getLedger(0);
    assertThat(none.getFieldDigestsCount()).isZero();
    assertThat(none.hasPayload()).isFalse();
    assertThat(none.getPayloadOmittedBytes()).isZero();
  }

  /** One Submit through the service, answered in-process. */
  static dev.onceguard.v1.SubmitResponse submit(dev.onceguard.proxy.api.GuardService api, String route, String json) throws Exception {
    java.util.concurrent.CompletableFuture<dev.onceguard.v1.SubmitResponse> answer = new java.util.concurrent.CompletableFuture<>();
    api.submit(dev.onceguard.v1.SubmitRequest.newBuilder().setRoute(route)
        .setValue(com.google.protobuf.ByteString.copyFromUtf8(json)).build(), new io.grpc.stub.StreamObserver<>() {
          @Override
          public void onNext(dev.onceguard.v1.SubmitResponse r) {
            answer.complete(r);
          }

          @Override
          public void onError(Throwable t) {
            answer.completeExceptionally(t);
          }

          @Override
          public void onCompleted() {}
        });
    return answer.get(10, TimeUnit.SECONDS);
  }

  @Test
  void fullKey_crossWarehousePair_bothAccepted() {
    Guard g = fx.guard(uniq("g"));
    String id = uniq("o");
    assertThat(apply(g, "lines-full", order(id, "ship", "W1", "m1")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(apply(g, "lines-full", order(id, "ship", "W2", "m2")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE route = 'lines-full' AND entity_id IS NULL AND business_key LIKE ?",
        "order_id=" + id + ",%")).isEqualTo(2);
  }

  // ------------------------------------------------------------------------- incident 3

  /**
   * Each round: one order in to_ship, N callers with their own connections claim "ship" at the
   * same instant. Exactly one is accepted and confirmed; all others end as duplicates — for the
   * same dedup key (the ledger stops them) and for different keys (only the CAS can).
   */
  @ParameterizedTest(name = "{0} callers, different keys = {1}")
  @org.junit.jupiter.params.provider.CsvSource({"4,false", "16,false", "4,true", "16,true"})
  void concurrentDuplicates_exactlyOneAcceptedPerRound(int callers, boolean differentKeys) throws Exception {
    int rounds = 200;
    Guard setup = fx.guard(uniq("setup"), null);
    List<Guard> guards = new ArrayList<>();
    for (int i = 0; i < callers; i++) {
      guards.add(fx.guard(uniq("caller" + i), null)); // no L1: every caller must reach MySQL
    }
    String route = differentKeys ? "orders-by-message" : "orders";
    ExecutorService pool = Executors.newFixedThreadPool(callers);
    int accepted = 0;
    int duplicates = 0;
    List<String> others = new ArrayList<>();
    try {
      for (int round = 0; round < rounds; round++) {
        String id = uniq("c");
        for (String ev : List.of("create", "pay", "prepare")) {
          assertThat(apply(setup, route, order(id, ev)).getDisposition()).isEqualTo(Disposition.ACCEPTED);
        }
        List<java.util.concurrent.Callable<Verdict>> copies = new ArrayList<>();
        for (int i = 0; i < callers; i++) {
          Guard g = guards.get(i);
          String json = order(id, "ship", "W1", differentKeys ? "m-" + i : "same");
          int partition = round % 8;
          copies.add(() -> decide(g, route, json, new Source("orders", partition, offsets.incrementAndGet())));
        }
        ClaimLoop.Round r = ClaimLoop.atOnce(pool, copies, 30);
        assertThat(r.accepted()).as("accepted in round %d", round).isEqualTo(1);
        accepted += r.accepted();
        duplicates += r.duplicates();
        others.addAll(r.others());
        assertThat(entityState(id)).isEqualTo("shipped");
        assertThat(fx.scalar("SELECT version FROM og_entity WHERE entity_id = ?", id)).isEqualTo(4);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(others).isEmpty();
    assertThat(accepted).isEqualTo(rounds);
    assertThat(duplicates).isEqualTo(rounds * (callers - 1));
  }

  /** Claims until the verdict is final (waiting out busy entities), confirming an acceptance. */
  static Verdict decide(Guard g, String route, String json, Source s) throws InterruptedException {
    return ClaimLoop.decide(g, fx.route(route), fx.event(route, json), s, 20_000, null);
  }

  // ------------------------------------------------------------------------- order and legality

  @Test
  void deliveredBeforeShipped_waitsAsEarlyArrival_thenOutOfOrderOnTimeout() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "to_ship");
    ClaimResult early = claim(g, "orders", order(id, "deliver"), src());
    assertThat(early).isInstanceOf(ClaimResult.Wait.class);
    ClaimResult.Wait w = (ClaimResult.Wait) early;
    assertThat(w.kind()).isEqualTo(ClaimResult.Wait.Kind.EARLY_ARRIVAL);
    assertThat(w.ifTimedOut().getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(w.ifTimedOut().getReason()).isEqualTo(Reason.OUT_OF_ORDER);
    assertThat(w.ifTimedOut().getCurrentState()).isEqualTo("to_ship");
    assertThat(w.ifTimedOut().getExpectedFromStatesList()).containsExactly("shipped");
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND event = 'deliver'", id)).isZero();

    // once "shipped" arrives, the waiting "deliver" applies: the swap heals
    assertThat(apply(g, "orders", order(id, "ship")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(apply(g, "orders", order(id, "deliver")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(entityState(id)).isEqualTo("delivered");
  }

  @Test
  void eventForEntityNotCreatedYet_isEarlyArrival() {
    Guard g = fx.guard(uniq("g"));
    ClaimResult r = claim(g, "orders", order(uniq("ghost"), "pay"), src());
    assertThat(r).isInstanceOf(ClaimResult.Wait.class);
    assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.EARLY_ARRIVAL);
  }

  @Test
  void transitionFromTerminalState_escalatesIllegalTransition() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "paid");
    assertThat(apply(g, "orders", order(id, "cancel")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    Verdict v = apply(g, "orders", order(id, "prepare"));
    assertThat(v.getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getReason()).isEqualTo(Reason.ILLEGAL_TRANSITION);
    assertThat(v.getLayer()).isEqualTo(Layer.STATE_MACHINE);
    assertThat(v.getCurrentState()).isEqualTo("cancelled");
    assertThat(entityState(id)).isEqualTo("cancelled");
  }

  @Test
  void multiFromEvent_recordsTheActualPreviousState() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "to_ship");
    ClaimResult r = claim(g, "orders", order(id, "cancel"), src());
    assertThat(r).isInstanceOf(ClaimResult.Accepted.class);
    Claim c = ((ClaimResult.Accepted) r).claim();
    assertThat(c.fromState()).isEqualTo("to_ship");
    assertThat(fx.string("SELECT from_state FROM og_ledger WHERE route = 'orders' AND dedup_key = ?", c.dedupKey())).isEqualTo("to_ship");
    // abort restores exactly that state
    assertThat(g.abort(c).toCompletableFuture().join()).isTrue();
    assertThat(entityState(id)).isEqualTo("to_ship");
  }

  // ------------------------------------------------------------------------- bad input

  @Test
  void badInput_escalatedWithReason_nothingWritten() {
    long before = fx.scalar("SELECT COUNT(*) FROM og_ledger");
    Extraction missing = fx.extract("orders", "{\"order_id\":\"x1\",\"event\":\"pay\",\"sku_id\":\"S\",\"batch_no\":1}");
    Extraction nullField = fx.extract("orders", "{\"order_id\":\"x1\",\"event\":\"pay\",\"sku_id\":\"S\",\"warehouse_id\":null,\"batch_no\":1}");
    Extraction garbage = fx.extract("orders", "{\"order_id\": \"x1\", oops");
    Extraction tombstone = fx.extract("orders", null);
    Extraction unknown = fx.extract("orders", order("x1", "teleport"));
    assertThat(((Extraction.Failed) missing).reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(((Extraction.Failed) missing).detail()).contains("warehouse_id");
    assertThat(((Extraction.Failed) nullField).reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(((Extraction.Failed) garbage).reason()).isEqualTo(Reason.MALFORMED);
    assertThat(((Extraction.Failed) tombstone).reason()).isEqualTo(Reason.MALFORMED);
    assertThat(((Extraction.Failed) unknown).reason()).isEqualTo(Reason.UNKNOWN_EVENT);
    assertThat(((Extraction.Failed) unknown).entityId()).isEqualTo("x1");
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger")).isEqualTo(before);
  }

  // ------------------------------------------------------------------------- Redis outage

  /** The same script of records must get the same dispositions with Redis up, down or flushed. */
  @Test
  void redisDownOrFlushed_dispositionsIdenticalToRunWithRedis() {
    List<Verdict> withRedis = script(fx.guard(uniq("r"), GuardFixture.REDIS), false);
    List<Verdict> closedPort = script(fx.guard(uniq("nr"), "redis://127.0.0.1:1"), false);
    List<Verdict> flushed = script(fx.guard(uniq("fr"), GuardFixture.REDIS), true);
    assertThat(withRedis).hasSize(closedPort.size());
    for (int i = 0; i < withRedis.size(); i++) {
      assertThat(closedPort.get(i).getDisposition()).as("record %d", i).isEqualTo(withRedis.get(i).getDisposition());
      assertThat(flushed.get(i).getDisposition()).as("record %d", i).isEqualTo(withRedis.get(i).getDisposition());
      assertThat(sameMeaning(closedPort.get(i).getReason(), withRedis.get(i).getReason())).as("record %d", i).isTrue();
      assertThat(sameMeaning(flushed.get(i).getReason(), withRedis.get(i).getReason())).as("record %d", i).isTrue();
    }
    assertThat(withRedis.stream().filter(v -> v.getReason() == Reason.CACHE_HIT)).isNotEmpty();
    assertThat(closedPort.stream().filter(v -> v.getReason() == Reason.CACHE_HIT)).isEmpty();
  }

  /** A cache hit and a ledger hit mean the same thing: only the layer that noticed differs. */
  private static boolean sameMeaning(Reason a, Reason b) {
    boolean ra = a == Reason.CACHE_HIT || a == Reason.LEDGER_HIT;
    boolean rb = b == Reason.CACHE_HIT || b == Reason.LEDGER_HIT;
    return a == b || (ra && rb);
  }

  private List<Verdict> script(Guard g, boolean flushMidway) {
    List<Verdict> out = new ArrayList<>();
    for (int n = 0; n < 20; n++) {
      String id = uniq("s");
      out.add(apply(g, "orders", order(id, "create", "W1", "a")));
      out.add(apply(g, "orders", order(id, "create", "W1", "a-again")));
      out.add(apply(g, "orders", order(id, "pay", "W1", "b")));
      if (flushMidway && n == 10) {
        fx.flushRedis();
      }
      out.add(apply(g, "orders", order(id, "pay", "W1", "b-again")));
      out.add(apply(g, "orders", order(id, "cancel", "W1", "c")));
      out.add(apply(g, "orders", order(id, "prepare", "W1", "d")));
      out.add(apply(g, "orders", order(id, "create", "W1", "a-late")));
    }
    return out;
  }

  // ------------------------------------------------------------------------- abort

  @Test
  void abortAfterBusinessRejection_restoresEntity_keepsRejectedRow_replayFlaggedRedelivery() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "to_ship");
    String ship = order(id, "ship", "W1", "m-ship");
    ExtractedEvent e = fx.event("orders", ship);
    Source s = src();
    ClaimResult r = claim(g, "orders", ship, s);
    Claim c = ((ClaimResult.Accepted) r).claim();
    assertThat(c.redelivery()).isFalse();
    assertThat(entityState(id)).isEqualTo("shipped");
    assertThat(g.abort(c).toCompletableFuture().join()).isTrue();
    assertThat(entityState(id)).isEqualTo("to_ship");
    assertThat(fx.scalar("SELECT version FROM og_entity WHERE entity_id = ?", id)).isEqualTo(3);
    assertThat(fx.string("SELECT COALESCE(pending_key, 'none') FROM og_entity WHERE entity_id = ?", id)).isEqualTo("none");
    assertThat(fx.string("SELECT status FROM og_ledger WHERE route = 'orders' AND dedup_key = ?", e.dedupKey())).isEqualTo("REJECTED");
    // Kafka replays the same record (a rebalance): the business has seen it, so it is flagged
    ClaimResult replay = claim(g, "orders", ship, s);
    Claim again = ((ClaimResult.Accepted) replay).claim();
    assertThat(again.redelivery()).isTrue();
    assertThat(again.attempts()).isEqualTo(2);
    assertThat(entityState(id)).isEqualTo("shipped");
    assertThat(g.abort(again).toCompletableFuture().join()).isTrue();
    // the operator fixed the business and re-drives the record (a new offset): accepted, flagged
    ClaimResult redrive = claim(g, "orders", ship, src());
    Claim third = ((ClaimResult.Accepted) redrive).claim();
    assertThat(third.redelivery()).isTrue();
    assertThat(third.attempts()).isEqualTo(3);
    assertThat(g.confirm(fx.route("orders"), third).toCompletableFuture().join()).isTrue();
    assertThat(entityState(id)).isEqualTo("shipped");
    assertThat(ledgerRows("orders", e.dedupKey())).isEqualTo(1);
  }

  /**
   * A lost CAS reads the entity and the ledger row of the claim's own key in one statement (what
   * lets a same-key copy that lost the entity to its original be answered by the ledger). Driven on
   * the store: no row under the key, then a REJECTED one claimed again on a cancelled entity.
   */
  @Test
  void lostCas_readsTheEntityAndTheKeysOwnLedgerRowTogether() {
    Guard g = fx.guard(uniq("g"), null);
    String id = orderIn(g, "to_ship");
    String ship = order(id, "ship", "W1", "m-ship");
    ExtractedEvent e = fx.event("orders", ship);
    EventConfig shipEvent = fx.config.machines().get("order").events().get("ship");
    GuardStore.ClaimCommand cmd = new GuardStore.ClaimCommand("orders", "order", shipEvent, e, src(), "cas-lost-owner",
        System.currentTimeMillis(), 30_000L);
    Claim c = ((ClaimResult.Accepted) claim(g, "orders", ship, src())).claim();
    assertThat(g.abort(c).toCompletableFuture().join()).isTrue();
    assertThat(apply(g, "orders", order(id, "cancel")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    LedgerRow rejected = fx.store.ledgerRow("orders", e.dedupKey()).toCompletableFuture().join();
    assertThat(rejected.rejected()).isTrue();

    ClaimOutcome again = fx.store.takeOver(cmd, rejected, false).toCompletableFuture().join();

    assertThat(again).isInstanceOfSatisfying(ClaimOutcome.CasLost.class, lost -> {
      assertThat(lost.entity().state()).isEqualTo("cancelled");
      assertThat(lost.keyRow()).as("the key's own row, read with the entity").isNotNull();
      assertThat(lost.keyRow().dedupKey()).isEqualTo(e.dedupKey());
      assertThat(lost.keyRow().status()).as("the claim of it again was rolled back").isEqualTo("REJECTED");
    });
    String other = order(id, "deliver", "W1", "m-other");
    GuardStore.ClaimCommand noRow = new GuardStore.ClaimCommand("orders", "order", fx.config.machines().get("order").events().get("deliver"),
        fx.event("orders", other), src(), "cas-lost-owner", System.currentTimeMillis(), 30_000L);
    assertThat(fx.store.claim(noRow).toCompletableFuture().join()).isInstanceOfSatisfying(ClaimOutcome.CasLost.class, lost -> {
      assertThat(lost.entity().state()).isEqualTo("cancelled");
      assertThat(lost.keyRow()).as("nothing under the key: its INSERT was rolled back").isNull();
    });
    assertThat(ledgerRows("orders", fx.event("orders", other).dedupKey())).isZero();
  }

  @Test
  void abortOfUnseenClaim_deletesLedgerRow_nextClaimIsFresh() {
    Guard g = fx.guard(uniq("g"));
    String id = orderIn(g, "to_ship");
    String ship = order(id, "ship", "W1", "m-ship");
    Source s = src();
    Claim c = ((ClaimResult.Accepted) claim(g, "orders", ship, s)).claim();
    assertThat(g.abort(c, false).toCompletableFuture().join()).isTrue();
    assertThat(ledgerRows("orders", c.dedupKey())).isZero();
    Claim fresh = ((ClaimResult.Accepted) claim(g, "orders", ship, s)).claim();
    assertThat(fresh.redelivery()).isFalse();
    assertThat(fresh.attempts()).isEqualTo(1);
    assertThat(g.confirm(fx.route("orders"), fresh).toCompletableFuture().join()).isTrue();
  }

  @Test
  void abortOfCreatingEvent_removesEntity() {
    Guard g = fx.guard(uniq("g"));
    String id = uniq("o");
    Claim c = ((ClaimResult.Accepted) claim(g, "orders", order(id, "create"), src())).claim();
    assertThat(g.abort(c).toCompletableFuture().join()).isTrue();
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_entity WHERE entity_id = ?", id)).isZero();
  }

  // ------------------------------------------------------------------------- leases

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  @Test
  void leaseExpiry_deadOwnersClaimTakenOver_flaggedRedelivery_liveLeaseNotStolen() {
    Guard dead = fx.guard(uniq("dead"), null);
    Guard heir = fx.guard(uniq("heir"), null);
    String id = orderIn(dead, "to_ship");
    String ship = order(id, "ship", "W1", "m");
    Source same = src();
    Claim first = ((ClaimResult.Accepted) claim(dead, "orders-short", ship, same)).claim();
    assertThat(first.redelivery()).isFalse();
    // the owner "dies" here: never confirms

    // live lease: a copy from another source record is a duplicate in flight ...
    ClaimResult other = claim(heir, "orders-short", ship, src());
    assertThat(((ClaimResult.Rejected) other).verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(((ClaimResult.Rejected) other).verdict().getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    // ... and Kafka's redelivery of the same record waits for the lease, it is never a duplicate
    ClaimResult redelivered = claim(heir, "orders-short", ship, same);
    assertThat(redelivered).isInstanceOf(ClaimResult.Wait.class);
    assertThat(((ClaimResult.Wait) redelivered).kind()).isEqualTo(ClaimResult.Wait.Kind.OWN_LEASE_LIVE);
    assertThat(((ClaimResult.Wait) redelivered).retryAtMillis() - fx.clock.nowMillis()).isBetween(1L, 1000L);

    sleep(1100); // the lease is judged by the database's clock: real time must pass
    ClaimResult after = claim(heir, "orders-short", ship, same);
    Claim taken = ((ClaimResult.Accepted) after).claim();
    assertThat(taken.redelivery()).isTrue();
    assertThat(taken.attempts()).isEqualTo(2);
    assertThat(taken.owner()).isEqualTo(heir.owner());
    assertThat(taken.fromState()).isEqualTo("to_ship");
    // the dead owner can no longer confirm; the heir can
    assertThat(dead.confirm(fx.route("orders-short"), first).toCompletableFuture().join()).isFalse();
    assertThat(heir.confirm(fx.route("orders-short"), taken).toCompletableFuture().join()).isTrue();
    assertThat(entityState(id)).isEqualTo("shipped");
    assertThat(fx.string("SELECT status FROM og_ledger WHERE route = 'orders-short' AND dedup_key = ?", taken.dedupKey())).isEqualTo("DONE");
  }

  @Test
  void podClockTenSecondsFast_cannotTakeOverLiveClaim() {
    Guard owner = fx.guard(uniq("owner"), null);
    GuardFixture.ManualClock fast = new GuardFixture.ManualClock();
    fast.advance(10_000);
    Guard skewed = fx.guard(uniq("fast"), null, fast);
    String id = orderIn(owner, "to_ship");
    String ship = order(id, "ship", "W1", "m");
    Source same = src();
    Claim c = ((ClaimResult.Accepted) claim(owner, "orders", ship, same)).claim(); // 30 s lease
    // by the fast pod's clock the lease has 20 s left, by a pod 40 s fast it would be over: only
    // the database's clock counts, so the claim is live for both
    fast.advance(30_000);
    ClaimResult r = claim(skewed, "orders", ship, same);
    assertThat(r).isInstanceOf(ClaimResult.Wait.class);
    assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.OWN_LEASE_LIVE);
    assertThat(fx.string("SELECT owner FROM og_ledger WHERE route = 'orders' AND dedup_key = ?", c.dedupKey())).isEqualTo(owner.owner());
    assertThat(owner.confirm(fx.route("orders"), c).toCompletableFuture().join()).isTrue();
  }

  @Test
  void ownerStoppedHeartbeating_claimTakenOverBeforeLeaseEnds_liveOwnerKeepsIt() {
    Guard alive = fx.guard(uniq("alive"), null);
    Guard crashed = fx.guard(uniq("crashed"), null);
    Guard heir = fx.guard(uniq("heir"), null);
    alive.heartbeat().toCompletableFuture().join();
    crashed.heartbeat().toCompletableFuture().join();
    String a = orderIn(alive, "to_ship");
    String b = orderIn(crashed, "to_ship");
    Source sa = src();
    Source sb = src();
    Claim ca = ((ClaimResult.Accepted) claim(alive, "orders", order(a, "ship"), sa)).claim(); // 30 s leases
    Claim cb = ((ClaimResult.Accepted) claim(crashed, "orders", order(b, "ship"), sb)).claim();
    // one owner keeps heartbeating, the other stops (kill -9); its row expires after OWNER_TTL
    long deadline = System.currentTimeMillis() + Guard.OWNER_TTL.toMillis() + 3_000;
    ClaimResult taken = null;
    while (System.currentTimeMillis() < deadline) {
      alive.heartbeat().toCompletableFuture().join();
      taken = claim(heir, "orders", order(b, "ship"), sb);
      if (taken instanceof ClaimResult.Accepted) {
        break;
      }
      assertThat(((ClaimResult.Wait) taken).retryAtMillis() - fx.clock.nowMillis()).isLessThanOrEqualTo(Guard.OWNER_TTL.toMillis());
      sleep(200);
    }
    assertThat(taken).as("taken over within the owner TTL, long before the 30 s lease").isInstanceOf(ClaimResult.Accepted.class);
    Claim tb = ((ClaimResult.Accepted) taken).claim();
    assertThat(tb.redelivery()).isTrue();
    assertThat(crashed.confirm(fx.route("orders"), cb).toCompletableFuture().join()).isFalse();
    assertThat(heir.confirm(fx.route("orders"), tb).toCompletableFuture().join()).isTrue();
    // the heartbeating owner's claim was never taken
    ClaimResult notTaken = claim(heir, "orders", order(a, "ship"), sa);
    assertThat(notTaken).isInstanceOf(ClaimResult.Wait.class);
    assertThat(alive.confirm(fx.route("orders"), ca).toCompletableFuture().join()).isTrue();
    // a graceful stop retires the owner: its leftovers are taken over at once
    Guard leaving = fx.guard(uniq("leaving"), null);
    leaving.heartbeat().toCompletableFuture().join();
    String c = orderIn(leaving, "to_ship");
    Source sc = src();
    claim(leaving, "orders", order(c, "ship"), sc);
    leaving.retire().toCompletableFuture().join();
    assertThat(claim(heir, "orders", order(c, "ship"), sc)).isInstanceOf(ClaimResult.Accepted.class);
  }

  @Test
  void kafkaCopyOfKeyHeldByApiClaim_waitsForTheClaim_inTheSameProcessAndInAnother() {
    Guard g = fx.guard(uniq("api"), null);
    Guard other = fx.guard(uniq("other"), null);
    String id = orderIn(g, "to_ship");
    String ship = order(id, "ship", "W1", "m");
    Claim api = ((ClaimResult.Accepted) claim(g, "orders", ship, Source.api(uniq("req")))).claim();
    ClaimResult here = claim(g, "orders", ship, src());
    ClaimResult there = claim(other, "orders", ship, src());
    for (ClaimResult r : List.of(here, there)) {
      assertThat(r).isInstanceOf(ClaimResult.Wait.class);
      assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.OWN_LEASE_LIVE);
      assertThat(((ClaimResult.Wait) r).ifTimedOut().getReason()).isEqualTo(Reason.IN_FLIGHT);
    }
    assertThat(g.confirm(fx.route("orders"), api).toCompletableFuture().join()).isTrue();
    assertThat(((ClaimResult.Rejected) claim(other, "orders", ship, src())).verdict().getReason()).isEqualTo(Reason.LEDGER_HIT);
  }

  @Test
  void expiredApiClaim_whoseKeyIsAlsoPendingInAnotherMachine_isNotUndone() {
    Guard g = fx.guard(uniq("amb"), null);
    String id = orderIn(g, "created");
    assertThat(apply(g, "parcels-short", order(id, "create")).getDisposition()).isEqualTo(Disposition.ACCEPTED);
    // the same event and business key pending in both machines: a Kafka claim on the order, an
    // API claim on the parcel (same entity id, same dedup key)
    String pay = order(id, "pay");
    Claim kafka = ((ClaimResult.Accepted) claim(g, "orders-short", pay, src())).claim();
    Claim api = ((ClaimResult.Accepted) claim(g, "parcels-short", pay, Source.api(uniq("req")))).claim();
    assertThat(api.dedupKey()).isEqualTo(kafka.dedupKey());

    sleep(1000 + 2_500); // both 1 s leases and the 2 s grace are over (database time)
    // the order is busy with an expired claim; two PENDING rows share its key, so which one holds
    // the order cannot be told: nothing is undone, the order's next event waits
    ClaimResult cancel = claim(fx.guard(uniq("next"), null), "orders-short", order(id, "cancel"), src());
    assertThat(cancel).isInstanceOf(ClaimResult.Wait.class);
    assertThat(((ClaimResult.Wait) cancel).kind()).isEqualTo(ClaimResult.Wait.Kind.ENTITY_BUSY);
    assertThat(fx.string("SELECT COUNT(*) FROM og_ledger WHERE dedup_key = ? AND status = 'PENDING'", kafka.dedupKey()))
        .isEqualTo("2");
    assertThat(entityState(id)).as("the order still holds its pending pay").isEqualTo("paid");
    assertThat(fx.string("SELECT state FROM og_entity WHERE machine = 'parcel' AND entity_id = ?", id)).isEqualTo("paid");
    assertThat(g.abort(kafka).toCompletableFuture().join()).isTrue();
    assertThat(g.abort(api).toCompletableFuture().join()).isTrue();
  }

  @Test
  void renew_extendsLease_soItIsNotTakenOver() {
    Guard owner = fx.guard(uniq("owner"), null);
    Guard other = fx.guard(uniq("other"), null);
    String id = orderIn(owner, "to_ship");
    String ship = order(id, "ship");
    Source s = src();
    Claim c = ((ClaimResult.Accepted) claim(owner, "orders-short", ship, s)).claim();
    sleep(600);
    Claim renewed = owner.renew(fx.route("orders-short"), c).toCompletableFuture().join();
    assertThat(renewed).isNotNull();
    sleep(600); // past the original 1 s lease, inside the renewed one
    assertThat(claim(other, "orders-short", ship, s)).isInstanceOf(ClaimResult.Wait.class);
    assertThat(owner.confirm(fx.route("orders-short"), renewed).toCompletableFuture().join()).isTrue();
  }

  // ------------------------------------------------------------------------- contention

  /**
   * Concurrent INSERTs of one new dedup key whose CAS then fails deadlock inside InnoDB (the first
   * inserter rolls back, the waiters' shared locks collide). That is a lost race, not an outage:
   * retried inside the guard, counted, never surfaced as a store failure.
   */
  @Test
  void concurrentDuplicateInserts_thatDeadlock_areRetriedAsContention_notStoreFailures() throws Exception {
    Guard setup = fx.guard(uniq("setup"), null);
    List<Guard> guards = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      // a store each, as 8 sidecars have: one store writes concurrent claims as one group
      // transaction, where the same new key twice is a plain duplicate, never a deadlock
      guards.add(guardOwning(new MysqlGuardStore(fx.db, "og_", 1), uniq("dl" + i)));
    }
    ExecutorService pool = Executors.newFixedThreadPool(guards.size());
    List<Throwable> failures = new ArrayList<>();
    long contention = 0;
    try {
      for (int round = 0; round < 60 && contention == 0; round++) {
        String id = orderIn(setup, "created");
        // "deliver" on a created order: every claim inserts the same new ledger row, loses the
        // CAS and rolls back
        String deliver = order(id, "deliver", "W1", "m");
        CountDownLatch go = new CountDownLatch(1);
        List<Future<ClaimResult>> fs = new ArrayList<>();
        for (Guard g : guards) {
          fs.add(pool.submit(() -> {
            go.await();
            return claim(g, "orders", deliver, src());
          }));
        }
        go.countDown();
        for (Future<ClaimResult> f : fs) {
          try {
            ClaimResult r = f.get(30, TimeUnit.SECONDS);
            assertThat(r).isInstanceOf(ClaimResult.Wait.class);
            assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.EARLY_ARRIVAL);
          } catch (java.util.concurrent.ExecutionException e) {
            failures.add(e.getCause());
          }
        }
        contention = guards.stream().mapToLong(Guard::contentionRetries).sum();
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(failures).as("no claim failed").isEmpty();
    assertThat(contention).as("InnoDB deadlocks were met and retried").isPositive();
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE event = 'deliver' AND route = 'orders'")).isZero();
  }

  // ------------------------------------------------------------------------- group commit

  /**
   * A guard without L1 on a store of its own over the fixture's database (as another sidecar has);
   * never closed, since closing the store would close the shared connection pool.
   */
  static Guard guardOwning(MysqlGuardStore store, String owner) {
    return new Guard(store, IdempotencyCache.DISABLED, fx.config.machines(), fx.clock, owner);
  }

  /** A claim of {@code json} on the orders route, straight to the store (no L1). */
  static java.util.concurrent.CompletableFuture<ClaimResult> claimOrder(Guard g, String json) {
    return g.claimInStore(fx.route("orders"), fx.event("orders", json), src()).toCompletableFuture();
  }

  /** A row lock on an order entity, held by a transaction of its own until released. */
  record RowLock(java.util.concurrent.CompletableFuture<Void> unlock, java.util.concurrent.CompletableFuture<Object> tx) {
    static RowLock hold(String orderId) throws Exception {
      java.util.concurrent.CompletableFuture<Void> locked = new java.util.concurrent.CompletableFuture<>();
      java.util.concurrent.CompletableFuture<Void> unlock = new java.util.concurrent.CompletableFuture<>();
      var tx = fx.db.<Object>inTransaction(c -> {
        try (var st = c.prepareStatement("SELECT state FROM og_entity WHERE machine = 'order' AND entity_id = ? FOR UPDATE")) {
          st.setString(1, orderId);
          st.executeQuery().close();
        }
        locked.complete(null);
        try {
          unlock.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
          throw new IllegalStateException("the row lock was never released", e);
        }
        return orderId;
      });
      locked.get(10, TimeUnit.SECONDS);
      return new RowLock(unlock, tx);
    }

    void release() throws Exception {
      unlock.complete(null);
      tx.get(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void groupCommit_conflictingRecordsInAGroup_classifiedAlone_othersCommit() throws Exception {
    // one group slot, held by a claim that waits on a row lock: everything submitted meanwhile
    // queues and is written as one group when the lock goes
    MysqlGuardStore grouped = new MysqlGuardStore(fx.db, "og_", 1);
    Guard g = guardOwning(grouped, uniq("grp"));
    Guard setup = fx.guard(uniq("grp-setup"), null);
    String blocker = orderIn(setup, "created");
    String applied = orderIn(setup, "paid");
    RowLock lock = RowLock.hold(blocker);
    var first = claimOrder(g, order(blocker, "pay"));

    List<String> fresh = new ArrayList<>();
    List<java.util.concurrent.CompletableFuture<ClaimResult>> creates = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      String id = uniq("grp-new");
      fresh.add(id);
      creates.add(claimOrder(g, order(id, "create")));
    }
    // the same record twice in the group (two copies from different partitions)
    String twice = order(uniq("grp-twice"), "create", "W1", "m-twice");
    var twiceA = claimOrder(g, twice);
    var twiceB = claimOrder(g, twice);
    // a replay of a record confirmed long ago (the ledger refuses it)
    var replay = claimOrder(g, order(applied, "pay"));
    // a distinct fact on an applied transition (the CAS refuses it, after its ledger row went in)
    String conflicting = order(applied, "pay").replace("\"batch_no\":7", "\"batch_no\":9");
    var cas = claimOrder(g, conflicting);
    Thread.sleep(100);
    assertThat(creates).noneMatch(java.util.concurrent.CompletableFuture::isDone);
    lock.release();

    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    List<Claim> claims = new ArrayList<>();
    for (var f : creates) {
      ClaimResult r = f.get(10, TimeUnit.SECONDS);
      assertThat(r).isInstanceOf(ClaimResult.Accepted.class);
      claims.add(((ClaimResult.Accepted) r).claim());
    }
    ClaimResult a = twiceA.get(10, TimeUnit.SECONDS);
    ClaimResult b = twiceB.get(10, TimeUnit.SECONDS);
    assertThat(a).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(b).isInstanceOf(ClaimResult.Rejected.class);
    assertThat(((ClaimResult.Rejected) b).verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(((ClaimResult.Rejected) replay.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.LEDGER_HIT);
    Verdict v = ((ClaimResult.Rejected) cas.get(10, TimeUnit.SECONDS)).verdict();
    assertThat(v.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    // the refused claim left nothing behind; the others are pending in the ledger and the entities
    assertThat(ledgerRows("orders", fx.event("orders", conflicting).dedupKey())).isZero();
    assertThat(entityState(applied)).isEqualTo("paid");
    for (String id : fresh) {
      assertThat(entityState(id)).isEqualTo("created");
      assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND status = 'PENDING'", id)).isEqualTo(1);
    }
    long[] counts = grouped.groupCounts();
    assertThat(counts[0]).as("claim groups: the blocked claim alone, then the ten that queued behind it").isEqualTo(2);
    assertThat(counts[1]).isEqualTo(11);

    // confirmed together, the confirm slot held by the blocked claim's confirm: every ledger row
    // DONE, every entity released, except the claim another owner took over meanwhile
    claims.add(((ClaimResult.Accepted) a).claim());
    Claim lost = claims.get(2);
    assertThat(fx.update("UPDATE og_ledger SET owner = 'another-owner', attempts = attempts + 1 WHERE dedup_key = ?", lost.dedupKey())).isEqualTo(1);
    RowLock lock2 = RowLock.hold(blocker);
    var firstConfirm = g.confirm(fx.route("orders"), ((ClaimResult.Accepted) first.get()).claim()).toCompletableFuture();
    List<java.util.concurrent.CompletableFuture<Boolean>> confirms = new ArrayList<>();
    for (Claim c : claims) {
      confirms.add(g.confirm(fx.route("orders"), c).toCompletableFuture());
    }
    Thread.sleep(100);
    assertThat(confirms).noneMatch(java.util.concurrent.CompletableFuture::isDone);
    lock2.release();
    assertThat(firstConfirm.get(10, TimeUnit.SECONDS)).isTrue();
    for (int i = 0; i < claims.size(); i++) {
      assertThat(confirms.get(i).get(10, TimeUnit.SECONDS)).as("confirm of claim %d", i).isEqualTo(claims.get(i) != lost);
    }
    for (String id : fresh) {
      boolean isLost = id.equals(lost.entityId());
      assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND status = 'DONE'", id)).isEqualTo(isLost ? 0 : 1);
      assertThat(fx.scalar("SELECT COUNT(*) FROM og_entity WHERE entity_id = ? AND pending_key IS NULL", id)).isEqualTo(isLost ? 0 : 1);
    }
    long[] after = grouped.groupCounts();
    assertThat(after[2]).as("confirm groups: the blocked one alone, then the seven that queued behind it").isEqualTo(2);
    assertThat(after[3]).isEqualTo(8);
  }

  /**
   * A create in a group whose entity exists already (another record created it): the group's
   * statements, sent together, are refused as a whole and rolled back; then the entities are read
   * beside the ledger rows, the refused create is classified without being written, and the others
   * are written as a group again rather than one row at a time.
   */
  @Test
  void groupCommit_aCreateWhoseEntityExists_classifiedWithoutAWrite_othersWrittenAsAGroupAgain() throws Exception {
    MysqlGuardStore grouped = new MysqlGuardStore(fx.db, "og_", 1);
    Guard g = guardOwning(grouped, uniq("grp-ent"));
    Guard setup = fx.guard(uniq("grp-ent-setup"), null);
    String blocker = orderIn(setup, "created");
    String exists = orderIn(setup, "created");
    RowLock lock = RowLock.hold(blocker);
    var first = claimOrder(g, order(blocker, "pay"));
    List<String> fresh = new ArrayList<>();
    List<java.util.concurrent.CompletableFuture<ClaimResult>> creates = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      String id = uniq("grp-ent-new");
      fresh.add(id);
      creates.add(claimOrder(g, order(id, "create")));
    }
    // its ledger row is free (other content, so another key), its entity is not
    String again = order(exists, "create").replace("\"batch_no\":7", "\"batch_no\":9");
    var refused = claimOrder(g, again);
    Thread.sleep(100);
    assertThat(creates).noneMatch(java.util.concurrent.CompletableFuture::isDone);
    long t0 = fx.db.roundTrips();
    lock.release();

    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    for (var f : creates) {
      assertThat(f.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    }
    Verdict v = ((ClaimResult.Rejected) refused.get(10, TimeUnit.SECONDS)).verdict();
    assertThat(v.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    long trips = fx.db.roundTrips() - t0;
    assertThat(ledgerRows("orders", fx.event("orders", again).dedupKey())).isZero();
    assertThat(entityState(exists)).isEqualTo("created");
    for (String id : fresh) {
      assertThat(entityState(id)).isEqualTo("created");
      assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND status = 'PENDING'", id)).isEqualTo(1);
    }
    assertThat(grouped.groupCounts()[0]).as("claim groups: the blocked claim alone, then the five that queued behind it").isEqualTo(2);
    // 11: the blocked claim's COMMIT; the group's refused round trip, ROLLBACK, the SELECTs of
    // ledger rows and of entities, BEGIN, the two INSERTs of the four, COMMIT; the refused create's
    // classifying reads (two); plus the owners' heartbeats in the window. Row by row (each create's
    // two INSERTs, the refused one's DELETE) it would be 19.
    assertThat(trips).isBetween(11L, 15L);
  }

  /**
   * A group of transitions with no duplicate among them, written in one transaction: the lost CAS
   * leaves no ledger row, the event with several from-states records the one it left, a creating
   * event and the other CAS commit.
   */
  @Test
  void groupCommit_casesInOneGroup_lostCasLeavesNothing_severalFromStatesRecorded() throws Exception {
    MysqlGuardStore grouped = new MysqlGuardStore(fx.db, "og_", 1);
    Guard g = guardOwning(grouped, uniq("grp3"));
    Guard setup = fx.guard(uniq("grp3-setup"), null);
    String blocker = orderIn(setup, "created");
    String toPay = orderIn(setup, "created");
    String toCancel = orderIn(setup, "paid");
    String applied = orderIn(setup, "paid");
    String created = uniq("grp3-new");
    RowLock lock = RowLock.hold(blocker);
    var first = claimOrder(g, order(blocker, "pay"));
    var pay = claimOrder(g, order(toPay, "pay"));
    var cancel = claimOrder(g, order(toCancel, "cancel"));
    String conflicting = order(applied, "pay").replace("\"batch_no\":7", "\"batch_no\":9");
    var lost = claimOrder(g, conflicting);
    var create = claimOrder(g, order(created, "create"));
    Thread.sleep(100);
    assertThat(pay).isNotDone();
    lock.release();

    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(pay.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    ClaimResult cancelled = cancel.get(10, TimeUnit.SECONDS);
    assertThat(cancelled).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(((ClaimResult.Accepted) cancelled).claim().fromState()).as("the from-state the CAS left").isEqualTo("paid");
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND event = 'cancel' AND from_state = 'paid'", toCancel))
        .isEqualTo(1);
    assertThat(((ClaimResult.Rejected) lost.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(ledgerRows("orders", fx.event("orders", conflicting).dedupKey())).as("the lost CAS's ledger row").isZero();
    assertThat(create.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(entityState(toPay)).isEqualTo("paid");
    assertThat(entityState(toCancel)).isEqualTo("cancelled");
    assertThat(entityState(applied)).isEqualTo("paid");
    assertThat(entityState(created)).isEqualTo("created");
    assertThat(grouped.groupCounts()[0]).as("claim groups: the blocked claim alone, then the four behind it").isEqualTo(2);
    assertThat(grouped.groupCounts()[1]).isEqualTo(5);
  }

  /**
   * A claim whose CAS finds its entity pending on the claim's own key — here a trigger sets the
   * key as the claim's ledger row is written; on a cluster, a CAS whose count was read wrong, or
   * another claim of the key by the same owner that committed meanwhile — never deletes that key's
   * ledger row: the entity's pending key and its row stay together. The claim then meets its own
   * row, takes it over (flagged) and its confirm releases the entity. A claim alone (its
   * statements sent together) and a group written row by row (two copies of the key) both.
   */
  @Test
  void lostCas_whileTheEntityHoldsTheClaimsOwnKey_keepsItsLedgerRow_entityReleasedByTheConfirm() throws Exception {
    Guard setup = fx.guard(uniq("held-setup"), null);
    String alone = orderIn(setup, "created");
    String grouped = orderIn(setup, "created");
    String blocker = orderIn(setup, "created");
    fx.db.execute("CREATE TRIGGER og_it_holds_key AFTER INSERT ON og_ledger FOR EACH ROW"
        + " IF NEW.event = 'pay' AND NEW.entity_id IN ('" + alone + "', '" + grouped + "') THEN"
        + " UPDATE og_entity SET prev_state = state, state = 'paid', version = version + 1, pending_key = NEW.dedup_key,"
        + " pending_until = NEW.lease_until WHERE machine = 'order' AND entity_id = NEW.entity_id;"
        + " END IF");
    try {
      MysqlGuardStore store = new MysqlGuardStore(fx.db, "og_", 1);
      Guard g = guardOwning(store, uniq("held"));
      ClaimResult one = claimOrder(g, order(alone, "pay")).get(10, TimeUnit.SECONDS);

      RowLock lock = RowLock.hold(blocker);
      var first = claimOrder(g, order(blocker, "pay"));
      String twice = order(grouped, "pay");
      var copyA = claimOrder(g, twice);
      var copyB = claimOrder(g, twice);
      Thread.sleep(100);
      lock.release();
      assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
      List<ClaimResult> copies = List.of(copyA.get(10, TimeUnit.SECONDS), copyB.get(10, TimeUnit.SECONDS));

      for (var c : List.of(Map.entry(alone, List.of(one)), Map.entry(grouped, copies))) {
        String id = c.getKey();
        List<ClaimResult.Accepted> accepted = c.getValue().stream().filter(r -> r instanceof ClaimResult.Accepted)
            .map(r -> (ClaimResult.Accepted) r).toList();
        assertThat(accepted).as("claims of %s accepted", id).hasSize(1);
        Claim claim = accepted.get(0).claim();
        assertThat(claim.redelivery()).as("taken over from its own row: flagged").isTrue();
        assertThat(fx.string("SELECT pending_key FROM og_entity WHERE machine = 'order' AND entity_id = ?", id))
            .isEqualTo(claim.dedupKey());
        assertThat(fx.string("SELECT status FROM og_ledger WHERE route = 'orders' AND dedup_key = ?", claim.dedupKey()))
            .as("the ledger row of the key %s holds", id).isEqualTo("PENDING");
        assertThat(g.confirm(fx.route("orders"), claim).toCompletableFuture().get(10, TimeUnit.SECONDS)).isTrue();
        assertThat(fx.string("SELECT CONCAT(state, '/', COALESCE(pending_key, '-')) FROM og_entity WHERE machine = 'order'"
            + " AND entity_id = ?", id)).as("entity %s released", id).isEqualTo("paid/-");
        assertThat(fx.string("SELECT status FROM og_ledger WHERE route = 'orders' AND dedup_key = ?", claim.dedupKey())).isEqualTo("DONE");
      }
      assertThat(store.groupCounts()).as("claim groups (the one alone, the blocker, both copies together) and their claims")
          .startsWith(3, 4);
    } finally {
      fx.db.execute("DROP TRIGGER IF EXISTS og_it_holds_key");
    }
  }

  @Test
  void groupCommit_replaysAmongFreshRecords_readInOneSelect_freshOnesStillWrittenAsAGroup() throws Exception {
    MysqlGuardStore grouped = new MysqlGuardStore(fx.db, "og_", 1);
    Guard g = guardOwning(grouped, uniq("grp2"));
    Guard setup = fx.guard(uniq("grp2-setup"), null);
    String blocker = orderIn(setup, "created");
    String done1 = orderIn(setup, "created");
    String done2 = orderIn(setup, "paid");
    RowLock lock = RowLock.hold(blocker);
    var first = claimOrder(g, order(blocker, "pay"));
    var replay1 = claimOrder(g, order(done1, "create"));
    List<String> fresh = new ArrayList<>();
    List<java.util.concurrent.CompletableFuture<ClaimResult>> creates = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      String id = uniq("grp2-new");
      fresh.add(id);
      creates.add(claimOrder(g, order(id, "create")));
    }
    var replay2 = claimOrder(g, order(done2, "pay"));
    lock.release();
    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(((ClaimResult.Rejected) replay1.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.LEDGER_HIT);
    assertThat(((ClaimResult.Rejected) replay2.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.LEDGER_HIT);
    for (int i = 0; i < fresh.size(); i++) {
      assertThat(creates.get(i).get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
      assertThat(entityState(fresh.get(i))).isEqualTo("created");
      assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id = ? AND status = 'PENDING'", fresh.get(i))).isEqualTo(1);
    }
    assertThat(entityState(done2)).isEqualTo("paid");
    assertThat(fx.scalar("SELECT COUNT(*) FROM og_ledger WHERE entity_id IN (?, ?) AND status <> 'DONE'", done1, done2)).isZero();
    assertThat(grouped.groupCounts()[0]).isEqualTo(2);
    assertThat(grouped.groupCounts()[1]).isEqualTo(6);
  }

  /**
   * Claims and confirms of a route without a machine, queued behind a blocked claim: the group's
   * claims are one multi-row INSERT in autocommit; one refused by a duplicate wrote nothing, and
   * the fresh ones are written around the replays; the confirms are one UPDATE in autocommit, and
   * when a claim of the group was lost the others are confirmed all the same.
   */
  @Test
  void groupCommit_withoutAMachine_claimsAndConfirmsInAutocommit_replaysAndALostClaimClassifiedAlone() throws Exception {
    MysqlGuardStore grouped = new MysqlGuardStore(fx.db, "og_", 1);
    Guard g = guardOwning(grouped, uniq("grp4"));
    Guard setup = fx.guard(uniq("grp4-setup"), null);
    String blocker = orderIn(setup, "created");
    String appliedLine = order(uniq("line-done"), "ship");
    assertThat(apply(setup, "lines-full", appliedLine).getDisposition()).isEqualTo(Disposition.ACCEPTED);

    // round 1: fresh lines only, queued behind a blocked claim: written as one group
    RowLock lock = RowLock.hold(blocker);
    var first = claimOrder(g, order(blocker, "pay"));
    List<String> fresh = new ArrayList<>();
    List<java.util.concurrent.CompletableFuture<ClaimResult>> lines = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      String line = order(uniq("line"), "ship");
      fresh.add(line);
      lines.add(claimLine(g, line));
    }
    Thread.sleep(100);
    assertThat(lines).noneMatch(java.util.concurrent.CompletableFuture::isDone);
    // the blocked claim's and the lock's transactions began already: what begins from here is the lines'
    long begun = transactionsBegun();
    lock.release();
    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    List<Claim> claims = new ArrayList<>();
    for (var f : lines) {
      ClaimResult r = f.get(10, TimeUnit.SECONDS);
      assertThat(r).isInstanceOf(ClaimResult.Accepted.class);
      claims.add(((ClaimResult.Accepted) r).claim());
    }
    assertThat(transactionsBegun() - begun).as("the lines' group began no transaction: one INSERT in autocommit").isZero();
    for (String line : fresh) {
      assertThat(ledgerStatus("lines-full", line)).isEqualTo("PENDING");
    }
    assertThat(grouped.groupCounts()[0]).as("claim groups: the blocked claim alone, then the four lines").isEqualTo(2);

    // round 2: fresh lines among a replay and two copies of one line: the group's INSERT is
    // refused and writes nothing; the replay and the second copy are classified alone
    RowLock lock2 = RowLock.hold(blocker);
    var second = claimOrder(g, order(blocker, "pay").replace("\"batch_no\":7", "\"batch_no\":8"));
    String freshA = order(uniq("line"), "ship");
    String twice = order(uniq("line-twice"), "ship");
    var a = claimLine(g, freshA);
    var replay = claimLine(g, appliedLine);
    var twiceA = claimLine(g, twice);
    var twiceB = claimLine(g, twice);
    Thread.sleep(100);
    lock2.release();
    second.get(10, TimeUnit.SECONDS);
    assertThat(a.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(((ClaimResult.Rejected) replay.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.LEDGER_HIT);
    assertThat(twiceA.get(10, TimeUnit.SECONDS)).isInstanceOf(ClaimResult.Accepted.class);
    assertThat(((ClaimResult.Rejected) twiceB.get(10, TimeUnit.SECONDS)).verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(ledgerStatus("lines-full", freshA)).isEqualTo("PENDING");
    assertThat(ledgerStatus("lines-full", twice)).isEqualTo("PENDING");
    assertThat(ledgerStatus("lines-full", appliedLine)).isEqualTo("DONE");

    // the four round-1 claims confirmed as one group, one of them taken over meanwhile
    Claim lost = claims.get(1);
    assertThat(fx.update("UPDATE og_ledger SET owner = 'another-owner', attempts = attempts + 1 WHERE dedup_key = ?", lost.dedupKey()))
        .isEqualTo(1);
    RowLock lock3 = RowLock.hold(blocker);
    var blockedConfirm = g.confirm(fx.route("orders"), ((ClaimResult.Accepted) first.get()).claim()).toCompletableFuture();
    List<java.util.concurrent.CompletableFuture<Boolean>> confirms = new ArrayList<>();
    for (Claim c : claims) {
      confirms.add(g.confirm(fx.route("lines-full"), c).toCompletableFuture());
    }
    Thread.sleep(100);
    assertThat(confirms).noneMatch(java.util.concurrent.CompletableFuture::isDone);
    long begunBeforeConfirms = transactionsBegun();
    lock3.release();
    assertThat(blockedConfirm.get(10, TimeUnit.SECONDS)).isTrue();
    for (int i = 0; i < claims.size(); i++) {
      assertThat(confirms.get(i).get(10, TimeUnit.SECONDS)).as("confirm of line %d", i).isEqualTo(claims.get(i) != lost);
      assertThat(ledgerStatus("lines-full", fresh.get(i))).isEqualTo(claims.get(i) == lost ? "PENDING" : "DONE");
    }
    assertThat(transactionsBegun() - begunBeforeConfirms).as("the lines' confirms began no transaction").isZero();
    long[] counts = grouped.groupCounts();
    assertThat(counts[2]).as("confirm groups: the blocked one alone, then the four lines").isEqualTo(2);
    assertThat(counts[3]).isEqualTo(5);
  }

  static java.util.concurrent.CompletableFuture<ClaimResult> claimLine(Guard g, String json) {
    return g.claimInStore(fx.route("lines-full"), fx.event("lines-full", json), src()).toCompletableFuture();
  }

  /**
   * BEGIN and START TRANSACTION statements the server ran so far (all sessions: the tests of this
   * class run one at a time, and their background work, heartbeats and renewals, runs in autocommit).
   */
  static long transactionsBegun() {
    return Long.parseLong(String.valueOf(fx.db.select("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
        + " WHERE VARIABLE_NAME = 'COM_BEGIN'").get(0).get(0)));
  }

  static String ledgerStatus(String route, String json) {
    return (String) fx.db.select("SELECT status FROM og_ledger WHERE route = ? AND dedup_key = ?", route, fx.event(route, json).dedupKey())
        .get(0).get(0);
  }

  // ------------------------------------------------------------------------- cost

  @Test
  void roundTrips_perAcceptedRecord_andPerDuplicate() {
    Guard g = fx.guard(uniq("rt"), null);
    String id = orderIn(g, "to_ship");
    String ship = order(id, "ship", "W1", "m");
    long t0 = fx.db.roundTrips();
    apply(g, "orders", ship);
    long accepted = fx.db.roundTrips() - t0;
    long t1 = fx.db.roundTrips();
    apply(g, "orders", order(id, "ship", "W1", "m-again"));
    long duplicate = fx.db.roundTrips() - t1;
    long t2 = fx.db.roundTrips();
    Verdict conflicting = apply(g, "orders", order(id, "ship", "W1", "m-different-batch").replace("\"batch_no\":7", "\"batch_no\":9"));
    long alreadyApplied = fx.db.roundTrips() - t2;
    assertThat(conflicting.getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    System.out.printf("MySQL round trips: accepted (claim+confirm) = %d, exact duplicate (L1 miss) = %d, applied already (compared) = %d%n",
        accepted, duplicate, alreadyApplied);
    long t3 = fx.db.roundTrips();
    String line = order(uniq("o"), "ship", "W1", "m");
    apply(g, "lines-full", line);
    long acceptedNoMachine = fx.db.roundTrips() - t3;
    long t4 = fx.db.roundTrips();
    apply(g, "lines-full", line.replace("\"message_id\":\"m\"", "\"message_id\":\"m-again\""));
    long duplicateNoMachine = fx.db.roundTrips() - t4;
    System.out.printf("MySQL round trips without a machine: accepted = %d, exact duplicate (L1 miss) = %d%n",
        acceptedNoMachine, duplicateNoMachine);
    // claim: BEGIN + INSERT + CAS sent together, then COMMIT; confirm: one two-table UPDATE
    assertThat(accepted).isEqualTo(3);
    assertThat(acceptedNoMachine).isEqualTo(2);
    assertThat(duplicateNoMachine).isEqualTo(2);
    // BEGIN + INSERT (refused) together, ROLLBACK, SELECT the row that refused it
    assertThat(duplicate).isEqualTo(3);
    // BEGIN + INSERT + CAS (lost) together, DELETE of its ledger row + COMMIT together, SELECT
    // entity, SELECT the rows that applied it
    assertThat(alreadyApplied).isEqualTo(4);
  }
}
