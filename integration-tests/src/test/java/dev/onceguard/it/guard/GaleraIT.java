package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ClusterScript;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Verdict;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Incident 3 across a real three-node MariaDB Galera cluster ({@code scripts/cluster.sh up galera}):
 * guards with stores of their own, each on a different node (multi-primary), claim the same
 * transition at the same instant, round after round. Exactly one is accepted per round, every
 * other caller ends as a duplicate, and the certification conflicts between nodes (MySQL 1213
 * at COMMIT, or on the statement of a transaction a replicated write aborted) are retried as
 * contention: no store outage, no other verdict. At the end the ledger and entity rows read on
 * every node are the same.
 */
class GaleraIT {
  static final String MACHINES_AND_ROUTES = """
      machines:
        order:
          states: [created, paid, to_ship, shipped]
          events:
            create: {to: created}
            pay: {from: [created], to: paid}
            prepare: {from: [paid], to: to_ship}
            ship: {from: [to_ship], to: shipped}
      routes:
        - name: orders
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /event]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:1
        - name: orders-by-message
          topics: [orders-m]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /message_id]
          fingerprint-exclude: [/message_id]
          target: 127.0.0.1:1
      """;

  /** One Galera node as a sidecar configured for it sees it. */
  record Node(String name, int port, SidecarConfig config) {}

  static ClusterScript cluster;
  static final String DATABASE = "og_it_galera_" + UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  static final List<Node> nodes = new ArrayList<>();
  static final AtomicLong offsets = new AtomicLong();

  @BeforeAll
  static void startCluster() {
    cluster = ClusterScript.up("galera");
    List<String> ports = cluster.list("ONCEGUARD_CLUSTER_MYSQL_PORTS");
    assertThat(ports).hasSize(3);
    for (int i = 0; i < ports.size(); i++) {
      int port = Integer.parseInt(ports.get(i));
      String yaml = "kafka:\n  bootstrap-servers: 127.0.0.1:1\n"
          + "mysql:\n  host: 127.0.0.1\n  port: " + port + "\n  user: root\n  password: ''\n  database: " + DATABASE
          + "\n  pool-size: 4\n" + MACHINES_AND_ROUTES;
      SidecarConfig config = new ConfigReader(Map.of()).parse(yaml, "galera-" + (i + 1));
      if (i == 0) {
        // DDL replicates to every node before it returns (total order isolation)
        try (Db db = new Db(config.mysql())) {
          new Migrations(db, config.mysql().tablePrefix()).migrate();
        }
      }
      nodes.add(new Node("galera-" + (i + 1), port, config));
    }
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  /** What the callers saw over all rounds of one test. */
  static final class Tally {
    final AtomicLong accepted = new AtomicLong();
    final AtomicLong duplicates = new AtomicLong();
    /** Contention that got past the guard's own retries and was retried by the caller, as the pipeline does. */
    final AtomicLong contentionSurfaced = new AtomicLong();
    final List<String> others = java.util.Collections.synchronizedList(new ArrayList<>());
    final List<String> outages = java.util.Collections.synchronizedList(new ArrayList<>());
    final Set<String> reasons = ConcurrentHashMap.newKeySet();
  }

  @ParameterizedTest(name = "{0} callers per node, different keys = {1}")
  @CsvSource({"1,false", "2,true"})
  void sameTransitionClaimedOnEveryNodeAtOnce_exactlyOneAccepted_conflictsAreContention(int perNode, boolean differentKeys)
      throws Exception {
    int rounds = 60;
    String route = differentKeys ? "orders-by-message" : "orders";
    List<Guard> callers = new ArrayList<>();
    List<Guard> setups = new ArrayList<>();
    for (Node n : nodes) {
      setups.add(guard(n, "setup"));
      for (int i = 0; i < perNode; i++) {
        callers.add(guard(n, "caller" + i));
      }
    }
    long[] certBefore = certificationConflicts();
    Tally t = new Tally();
    ExecutorService pool = Executors.newFixedThreadPool(callers.size());
    try {
      for (int round = 0; round < rounds; round++) {
        String id = "g-" + UUID.randomUUID().toString().substring(0, 12);
        // each round's entity is prepared through another node: every node writes and replicates
        Guard setup = setups.get(round % setups.size());
        for (String ev : List.of("create", "pay", "prepare")) {
          assertThat(decide(setup, route, order(id, ev, "m-" + ev), t).getDisposition())
              .as("%s of %s through %s", ev, id, setup.owner()).isEqualTo(Disposition.ACCEPTED);
        }
        List<Callable<Verdict>> copies = new ArrayList<>();
        for (int i = 0; i < callers.size(); i++) {
          Guard g = callers.get(i);
          String json = order(id, "ship", differentKeys ? "m-ship-" + i : "m-ship");
          copies.add(() -> decide(g, route, json, t));
        }
        ClaimLoop.Round r = ClaimLoop.atOnce(pool, copies, 60);
        // on a failure, what each node holds of the entity and its ledger rows, and what the callers got
        String held = r.accepted() == 1 ? "" : readOnEveryNode("SELECT state, version, pending_key, pending_until FROM og_entity"
            + " WHERE entity_id = '" + id + "'") + " / " + readOnEveryNode("SELECT dedup_key, event, status, owner, attempts FROM og_ledger"
            + " WHERE entity_id = '" + id + "' ORDER BY event") + " / " + r;
        assertThat(r.accepted()).as("accepted in round %d %s", round, held).isEqualTo(1);
        t.accepted.addAndGet(r.accepted());
        t.duplicates.addAndGet(r.duplicates());
        t.reasons.addAll(r.duplicateReasons());
        t.others.addAll(r.others());
        assertThat(readOnEveryNode("SELECT state, version, pending_key FROM og_entity WHERE entity_id = '" + id + "'"))
            .as("entity %s on every node", id).containsOnly(List.of(List.of("shipped", "4", "null")));
      }
    } finally {
      pool.shutdownNow();
    }
    long[] certAfter = certificationConflicts();
    long guardRetries = callers.stream().mapToLong(Guard::contentionRetries).sum();
    System.out.printf("[GaleraIT] %d callers (%d per node), different keys %s, %d rounds: %d accepted, %d duplicates (%s); "
            + "certification failures %d, brute-force aborts %d; guard contention retries %d, surfaced to the caller %d%n",
        callers.size(), perNode, differentKeys, rounds, t.accepted.get(), t.duplicates.get(), t.reasons,
        certAfter[0] - certBefore[0], certAfter[1] - certBefore[1], guardRetries, t.contentionSurfaced.get());
    callers.forEach(Guard::close);
    setups.forEach(Guard::close);

    assertThat(t.outages).as("certification conflicts are contention, never a store outage").isEmpty();
    assertThat(t.others).as("every caller but one ends as a duplicate").isEmpty();
    assertThat(t.duplicates.get()).isEqualTo((long) rounds * (callers.size() - 1));
    assertThat(guardRetries + t.contentionSurfaced.get())
        .as("nodes lost races to each other (certification conflicts %d, BF aborts %d) and the guard retried them as contention",
            certAfter[0] - certBefore[0], certAfter[1] - certBefore[1])
        .isPositive();
    List<List<List<String>>> ledgers = readOnEveryNode(
        "SELECT route, dedup_key, status, entity_id, event, from_state, to_state, attempts FROM og_ledger ORDER BY route, dedup_key");
    List<List<List<String>>> entities = readOnEveryNode(
        "SELECT machine, entity_id, state, version, pending_key FROM og_entity ORDER BY machine, entity_id");
    assertThat(ledgers.get(0)).as("ledger rows").isNotEmpty();
    assertThat(ledgers).as("the ledger read on each node").allSatisfy(l -> assertThat(l).isEqualTo(ledgers.get(0)));
    assertThat(entities).as("the entities read on each node").allSatisfy(e -> assertThat(e).isEqualTo(entities.get(0)));
  }

  /**
   * A claim group refused by one duplicate, with rows long enough that the group's multi-row
   * INSERT outgrows one row event (8 KB) before the duplicate comes: on MariaDB Galera a statement
   * rollback inside the transaction would leave the rows before the duplicate in the write set,
   * the other nodes would apply them, fail on the group's second INSERT of the same rows (1062)
   * and vote this node out of the cluster. The group must roll back as a whole instead: every node
   * stays in the cluster, and each has exactly the rows of the claims that were accepted.
   */
  @org.junit.jupiter.api.Test
  void claimGroupRefusedByADuplicate_withRowsPastOneRowEvent_everyNodeStaysConsistent() throws Exception {
    Node n = nodes.get(0);
    MysqlGuardStore store = store(n);
    Guard guard = new Guard(store, IdempotencyCache.DISABLED, n.config().machines(), Clock.SYSTEM, n.name() + "-refused-group");
    RouteConfig route = n.config().routes().stream().filter(r -> r.name().equals("orders")).findFirst().orElseThrow();
    Extractor extractor = new Extractor(route, n.config().machines().get(route.machine()));
    // entity ids of 200 characters, in the entity id and the business key of each ledger row: 24 rows hold
    // over 9.6 KB of ids alone, past one 8 KB row event
    String prefix = "long-" + UUID.randomUUID().toString().substring(0, 8) + "-" + "x".repeat(180) + "-";
    java.util.function.Function<String, dev.onceguard.proxy.extract.ExtractedEvent> event = id -> ((Extraction.Ok) extractor.extract(null,
        order(prefix + id, "create", "m-" + id).getBytes(StandardCharsets.UTF_8), new RecordHeaders())).event();
    try {
      var first = guard.claim(route, event.apply("dup"), new Source("orders", 0, offsets.incrementAndGet())).toCompletableFuture().join();
      assertThat(first).isInstanceOf(ClaimResult.Accepted.class);
      assertThat(guard.confirm(route, ((ClaimResult.Accepted) first).claim()).toCompletableFuture().join()).isTrue();
      List<dev.onceguard.proxy.extract.ExtractedEvent> events = new ArrayList<>();
      for (int i = 0; i < 25; i++) {
        events.add(event.apply(i == 0 ? "blocker" : i == 24 ? "dup" : "n" + i));
      }
      long[] before = store.groupCounts();
      List<java.util.concurrent.CompletableFuture<ClaimResult>> claims = new ArrayList<>();
      // the first claim waits on a row lock this connection holds, so the other 24 queue behind it
      // and go as one group, with the duplicate at its end, after 23 rows
      try (Connection blocker = connect(n); Statement st = blocker.createStatement()) {
        blocker.setAutoCommit(false);
        st.executeUpdate("INSERT INTO og_ledger (route, dedup_key, business_key, fingerprint, status, attempts, source_topic,"
            + " source_partition, source_offset, created_at) VALUES ('orders', '" + events.get(0).dedupKey() + "', 'b', 'f', 'REJECTED', 1, 't', 0, 0, 0)");
        for (var e : events) {
          claims.add(guard.claim(route, e, new Source("orders", 0, offsets.incrementAndGet())).toCompletableFuture());
        }
        assertThat(store.groupCounts()[0] - before[0]).as("groups taken while the first claim waits").isEqualTo(1);
        blocker.rollback();
      }
      for (int i = 0; i < claims.size(); i++) {
        ClaimResult r = claims.get(i).get(60, TimeUnit.SECONDS);
        if (i < 24) {
          assertThat(r).as("claim %d", i).isInstanceOf(ClaimResult.Accepted.class);
          assertThat(guard.confirm(route, ((ClaimResult.Accepted) r).claim()).toCompletableFuture().join()).isTrue();
        } else {
          assertThat(r).as("the duplicate").isInstanceOf(ClaimResult.Rejected.class);
          assertThat(((ClaimResult.Rejected) r).verdict().getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
        }
      }
      long[] after = store.groupCounts();
      assertThat(after[1] - before[1]).as("claims").isEqualTo(25);
      assertThat(after[0] - before[0]).as("the 25 claims went in two groups: one alone, then the other 24 together").isEqualTo(2);
    } finally {
      guard.close();
    }
    assertClusterWhole("after the refused group");
    List<List<List<String>>> ledgers = readOnEveryNode("SELECT dedup_key, status, attempts FROM og_ledger WHERE entity_id LIKE '" + prefix
        + "%' ORDER BY dedup_key");
    assertThat(ledgers.get(0)).as("ledger rows").hasSize(25).allSatisfy(r -> assertThat(r.subList(1, 3)).containsExactly("DONE", "1"));
    assertThat(ledgers).as("the ledger read on each node").allSatisfy(l -> assertThat(l).isEqualTo(ledgers.get(0)));
    List<List<List<String>>> entities = readOnEveryNode("SELECT entity_id, state, version FROM og_entity WHERE entity_id LIKE '" + prefix
        + "%' ORDER BY entity_id");
    assertThat(entities.get(0)).as("entities").hasSize(25);
    assertThat(entities).as("the entities read on each node").allSatisfy(e -> assertThat(e).isEqualTo(entities.get(0)));
  }

  /** Every node is in the cluster, synced and serving. */
  static void assertClusterWhole(String when) throws SQLException {
    for (Node n : nodes) {
      try (Connection c = connect(n); Statement st = c.createStatement();
          ResultSet r = st.executeQuery("SELECT variable_name, variable_value FROM information_schema.global_status"
              + " WHERE variable_name IN ('WSREP_CLUSTER_SIZE', 'WSREP_LOCAL_STATE_COMMENT', 'WSREP_READY') ORDER BY 1")) {
        List<String> status = new ArrayList<>();
        while (r.next()) {
          status.add(r.getString(1).toLowerCase() + "=" + r.getString(2));
        }
        assertThat(status).as("%s %s", n.name(), when)
            .containsExactly("wsrep_cluster_size=3", "wsrep_local_state_comment=Synced", "wsrep_ready=ON");
      } catch (SQLException e) {
        throw new AssertionError(n.name() + " " + when + " refuses connections: " + e.getMessage(), e);
      }
    }
  }

  /**
   * Claim groups racing across nodes: on each node one guard (one group slot) takes records from
   * several threads at once, so its claims go to the node in groups, and every node gets every
   * event of every order, in a different order per thread. Groups therefore hold duplicates of
   * rows other nodes wrote (certified or not yet), and of each other. Every write set a node
   * commits must apply on the others: no node leaves the cluster, the rows read on each node are
   * the same, and each transition is accepted exactly once over all nodes.
   */
  @org.junit.jupiter.api.Test
  void claimGroupsRacingAcrossNodes_everyWriteSetApplies_eachTransitionAcceptedOnce() throws Exception {
    int orders = Integer.getInteger("galera.race.orders", 60);
    int threadsPerNode = 12;
    // long entity ids (see the refused-group test), so that the larger groups (up to 12 claims, one per
    // thread) come near or past one 8 KB row event
    String prefix = "race-" + UUID.randomUUID().toString().substring(0, 6) + "-" + "x".repeat(180) + "-";
    List<Guard> guards = new ArrayList<>();
    List<MysqlGuardStore> stores = new ArrayList<>();
    for (Node n : nodes) {
      MysqlGuardStore store = store(n);
      stores.add(store);
      guards.add(new Guard(store, IdempotencyCache.DISABLED, n.config().machines(), Clock.SYSTEM, n.name() + "-race"));
    }
    Tally t = new Tally();
    Map<String, AtomicLong> acceptedPerFact = new ConcurrentHashMap<>();
    ExecutorService pool = Executors.newFixedThreadPool(guards.size() * threadsPerNode);
    List<java.util.concurrent.Future<?>> work = new ArrayList<>();
    for (int g = 0; g < guards.size(); g++) {
      for (int th = 0; th < threadsPerNode; th++) {
        Guard guard = guards.get(g);
        List<Integer> ids = new ArrayList<>();
        for (int i = 0; i < orders; i++) {
          ids.add(i);
        }
        java.util.Collections.shuffle(ids, new java.util.Random(g * 100L + th));
        work.add(pool.submit(() -> {
          for (int i : ids) {
            for (String ev : List.of("create", "pay", "prepare", "ship")) {
              Verdict v = decide(guard, "orders", order(prefix + i, ev, "m-" + ev), t);
              if (v.getDisposition() == Disposition.ACCEPTED) {
                acceptedPerFact.computeIfAbsent(prefix + i + "/" + ev, k -> new AtomicLong()).incrementAndGet();
              } else if (v.getDisposition() == Disposition.DUPLICATE_IGNORE) {
                t.duplicates.incrementAndGet();
              } else {
                t.others.add(prefix + i + "/" + ev + ": " + v.getDisposition() + " " + v.getReason());
              }
            }
          }
          return null;
        }));
      }
    }
    try {
      for (var f : work) {
        f.get(10, TimeUnit.MINUTES);
      }
    } finally {
      pool.shutdownNow();
    }
    long[] groups = new long[4];
    for (MysqlGuardStore s : stores) {
      long[] c = s.groupCounts();
      for (int i = 0; i < 4; i++) {
        groups[i] += c[i];
      }
    }
    guards.forEach(Guard::close);
    long[] cert = certificationConflicts();
    System.out.printf("[GaleraIT] claim groups racing: %d claims in %d groups, %d confirms in %d groups; %d duplicates;"
            + " certification failures %d, BF aborts %d (since start)%n",
        groups[1], groups[0], groups[3], groups[2], t.duplicates.get(), cert[0], cert[1]);
    assertThat(groups[1]).as("claims went to the node in groups of several").isGreaterThan(groups[0]);
    assertClusterWhole("after the race");
    assertThat(readOnEveryNode("SELECT e.entity_id, e.state, e.version, e.pending_key FROM og_entity e LEFT JOIN og_ledger l"
        + " ON l.dedup_key = e.pending_key WHERE e.entity_id LIKE '" + prefix + "%' AND e.pending_key IS NOT NULL AND l.dedup_key IS NULL"))
        .as("entities pending on a key that has no ledger row (nothing can confirm or take them over), on each node")
        .allSatisfy(rows -> assertThat(rows).isEmpty());
    assertThat(t.outages).as("store outages").isEmpty();
    assertThat(t.others).as("verdicts other than accepted and duplicate").isEmpty();
    assertThat(acceptedPerFact).as("accepted transitions").hasSize(orders * 4);
    assertThat(acceptedPerFact.values()).as("each transition accepted once over all nodes").allSatisfy(n -> assertThat(n.get()).isEqualTo(1));
    List<List<List<String>>> ledgers = readOnEveryNode("SELECT route, dedup_key, status, from_state, to_state, attempts FROM og_ledger"
        + " WHERE entity_id LIKE '" + prefix + "%' ORDER BY route, dedup_key");
    List<List<List<String>>> entities = readOnEveryNode("SELECT entity_id, state, version, pending_key FROM og_entity"
        + " WHERE entity_id LIKE '" + prefix + "%' ORDER BY entity_id");
    assertThat(ledgers.get(0)).as("ledger rows").hasSize(orders * 4);
    assertThat(ledgers).as("the ledger read on each node").allSatisfy(l -> assertThat(l).isEqualTo(ledgers.get(0)));
    assertThat(entities.get(0)).as("entities").hasSize(orders).allSatisfy(e -> assertThat(e.subList(1, 4)).containsExactly("shipped", "4", "null"));
    assertThat(entities).as("the entities read on each node").allSatisfy(e -> assertThat(e).isEqualTo(entities.get(0)));
  }

  /**
   * What a certification conflict looks like through Connector/J, and that the store's
   * classification makes it contention: a transaction on node 2 has changed a row, the same row
   * is changed and committed on node 1 meanwhile, and node 2's COMMIT is refused (1213).
   */
  @org.junit.jupiter.api.Test
  void writeConflictBetweenNodes_failsAtCommitWith1213_andIsContention() throws Exception {
    readOnEveryNode("SELECT 1"); // every node synced before the row is created
    String id = "cert-" + UUID.randomUUID().toString().substring(0, 8);
    try (Connection one = connect(nodes.get(0)); Statement st = one.createStatement();
        Db two = new Db(nodes.get(1).config().mysql())) {
      st.executeUpdate("INSERT INTO og_entity (machine, entity_id, state, version, updated_at) VALUES ('order', '" + id + "', 'paid', 1, 0)");
      readOnEveryNode("SELECT 1"); // node 2 has the row
      CountDownLatch updatedOnTwo = new CountDownLatch(1);
      CountDownLatch committedOnOne = new CountDownLatch(1);
      var onTwo = two.inTransaction(c -> {
        try (var ps = c.prepareStatement("UPDATE og_entity SET state = 'to_ship', version = 2 WHERE machine = 'order' AND entity_id = ?")) {
          ps.setString(1, id);
          ps.executeUpdate();
        }
        updatedOnTwo.countDown();
        try {
          committedOnOne.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        return null;
      });
      assertThat(updatedOnTwo.await(10, TimeUnit.SECONDS)).isTrue();
      st.executeUpdate("UPDATE og_entity SET state = 'cancelled', version = 2 WHERE machine = 'order' AND entity_id = '" + id + "'");
      committedOnOne.countDown();
      Throwable failure = org.assertj.core.api.Assertions.catchThrowable(() -> onTwo.get(20, TimeUnit.SECONDS));
      assertThat(failure).as("node 2's transaction").isNotNull();
      Throwable mapped = failure.getCause();
      SQLException driver = (SQLException) mapped.getCause();
      System.out.printf("[GaleraIT] write conflict between nodes, as the driver reports it: %s, error %d, SQLState %s: %s%n",
          driver.getClass().getName(), driver.getErrorCode(), driver.getSQLState(), driver.getMessage());
      assertThat(mapped).as("the store's classification of %s", driver).isInstanceOf(ContentionException.class);
      assertThat(driver.getErrorCode()).isEqualTo(1213);
      assertThat(readOnEveryNode("SELECT state FROM og_entity WHERE entity_id = '" + id + "'"))
          .as("node 1's write won everywhere").containsOnly(List.of(List.of("cancelled")));
    }
  }

  /**
   * A takeover decided on a node that has not applied the owner's latest heartbeat: the owner's
   * row reads dead on node 1, the owner heartbeats through node 2 while node 1's takeover is open,
   * and node 1 applies that heartbeat before the takeover commits. The takeover has written the
   * owner row it judged dead, so the heartbeat's write set conflicts with it (node 1 aborts it when
   * it applies the heartbeat, or certification refuses it at COMMIT): contention, retried, and the
   * retry sees the owner alive. The claim stays the owner's on every node. (With only the ledger
   * and entity rows in its write set, the takeover would certify and take a live owner's claim.)
   *
   * <p>The interleaving is made deterministic by a row lock on the entity that a connection on
   * node 1 holds: the takeover's first statement (ledger and owner rows) runs, its second (the
   * entity's lease) waits there while the heartbeat is written and applied.
   */
  @org.junit.jupiter.api.Test
  void takeoverOnANodeThatHasNotAppliedTheOwnersHeartbeat_doesNotTakeTheClaim() throws Exception {
    Node one = nodes.get(0);
    Node two = nodes.get(1);
    RouteConfig route = one.config().routes().stream().filter(r -> r.name().equals("orders")).findFirst().orElseThrow();
    Extractor extractor = new Extractor(route, one.config().machines().get(route.machine()));
    String id = "hb-" + UUID.randomUUID().toString().substring(0, 8);
    Guard owner = guard(two, "owner");
    Guard heir = guard(one, "heir");
    try {
      Tally t = new Tally();
      owner.heartbeat().toCompletableFuture().join();
      for (String ev : List.of("create", "pay", "prepare")) {
        assertThat(decide(owner, "orders", order(id, ev, "m-" + ev), t).getDisposition()).isEqualTo(Disposition.ACCEPTED);
      }
      var ship = ((Extraction.Ok) extractor.extract(null, order(id, "ship", "m-ship").getBytes(StandardCharsets.UTF_8),
          new RecordHeaders())).event();
      Source source = new Source("orders", 0, offsets.incrementAndGet());
      var held = ((ClaimResult.Accepted) owner.claim(route, ship, source).toCompletableFuture().join()).claim(); // 30 s lease
      try (Connection c = connect(two); Statement st = c.createStatement()) {
        // the owner's heartbeat ran out (as 5 s after a kill -9), by the database's clock
        assertThat(st.executeUpdate("UPDATE og_owner SET alive_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - 1"
            + " WHERE owner = '" + owner.owner() + "'")).isEqualTo(1);
      }
      readOnEveryNode("SELECT 1"); // every node has the claim and the dead owner row

      ClaimResult r;
      try (Connection lock = connect(one); Statement st = lock.createStatement()) {
        lock.setAutoCommit(false);
        st.executeQuery("SELECT state FROM og_entity WHERE machine = 'order' AND entity_id = '" + id + "' FOR UPDATE").close();
        var takeover = heir.claim(route, ship, source).toCompletableFuture();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (takeoverWaits(one) == 0 && !takeover.isDone() && System.nanoTime() < deadline) {
          Thread.sleep(50);
        }
        assertThat(takeover.isDone() ? takeover.join() : null).as("the takeover waits on the entity row").isNull();
        if (takeoverWaits(one) != 1) {
          throw new AssertionError("the takeover's entity statement is not seen waiting on node 1 within 30 s; InnoDB transactions there: "
              + readOn(one, "SELECT trx_state, trx_mysql_thread_id, trx_rows_modified, trx_query FROM information_schema.innodb_trx")
              + "; connections: " + readOn(one, "SELECT id, command, state, info FROM information_schema.processlist WHERE db = '"
              + DATABASE + "'"));
        }
        // the owner is alive after all: its heartbeat goes through node 2, and node 1 applies it
        ((MysqlGuardStore) owner.store()).heartbeat(owner.owner(), 60_000).toCompletableFuture().join();
        assertThat(readOn(one, "SELECT COUNT(*) FROM og_owner WHERE alive_until > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"
            + " AND owner = '" + owner.owner() + "'")).as("node 1 applied the heartbeat").containsExactly(List.of("1"));
        lock.rollback();
        r = takeover.get(30, TimeUnit.SECONDS);
      }
      System.out.printf("[GaleraIT] takeover against a heartbeat applied meanwhile: %s; guard contention retries %d%n",
          r.getClass().getSimpleName(), heir.contentionRetries());
      assertThat(r).as("a live owner's claim is not taken over").isInstanceOf(ClaimResult.Wait.class);
      assertThat(((ClaimResult.Wait) r).kind()).isEqualTo(ClaimResult.Wait.Kind.OWN_LEASE_LIVE);
      assertThat(readOnEveryNode("SELECT owner, attempts, status FROM og_ledger WHERE entity_id = '" + id + "' AND event = 'ship'"))
          .as("the claim on every node").containsOnly(List.of(List.of(owner.owner(), "1", "PENDING")));
      assertThat(owner.confirm(route, held).toCompletableFuture().join()).as("the owner confirms its claim").isTrue();
    } finally {
      owner.close();
      heir.close();
    }
    assertClusterWhole("after the takeover race");
  }

  /**
   * Statements on node {@code n} updating an entity's lease (in a takeover), still running. (Not
   * {@code innodb_trx}: the server refreshes that table only when nobody read it for 100 ms, so
   * polling it shows an old snapshot.)
   */
  static long takeoverWaits(Node n) throws SQLException {
    return Long.parseLong(readOn(n, "SELECT COUNT(*) FROM information_schema.processlist WHERE db = '" + DATABASE + "'"
        + " AND state = 'Updating' AND info LIKE 'UPDATE og_entity SET pending_until%'").get(0).get(0));
  }

  static Connection connect(Node n) throws SQLException {
    return DriverManager.getConnection("jdbc:mariadb://127.0.0.1:" + n.port() + "/" + DATABASE + "?sessionVariables=wsrep_sync_wait=1",
        "root", "");
  }

  /** A guard with a store of its own on node {@code n}, as a sidecar connected to that node has; closing it closes the store. */
  static Guard guard(Node n, String role) {
    return new Guard(store(n), IdempotencyCache.DISABLED, n.config().machines(), Clock.SYSTEM,
        n.name() + "-" + role + "-" + UUID.randomUUID().toString().substring(0, 8));
  }

  static MysqlGuardStore store(Node n) {
    return new MysqlGuardStore(new Db(n.config().mysql()), n.config().mysql().tablePrefix(),
        MysqlGuardStore.groupSlots(n.config().mysql().poolSize()));
  }

  static String order(String id, String event, String messageId) {
    return "{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\",\"message_id\":\"" + messageId + "\"}";
  }

  /**
   * Claims until the verdict is final ({@link ClaimLoop}): a busy entity or a transition this node
   * has not seen yet is waited for, contention that got past the guard's retries is retried at
   * once, and a store outage is recorded (the pipeline would pause) and thrown.
   */
  static Verdict decide(Guard g, String routeName, String json, Tally t) throws InterruptedException {
    RouteConfig route = nodes.get(0).config().routes().stream().filter(r -> r.name().equals(routeName)).findFirst().orElseThrow();
    var event = ((Extraction.Ok) new Extractor(route, nodes.get(0).config().machines().get(route.machine()))
        .extract(null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders())).event();
    Source source = new Source(route.intake().topics().get(0), 0, offsets.incrementAndGet());
    try {
      return ClaimLoop.decide(g, route, event, source, 30_000, t.contentionSurfaced::incrementAndGet);
    } catch (CompletionException e) {
      t.outages.add(String.valueOf(e.getCause()));
      throw e;
    }
  }

  /** Certification failures and brute-force aborts, summed over the nodes. */
  static long[] certificationConflicts() throws SQLException {
    long[] sum = new long[2];
    for (List<List<String>> rows : readOnEveryNode("SELECT variable_name, variable_value FROM information_schema.global_status"
        + " WHERE variable_name IN ('WSREP_LOCAL_CERT_FAILURES', 'WSREP_LOCAL_BF_ABORTS')")) {
      for (List<String> row : rows) {
        sum[row.get(0).equalsIgnoreCase("WSREP_LOCAL_CERT_FAILURES") ? 0 : 1] += Long.parseLong(row.get(1));
      }
    }
    return sum;
  }

  /**
   * The rows of {@code sql} as read on each node, after the node has applied every write the
   * cluster committed before the read ({@code wsrep_sync_wait}): the nodes' views, not their lag.
   */
  static List<List<List<String>>> readOnEveryNode(String sql) throws SQLException {
    List<List<List<String>>> out = new ArrayList<>();
    for (Node n : nodes) {
      out.add(readOn(n, sql));
    }
    return out;
  }

  /** The rows of {@code sql} as read on node {@code n}, after it applied what the cluster committed before. */
  static List<List<String>> readOn(Node n, String sql) throws SQLException {
    try (Connection c = connect(n);
        Statement st = c.createStatement();
        ResultSet r = st.executeQuery(sql)) {
      List<List<String>> rows = new ArrayList<>();
      while (r.next()) {
        List<String> row = new ArrayList<>();
        for (int i = 1; i <= r.getMetaData().getColumnCount(); i++) {
          row.add(String.valueOf(r.getObject(i)));
        }
        rows.add(row);
      }
      return rows;
    }
  }
}
