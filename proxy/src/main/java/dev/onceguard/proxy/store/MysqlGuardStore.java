package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.trace.RecordTimeline;
import dev.onceguard.v1.Decision;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Verdict;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * {@link GuardStore} on MySQL/MariaDB (InnoDB) through JDBC ({@link Db}).
 *
 * <p><b>Time is the database's.</b> Lease ends and owner heartbeats are written as
 * {@code <database now> + length} and compared against the database's now in the statement that
 * reads or fences them, so a sidecar with a skewed clock can neither take over a live claim nor
 * keep a dead one. The caller's clock only stamps informational columns.
 *
 * <p>Every statement on a claimed row is fenced on (owner, attempts): a takeover increments
 * {@code attempts}, so an earlier holder — another process, or an earlier attempt in this one —
 * can no longer renew, confirm or abort it.
 *
 * <p>Lock order is the same in every transaction — ledger row first, then entity row — so claim,
 * confirm and abort of the same key cannot deadlock each other. (Concurrent INSERTs of one new key
 * can still deadlock inside InnoDB when the first inserter rolls back; {@link Db} reports that as
 * contention, and the guard retries.) The state change is one CAS
 * {@code UPDATE … WHERE state IN (from) AND pending_key IS NULL}: read, check and write in one
 * statement, no {@code SELECT … FOR UPDATE}, no lock wait beyond the statement.
 *
 * <p>Round trips: a claim's transaction sends its statements together where nothing is read
 * between them ({@link Db#together}, the connections allow multi-statements). Alone, an accepted
 * record costs one round trip to claim when it creates its entity (BEGIN, INSERT ledger, INSERT
 * entity, COMMIT together), two for another transition with one from-state (BEGIN, INSERT ledger,
 * UPDATE entity together; COMMIT), six with several from-states (each statement alone, the
 * from-state read and recorded among them), and one two-table UPDATE (ledger DONE and entity
 * released in one statement, autocommit) to confirm; an exact replay that misses L1 costs one
 * round trip refused, ROLLBACK and one SELECT. Under load, claims and confirms that are ready together are written as groups
 * (see {@link CommitGroups}): one BEGIN and COMMIT per group, one multi-row INSERT for the group's
 * ledger rows, one for the entities it creates, one CAS per other transition, in one or two round
 * trips; and one UPDATE of the ledger and one of the entities for a group of confirms, in two.
 * A route without a machine has one statement per step, run in autocommit, alone and in groups (a
 * group of its claims is one multi-row INSERT, of its confirms one UPDATE). A lost CAS costs the
 * DELETE of its claim's ledger row before the COMMIT (sent together) and one SELECT of the entity,
 * plus one SELECT of the applied rows when the guard asks; a creating event whose entity exists
 * costs its group the refused round trip, the ROLLBACK and one SELECT of entities beside the one
 * of ledger rows.
 */
public final class MysqlGuardStore implements GuardStore {
  /** The database's clock in epoch milliseconds (sessions run in UTC, see {@link Db}). */
  static final String NOW_MS = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";

  private final Db db;
  private final String ledger;
  private final String entity;
  private final String decision;
  private final String owners;
  private final String ledgerIdTable;
  /** Claims ready together, written in one transaction (see {@link CommitGroups}). */
  private final CommitGroups<ClaimCommand, ClaimOutcome> claims;
  /** Confirms ready together, written in one transaction. */
  private final CommitGroups<Confirm, Boolean> confirms;
  /** Decision-log entries ready together, one INSERT (one connection at most: the log is best effort). */
  private final DecisionLog decisions;
  /** Lease renewals and the owners' heartbeats. */
  private final Leases leases;
  /** Explain and the operator's reset. */
  private final AdminQueries admin;
  /**
   * Deletes the ledger row a claim has just written (route, dedup key, owner) when its CAS was
   * lost, unless the entity holds that key (see the constructor).
   */
  private final String deleteOwnPending;

  /** Records in one group transaction at most: a larger group holds its row locks longer. */
  static final int MAX_GROUP_SIZE = 32;

  /** With two group slots each for claims and confirms (a pool of 8). */
  public MysqlGuardStore(Db db, String tablePrefix) {
    this(db, tablePrefix, 2);
  }

  /**
   * @param groupSlots connections that claim groups may hold at once, and as many for confirm
   *     groups; the rest of the pool serves reads, renewals, aborts and the decision log
   */
  public MysqlGuardStore(Db db, String tablePrefix, int groupSlots) {
    this.db = db;
    this.ledger = tablePrefix + "ledger";
    this.entity = tablePrefix + "entity";
    this.decision = tablePrefix + "decision";
    this.owners = tablePrefix + "owner";
    this.ledgerIdTable = tablePrefix + "ledger_id";
    // a group that failed for any reason but a lost race runs again claim by claim: a record whose
    // values the database refuses (or any other poison) then fails alone, and an outage fails each
    // each waiting queue holds at most as many items as the pool's own queue (see Db: a backstop
    // behind the callers' bounds)
    this.claims = new CommitGroups<>(groupSlots, MAX_GROUP_SIZE, db.queueBound(), this::claimGroup,
        e -> e instanceof dev.onceguard.proxy.store.StoreUnavailableException);
    this.confirms = new CommitGroups<>(groupSlots, MAX_GROUP_SIZE, db.queueBound(), this::confirmGroup,
        e -> e instanceof dev.onceguard.proxy.store.StoreUnavailableException);
    this.decisions = new DecisionLog(db, tablePrefix + "decision", 4 * MAX_GROUP_SIZE);
    this.leases = new Leases(db, ledger, entity, owners);
    this.admin = new AdminQueries(db, ledger, entity, decision, owners, decisions);
    // never the row of a key the entity holds: an entity's pending key and its ledger row are
    // written together and must never be separated, or nothing can confirm, abort or take over the
    // entity again. Its own applied CAS (a count read wrong) or another claim of the key by this
    // owner that committed meanwhile keeps its row so; the claim then meets that row as a ledger
    // conflict (its own it takes over, flagged; another claim's is in flight).
    this.deleteOwnPending = "DELETE FROM " + ledger + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = 1"
        + " AND status = 'PENDING' AND NOT EXISTS (SELECT 1 FROM " + entity + " e WHERE e.machine = ? AND e.entity_id = ?"
        + " AND e.pending_key = ?)";
  }

  /**
   * Store steps waiting now: claims, confirms and decision-log entries waiting for a group, and
   * steps waiting for a connection.
   */
  public long queuedSteps() {
    return (long) claims.queued() + confirms.queued() + decisions.queued() + db.queued();
  }

  /** Store steps refused so far because their queue was at its bound (each failed as an outage). */
  public long refusedSteps() {
    return claims.refused() + confirms.refused() + decisions.refused() + db.refused();
  }

  /** With group slots for a pool of {@code poolSize}: a quarter of it each for claims and confirms. */
  public static int groupSlots(int poolSize) {
    return Math.max(1, poolSize / 4);
  }

  /** Groups written so far and the records they held, claims then confirms (for metrics and benchmarks). */
  public long[] groupCounts() {
    long[] c = claims.counts();
    long[] f = confirms.counts();
    return new long[] {c[0], c[1], f[0], f[1]};
  }

  // ---------------------------------------------------------------------------------- claim

  /** Control flow inside a claim transaction: roll back, then read what refused it. */
  private static final class LedgerConflict extends Db.Signal {
    private static final long serialVersionUID = 1L;
  }

  private static final class EntityConflict extends Db.Signal {
    private static final long serialVersionUID = 1L;
  }

  @Override
  public CompletionStage<ClaimOutcome> claim(ClaimCommand cmd) {
    if (RecordTimeline.on()) {
      Source s = cmd.source();
      RecordTimeline.submitted(s.topic(), s.partition(), s.offset(), RecordTimeline.Step.CLAIM, claims.queued(), claims.running());
    }
    return claims.submit(cmd);
  }

  /**
   * {@code work} of a group of records from {@code sources}, stamped on their timelines when
   * they are followed ({@link RecordTimeline}): the group handed over now, and the work's start,
   * its statements and its end on the connection thread. {@code work} itself when nothing is
   * followed.
   */
  private <T> Db.Work<T> traced(RecordTimeline.Step step, List<Source> sources, Db.Work<T> work) {
    if (sources == null || !RecordTimeline.on()) {
      return work;
    }
    List<RecordTimeline.Key> keys = new ArrayList<>(sources.size());
    for (Source s : sources) {
      keys.add(new RecordTimeline.Key(s.topic(), s.partition(), s.offset()));
    }
    RecordTimeline.grouped(step, keys, db.queued());
    return c -> {
      RecordTimeline.working(step, keys);
      try {
        return work.run(c);
      } finally {
        RecordTimeline.worked();
      }
    };
  }

  /** A multi-row INSERT of a group was refused by a duplicate: its transaction is rolled back as a whole. */
  private static final class GroupRefused extends Db.Signal {
    private static final long serialVersionUID = 1L;
  }

  /**
   * Claims of one group. Several share one transaction and one COMMIT: all ledger rows in one
   * INSERT, the entities of creating events in one INSERT, the CAS of every other transition one
   * UPDATE each. A lost CAS deletes the ledger row its claim had just written, so a conflicting
   * record leaves nothing behind while the others commit. Where no claim needs a read after its
   * CAS, the transaction's statements travel together, in one round trip or two
   * ({@link #claimInTrips}), a claim alone too; else a claim alone is its own transaction
   * ({@link #claimTx}). Claims without a machine are the ledger INSERT alone, in autocommit.
   *
   * <p>A duplicate refuses a multi-row INSERT as a whole, and then the <b>whole transaction</b> is
   * rolled back, never that statement alone: on MariaDB Galera (10.11 measured) a statement
   * rollback inside a transaction leaves the refused statement's row events in the write set when
   * they had outgrown {@code binlog_row_event_max_size} (8 KB by default; a group holds up to 32
   * ledger rows) before the duplicate came, so the other nodes apply rows the writer never kept,
   * fail on them and vote the writer out of the cluster (docs/reliability.md, Galera). The group then starts over: the rows
   * that exist are read in autocommit and are those claims' conflicts, the others are written as a
   * group again; refused a second time (a row written meanwhile), the group is written row by row,
   * where a refused INSERT writes nothing. The refused ones are read and classified alone after
   * the COMMIT, on the same connection, exactly as a claim alone would be.
   */
  private CompletionStage<List<ClaimOutcome>> claimGroup(List<ClaimCommand> group) {
    List<Source> sources = RecordTimeline.on() ? group.stream().map(ClaimCommand::source).toList() : null;
    boolean appendOnly = group.stream().allMatch(cmd -> cmd.machine() == null);
    boolean inTrips = !appendOnly && tripsFit(group);
    if (group.size() == 1 && !inTrips) {
      return db.autocommit(traced(RecordTimeline.Step.CLAIM, sources, c -> List.of(claimTx(c, group.get(0), null))));
    }
    return db.autocommit(traced(RecordTimeline.Step.CLAIM, sources, c -> {
      List<InGroup> found;
      if (appendOnly) {
        // no entity to change: the ledger rows' one INSERT is the whole claim, and a statement in
        // autocommit is atomic by itself (one round trip instead of three); a refused one wrote
        // nothing and committed nothing, so no write set leaves this node (Galera, above)
        found = insertLedgerRows(c, group) ? applyAll(c, group) : claimAroundConflicts(c, group);
      } else if (inTrips) {
        found = claimInTrips(c, group);
        if (found == null) {
          found = claimAroundConflicts(c, group);
        }
      } else {
        try {
          found = Db.transaction(c, x -> {
            if (!insertLedgerRows(x, group)) {
              throw new GroupRefused();
            }
            return applyAll(x, group);
          });
        } catch (GroupRefused refused) {
          found = claimAroundConflicts(c, group);
        }
      }
      List<ClaimOutcome> out = new ArrayList<>(group.size());
      for (int i = 0; i < group.size(); i++) {
        ClaimCommand cmd = group.get(i);
        InGroup o = found.get(i);
        out.add(o instanceof Done d ? d.outcome()
            : o == Refused.BY_LEDGER ? readLedgerRow(c, cmd.route(), cmd.extracted().dedupKey())
            : readCasLost(c, cmd));
      }
      return out;
    }));
  }

  /** A claim's result inside a group transaction: an outcome, or which row refused it (read after the COMMIT). */
  private sealed interface InGroup {}

  private record Done(ClaimOutcome outcome) implements InGroup {}

  private enum Refused implements InGroup {
    BY_LEDGER,
    BY_ENTITY
  }

  private static final String LEDGER_INSERT_COLUMNS = " (route, dedup_key, business_key, fingerprint, entity_id, event, from_state,"
      + " to_state, status, owner, lease_until, attempts, source_topic, source_partition, source_offset, created_at,"
      + " field_digests, payload, payload_size) VALUES ";
  private static final String LEDGER_INSERT_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, " + NOW_MS + " + ?, 1, ?, ?, ?, ?, ?, ?, ?)";
  private static final Db.Null NULL_BYTES = new Db.Null(java.sql.Types.LONGVARBINARY);

  private static Object[] ledgerInsertArgs(ClaimCommand cmd) {
    ExtractedEvent e = cmd.extracted();
    EventConfig ev = cmd.event();
    return new Object[] {cmd.route(), e.dedupKey(), e.businessKey(), e.fingerprint(), nullable(e.entityId()), nullable(e.event()),
        nullable(knownFrom(ev)), ev == null ? Db.NULL_STRING : ev.to(), cmd.owner(), cmd.leaseMillis(), cmd.source().topic(),
        cmd.source().partition(), cmd.source().offset(), cmd.nowMillis(), digests(e), payload(e), payloadSize(e)};
  }

  /** What the row keeps of the record's content (the route's store-payload): the digest map, the value, its size. */
  private static Object digests(ExtractedEvent e) {
    byte[] d = e.fields().encode();
    return d == null ? NULL_BYTES : d;
  }

  private static Object payload(ExtractedEvent e) {
    return e.payload() == null ? NULL_BYTES : e.payload();
  }

  private static Object payloadSize(ExtractedEvent e) {
    return e.payloadSize() < 0 ? Db.NULL_INT : e.payloadSize();
  }

  /** The from-state when the event has exactly one, else null (the CAS tells which). */
  private static String knownFrom(EventConfig ev) {
    return ev != null && ev.from().size() == 1 ? ev.from().iterator().next() : null;
  }

  /**
   * All of the group's ledger rows in one INSERT: true if written, false if a duplicate refused it;
   * then the caller must roll back the transaction ({@link GroupRefused}), not go on in it.
   */
  private boolean insertLedgerRows(Connection c, List<ClaimCommand> group) throws SQLException {
    Stmt insert = ledgerInsert(group);
    return Db.insertUnlessDuplicate(c, insert.sql(), insert.args().toArray()) == group.size();
  }

  /** One statement and its values. */
  private record Stmt(String sql, List<Object> args) {}

  /** The INSERT of all of the group's ledger rows. */
  private Stmt ledgerInsert(List<ClaimCommand> group) {
    List<Object> args = new ArrayList<>(group.size() * 17);
    StringBuilder sql = new StringBuilder("INSERT INTO ").append(ledger).append(LEDGER_INSERT_COLUMNS);
    for (int i = 0; i < group.size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(LEDGER_INSERT_ROW);
      args.addAll(Arrays.asList(ledgerInsertArgs(group.get(i))));
    }
    return new Stmt(sql.toString(), args);
  }

  /**
   * A group whose multi-row INSERT a duplicate refused (replays, typically all of them), after its
   * transaction was rolled back: the rows that exist already are read in one SELECT and are those
   * claims' conflicts; the others are written in a new transaction, as a group again, or row by
   * row if a multi-row INSERT is refused once more (a row another transaction committed after the
   * SELECT, or an entity that exists).
   */
  private List<InGroup> claimAroundConflicts(Connection c, List<ClaimCommand> group) throws SQLException {
    StringBuilder in = new StringBuilder();
    List<Object> args = new ArrayList<>(group.size() * 2);
    for (ClaimCommand cmd : group) {
      in.append(in.isEmpty() ? "" : ", ").append("(?, ?)");
      args.add(cmd.route());
      args.add(cmd.extracted().dedupKey());
    }
    Map<String, LedgerRow> existing = new HashMap<>();
    for (LedgerRow r : Db.query(c, "SELECT " + LEDGER_ROW_COLUMNS + " FROM " + ledger + " l LEFT JOIN " + owners + " o ON o.owner = l.owner"
        + " WHERE (l.route, l.dedup_key) IN (" + in + ")", MysqlGuardStore::ledgerRow, args.toArray())) {
      existing.put(r.route() + "\u0000" + r.dedupKey(), r);
    }
    java.util.Set<String> entities = existingEntities(c, group, existing);
    List<ClaimCommand> fresh = new ArrayList<>();
    List<ClaimCommand> entityExists = new ArrayList<>();
    for (ClaimCommand cmd : group) {
      if (!existing.containsKey(cmd.route() + "\u0000" + cmd.extracted().dedupKey())) {
        (entities.contains(entityKey(cmd)) ? entityExists : fresh).add(cmd);
      }
    }
    List<InGroup> outcomes = List.of();
    if (!fresh.isEmpty()) {
      try {
        outcomes = Db.transaction(c, x -> {
          if (fresh.size() > 1 && fresh.size() < group.size()) {
            if (!insertLedgerRows(x, fresh)) {
              throw new GroupRefused();
            }
            return applyAll(x, fresh);
          }
          return rowByRow(x, fresh);
        });
      } catch (GroupRefused refusedAgain) {
        outcomes = Db.transaction(c, x -> rowByRow(x, fresh));
      }
    }
    List<InGroup> out = new ArrayList<>(group.size());
    int next = 0;
    for (ClaimCommand cmd : group) {
      LedgerRow row = existing.get(cmd.route() + "\u0000" + cmd.extracted().dedupKey());
      out.add(row != null ? new Done(new ClaimOutcome.LedgerConflict(row)) : entityExists.contains(cmd) ? Refused.BY_ENTITY
          : outcomes.get(next++));
    }
    return out;
  }

  /**
   * Of the group's creating events without a ledger row in {@code existing}, the entities that
   * exist ({@link #entityKey}), read in one SELECT: those claims' CAS is lost, so they are
   * classified without being written (as a lost CAS whose ledger row is deleted again would be),
   * and the others are written as a group again instead of row by row.
   */
  private java.util.Set<String> existingEntities(Connection c, List<ClaimCommand> group, Map<String, LedgerRow> existing)
      throws SQLException {
    StringBuilder in = new StringBuilder();
    List<Object> args = new ArrayList<>();
    for (ClaimCommand cmd : group) {
      if (cmd.machine() != null && cmd.event().creating() && !existing.containsKey(cmd.route() + "\u0000" + cmd.extracted().dedupKey())) {
        in.append(in.isEmpty() ? "" : ", ").append("(?, ?)");
        args.add(cmd.machine());
        args.add(cmd.extracted().entityId());
      }
    }
    if (args.isEmpty()) {
      return java.util.Set.of();
    }
    return new java.util.HashSet<>(Db.query(c, "SELECT machine, entity_id FROM " + entity + " WHERE (machine, entity_id) IN (" + in + ")",
        r -> r.getString(1) + "\u0000" + r.getString(2), args.toArray()));
  }

  private static String entityKey(ClaimCommand cmd) {
    return cmd.machine() + "\u0000" + cmd.extracted().entityId();
  }

  /** Claims written one statement per row: a refused INSERT of one row writes nothing, and the others go on. */
  private List<InGroup> rowByRow(Connection c, List<ClaimCommand> claims) throws SQLException {
    List<InGroup> out = new ArrayList<>(claims.size());
    for (ClaimCommand cmd : claims) {
      out.add(claimInGroup(c, cmd));
    }
    return out;
  }

  /**
   * The transitions of a group whose ledger rows are written: the creating ones in one INSERT
   * ({@link GroupRefused} if a duplicate refused it), the others one CAS each.
   */
  private List<InGroup> applyAll(Connection c, List<ClaimCommand> group) throws SQLException {
    List<ClaimCommand> creating = new ArrayList<>();
    for (ClaimCommand cmd : group) {
      if (cmd.machine() != null && cmd.event().creating()) {
        creating.add(cmd);
      }
    }
    boolean allCreated = creating.size() >= 2;
    if (allCreated && !insertEntities(c, creating)) {
      throw new GroupRefused();
    }
    List<InGroup> out = new ArrayList<>(group.size());
    for (ClaimCommand cmd : group) {
      out.add(allCreated && cmd.machine() != null && cmd.event().creating() ? new Done(claimed(cmd, null, null)) : casInGroup(c, cmd));
    }
    return out;
  }

  private boolean insertEntities(Connection c, List<ClaimCommand> creating) throws SQLException {
    Stmt insert = entityInsert(creating);
    return Db.insertUnlessDuplicate(c, insert.sql(), insert.args().toArray()) == creating.size();
  }

  /** The INSERT of the entities of the creating events {@code creating}. */
  private Stmt entityInsert(List<ClaimCommand> creating) {
    List<Object> args = new ArrayList<>(creating.size() * 6);
    StringBuilder sql = new StringBuilder("INSERT INTO ").append(entity)
        .append(" (machine, entity_id, state, prev_state, version, pending_key, pending_until, updated_at) VALUES ");
    for (int i = 0; i < creating.size(); i++) {
      ClaimCommand cmd = creating.get(i);
      sql.append(i == 0 ? "" : ", ").append("(?, ?, ?, NULL, 1, ?, ").append(NOW_MS).append(" + ?, ?)");
      args.addAll(List.of(cmd.machine(), cmd.extracted().entityId(), cmd.event().to(), cmd.extracted().dedupKey(), cmd.leaseMillis(),
          cmd.nowMillis()));
    }
    return new Stmt(sql.toString(), args);
  }

  /**
   * Whether a group can be claimed in round trips of whole statement lists ({@link #claimInTrips}):
   * no claim needs a read after its CAS (each is a creating event, has one from-state, or has no
   * machine).
   */
  private static boolean tripsFit(List<ClaimCommand> group) {
    for (ClaimCommand cmd : group) {
      if (cmd.machine() != null && !cmd.event().creating() && cmd.event().from().size() != 1) {
        return false;
      }
    }
    return true;
  }

  /**
   * The claims of a group as one transaction in one round trip, or two where it has CAS, instead
   * of one per statement (START TRANSACTION, the ledger INSERT, the entity INSERT, one CAS per
   * transition, COMMIT). START TRANSACTION, the ledger rows' INSERT, the creating events' entity INSERT and
   * every other transition's CAS travel together ({@link Db#together}), and COMMIT with them when
   * there is no CAS. Otherwise the CAS counts come back first, and COMMIT follows in the second
   * trip, after the DELETE of the ledger row of each claim whose CAS was lost (that claim then
   * leaves nothing behind, as in {@link #casInGroup}).
   *
   * @return the claims' results, or null when a duplicate refused an INSERT: the whole
   *     transaction is rolled back then, never the statement alone (see {@link #claimGroup}: Galera)
   */
  private List<InGroup> claimInTrips(Connection c, List<ClaimCommand> group) throws SQLException {
    List<String> sql = new ArrayList<>();
    List<Object> args = new ArrayList<>();
    sql.add("START TRANSACTION");
    Stmt ledgerRows = ledgerInsert(group);
    sql.add(ledgerRows.sql());
    args.addAll(ledgerRows.args());
    List<ClaimCommand> creating = new ArrayList<>();
    List<ClaimCommand> cas = new ArrayList<>();
    for (ClaimCommand cmd : group) {
      if (cmd.machine() != null) {
        (cmd.event().creating() ? creating : cas).add(cmd);
      }
    }
    if (!creating.isEmpty()) {
      Stmt entities = entityInsert(creating);
      sql.add(entities.sql());
      args.addAll(entities.args());
    }
    for (ClaimCommand cmd : cas) {
      Stmt update = casUpdate(cmd);
      sql.add(update.sql());
      args.addAll(update.args());
    }
    if (cas.isEmpty()) {
      sql.add("COMMIT");
    }
    try {
      return Db.rollingBack(c, x -> {
        long[] n = Db.together(x, sql, args.toArray());
        java.util.Set<ClaimCommand> lost = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        int first = creating.isEmpty() ? 2 : 3;
        for (int i = 0; i < cas.size(); i++) {
          if (n[first + i] != 1) {
            lost.add(cas.get(i));
          }
        }
        if (!cas.isEmpty()) {
          List<String> end = new ArrayList<>();
          List<Object> endArgs = new ArrayList<>();
          for (ClaimCommand cmd : lost) {
            end.add(deleteOwnPending);
            endArgs.addAll(deleteOwnPendingArgs(cmd));
          }
          end.add("COMMIT");
          RecordTimeline.beforeCommit();
          Db.together(x, end, endArgs.toArray());
        }
        List<InGroup> out = new ArrayList<>(group.size());
        for (ClaimCommand cmd : group) {
          out.add(lost.contains(cmd) ? Refused.BY_ENTITY : new Done(claimed(cmd, knownFrom(cmd.event()), null)));
        }
        return out;
      });
    } catch (Db.DuplicateKeyException refused) {
      return null;
    }
  }

  /** One claim of a group, row by row: its ledger row, then its CAS. */
  private InGroup claimInGroup(Connection c, ClaimCommand cmd) throws SQLException {
    return writeLedgerRow(c, cmd, knownFrom(cmd.event()), null) != 1 ? Refused.BY_LEDGER : casInGroup(c, cmd);
  }

  /** The CAS of one claim whose ledger row is written; a lost CAS deletes that row again. */
  private InGroup casInGroup(Connection c, ClaimCommand cmd) throws SQLException {
    String knownFrom = knownFrom(cmd.event());
    if (cmd.machine() == null) {
      return new Done(claimed(cmd, knownFrom, null));
    }
    Step step = applyCas(c, cmd);
    if (step == Step.CAS_LOST) {
      Db.update(c, deleteOwnPending, deleteOwnPendingArgs(cmd).toArray());
      return Refused.BY_ENTITY;
    }
    return new Done(afterCas(c, cmd, step, knownFrom, null));
  }

  private static List<Object> deleteOwnPendingArgs(ClaimCommand cmd) {
    ExtractedEvent e = cmd.extracted();
    return List.of(cmd.route(), e.dedupKey(), cmd.owner(), cmd.machine(), e.entityId(), e.dedupKey());
  }

  private static ClaimOutcome claimed(ClaimCommand cmd, String fromState, LedgerRow rejected) {
    return new ClaimOutcome.Claimed(fromState, cmd.nowMillis() + cmd.leaseMillis(), rejected == null ? 1 : rejected.attempts() + 1,
        rejected != null);
  }

  /** An applied CAS: for an event with several from-states, reads which one it left and records it. */
  private ClaimOutcome afterCas(Connection c, ClaimCommand cmd, Step step, String knownFrom, LedgerRow rejected) throws SQLException {
    if (step != Step.NEEDS_FROM) {
      return claimed(cmd, knownFrom, rejected);
    }
    ExtractedEvent e = cmd.extracted();
    String from = Db.query(c, "SELECT prev_state FROM " + entity + " WHERE machine = ? AND entity_id = ?", r -> r.getString(1),
        cmd.machine(), e.entityId()).get(0);
    Db.update(c, "UPDATE " + ledger + " SET from_state = ? WHERE route = ? AND dedup_key = ?", from, cmd.route(), e.dedupKey());
    return claimed(cmd, from, rejected);
  }

  @Override
  public CompletionStage<ClaimOutcome> takeOver(ClaimCommand cmd, LedgerRow row, boolean force) {
    return db.autocommit(c -> row.rejected() ? claimTx(c, cmd, row) : takeOverPending(c, cmd, row, force));
  }

  /**
   * The claim transaction: the ledger row (a fresh INSERT, or a REJECTED row claimed again), then
   * the CAS. A refused INSERT or a lost CAS rolls back and reads the row that refused it.
   */
  private ClaimOutcome claimTx(Connection c, ClaimCommand cmd, LedgerRow rejected) throws SQLException {
    ExtractedEvent e = cmd.extracted();
    String knownFrom = knownFrom(cmd.event());
    try {
      return Db.atomically(c, cmd.machine() != null, x -> {
        if (writeLedgerRow(x, cmd, knownFrom, rejected) != 1) {
          throw new LedgerConflict();
        }
        Step step = cmd.machine() == null ? Step.NO_MACHINE : applyCas(x, cmd);
        if (step == Step.CAS_LOST) {
          throw new EntityConflict();
        }
        return afterCas(x, cmd, step, knownFrom, rejected);
      });
    } catch (LedgerConflict x) {
      return readLedgerRow(c, cmd.route(), e.dedupKey());
    } catch (EntityConflict x) {
      return readCasLost(c, cmd);
    }
  }

  /** 1 if the row is now this claim's; a refused INSERT answers 0. */
  private long writeLedgerRow(Connection c, ClaimCommand cmd, String knownFrom, LedgerRow rejected) throws SQLException {
    ExtractedEvent e = cmd.extracted();
    EventConfig ev = cmd.event();
    if (rejected == null) {
      return Db.insertUnlessDuplicate(c, "INSERT INTO " + ledger + LEDGER_INSERT_COLUMNS + LEDGER_INSERT_ROW, ledgerInsertArgs(cmd));
    }
    // A rejected record comes back (a replay, or a re-drive after a fix, possibly with corrected
    // content): it is claimed again as it is now, fenced on the attempt that was rejected.
    return Db.update(c,
        "UPDATE " + ledger + " SET status = 'PENDING', business_key = ?, fingerprint = ?, entity_id = ?, event = ?, from_state = ?,"
            + " to_state = ?, owner = ?, lease_until = " + NOW_MS + " + ?, attempts = attempts + 1, source_topic = ?,"
            + " source_partition = ?, source_offset = ?, completed_at = NULL, field_digests = ?, payload = ?, payload_size = ?"
            + " WHERE route = ? AND dedup_key = ? AND status = 'REJECTED' AND attempts = ?",
        e.businessKey(), e.fingerprint(), nullable(e.entityId()), nullable(e.event()), nullable(knownFrom),
        ev == null ? Db.NULL_STRING : ev.to(), cmd.owner(), cmd.leaseMillis(), cmd.source().topic(), cmd.source().partition(),
        cmd.source().offset(), digests(e), payload(e), payloadSize(e), cmd.route(), e.dedupKey(), rejected.attempts());
  }

  private enum Step {
    NO_MACHINE,
    APPLIED,
    NEEDS_FROM,
    CAS_LOST
  }

  private Step applyCas(Connection c, ClaimCommand cmd) throws SQLException {
    EventConfig ev = cmd.event();
    ExtractedEvent e = cmd.extracted();
    if (ev.creating()) {
      long n = Db.insertUnlessDuplicate(c,
          "INSERT INTO " + entity + " (machine, entity_id, state, prev_state, version, pending_key, pending_until, updated_at)"
              + " VALUES (?, ?, ?, NULL, 1, ?, " + NOW_MS + " + ?, ?)",
          cmd.machine(), e.entityId(), ev.to(), e.dedupKey(), cmd.leaseMillis(), cmd.nowMillis());
      return n == 1 ? Step.APPLIED : Step.CAS_LOST;
    }
    Stmt update = casUpdate(cmd);
    long n = Db.update(c, update.sql(), update.args().toArray());
    return n != 1 ? Step.CAS_LOST : ev.from().size() == 1 ? Step.APPLIED : Step.NEEDS_FROM;
  }

  /** The CAS of a transition that does not create its entity: 1 row changed if it applied, 0 if lost. */
  private Stmt casUpdate(ClaimCommand cmd) {
    EventConfig ev = cmd.event();
    ExtractedEvent e = cmd.extracted();
    List<Object> args = new ArrayList<>(6 + ev.from().size());
    args.addAll(List.of(ev.to(), e.dedupKey(), cmd.leaseMillis(), cmd.nowMillis(), cmd.machine(), e.entityId()));
    StringBuilder in = new StringBuilder();
    for (String from : ev.from()) {
      in.append(in.isEmpty() ? "?" : ", ?");
      args.add(from);
    }
    // prev_state = state is evaluated before state = ? (single-table UPDATE assigns left to right)
    return new Stmt("UPDATE " + entity + " SET prev_state = state, state = ?, version = version + 1, pending_key = ?,"
        + " pending_until = " + NOW_MS + " + ?, updated_at = ?"
        + " WHERE machine = ? AND entity_id = ? AND pending_key IS NULL AND state IN (" + in + ")", args);
  }

  static final String LEDGER_ROW_COLUMNS = "l.route, l.dedup_key, l.business_key, l.fingerprint, l.status, l.owner,"
      + " l.lease_until, l.source_topic, l.source_partition, l.source_offset, l.from_state, l.to_state, l.attempts,"
      + " l.lease_until - " + NOW_MS + ", o.alive_until - " + NOW_MS + ", COALESCE(l.completed_at, l.created_at), l.field_digests";

  static LedgerRow ledgerRow(ResultSet r) throws SQLException {
    return new LedgerRow(r.getString(1), r.getString(2), r.getString(3), r.getString(4), r.getString(5), r.getString(6),
        Db.longOrNull(r, 7), r.getString(8), r.getInt(9), r.getLong(10), r.getString(11), r.getString(12), r.getInt(13),
        Db.longOrNull(r, 14), Db.longOrNull(r, 15), Db.longOrNull(r, 16), r.getBytes(17));
  }

  /** The row that refused an INSERT; {@link ClaimOutcome.Retry} if it is gone already. */
  private ClaimOutcome readLedgerRow(Connection c, String route, String dedupKey) throws SQLException {
    LedgerRow row = ledgerRowOrNull(c, route, dedupKey);
    return row == null ? new ClaimOutcome.Retry("ledger row vanished before it could be read") : new ClaimOutcome.LedgerConflict(row);
  }

  private LedgerRow ledgerRowOrNull(Connection c, String route, String dedupKey) throws SQLException {
    List<LedgerRow> rows = Db.query(c,
        "SELECT " + LEDGER_ROW_COLUMNS + " FROM " + ledger + " l LEFT JOIN " + owners + " o ON o.owner = l.owner"
            + " WHERE l.route = ? AND l.dedup_key = ?",
        MysqlGuardStore::ledgerRow, route, dedupKey);
    return rows.isEmpty() ? null : rows.get(0);
  }

  /**
   * After a lost CAS, the entity and the ledger row of the claim's own key, in one statement: read
   * separately, a same-key copy that claimed and confirmed the key between the two reads would show
   * the entity past the transition with no row to say it was this key's (answered ALREADY_APPLIED,
   * as a re-send under another key, instead of by the ledger).
   */
  private ClaimOutcome readCasLost(Connection c, ClaimCommand cmd) throws SQLException {
    List<ClaimOutcome.CasLost> rows = Db.query(c,
        "SELECT " + LEDGER_ROW_COLUMNS + ", e.state, e.version, e.pending_key, " + NOW_MS + " - e.pending_until"
            + " FROM (SELECT 1) one"
            + " LEFT JOIN " + entity + " e ON e.machine = ? AND e.entity_id = ?"
            + " LEFT JOIN " + ledger + " l ON l.route = ? AND l.dedup_key = ?"
            + " LEFT JOIN " + owners + " o ON o.owner = l.owner",
        r -> new ClaimOutcome.CasLost(r.getString(18) == null ? null : new EntityRow(r.getString(18), r.getLong(19), r.getString(20),
            Db.longOrNull(r, 21)), r.getString(1) == null ? null : ledgerRow(r)),
        cmd.machine(), cmd.extracted().entityId(), cmd.route(), cmd.extracted().dedupKey());
    return rows.get(0);
  }

  private EntityRow entityOrNull(Connection c, String machine, String entityId) throws SQLException {
    List<EntityRow> rows = Db.query(c,
        "SELECT state, version, pending_key, " + NOW_MS + " - pending_until FROM " + entity + " WHERE machine = ? AND entity_id = ?",
        r -> new EntityRow(r.getString(1), r.getLong(2), r.getString(3), Db.longOrNull(r, 4)),
        machine, entityId);
    return rows.isEmpty() ? null : rows.get(0);
  }

  /**
   * The ledger row of {@code (route, dedupKey)} with its liveness, or {@code null}: the fact a claim
   * of the key would meet. Read-only, for previews (redrive's dry run), never on a record's path.
   */
  public CompletionStage<LedgerRow> ledgerRow(String route, String dedupKey) {
    return db.autocommit(c -> ledgerRowOrNull(c, route, dedupKey));
  }

  /** The entity's row as a CAS would meet it, or {@code null} if it does not exist. Read-only, for previews. */
  public CompletionStage<EntityRow> entityRow(String machine, String entityId) {
    return db.autocommit(c -> entityOrNull(c, machine, entityId));
  }

  /**
   * CAS on owner and attempt, with the claim's liveness checked again by the database in the same
   * statement: exactly one of several contenders takes a claim that is not live, and none takes a
   * live one (unless {@code force}: this owner's own abandoned attempt).
   *
   * <p>The owner row is read as a row to update, not as a subquery: the statement waits for a
   * heartbeat that holds it, then reads what that heartbeat wrote (a subquery would read the last
   * committed row at {@code READ COMMITTED}, without waiting). When the owner is dead, its
   * {@code taken_over} count goes up: the owner row the decision rests on is then in the
   * takeover's write set, and on Galera a heartbeat that another node certified after this node's
   * last applied write (which this read could not see yet) fails the takeover at certification
   * (1213: contention, retried) instead of letting it take a live owner's claim. A live owner's row
   * is not changed (a takeover after the lease alone does not touch it).
   */
  private ClaimOutcome takeOverPending(Connection c, ClaimCommand cmd, LedgerRow row, boolean force) throws SQLException {
    ExtractedEvent e = cmd.extracted();
    long until = cmd.nowMillis() + cmd.leaseMillis();
    // an orphaned claim of this record under an earlier business key keeps its key, business key
    // and fingerprint: they are what the business was sent under that key
    boolean sameKey = row.dedupKey().equals(e.dedupKey());
    return Db.atomically(c, cmd.machine() != null, x -> {
      // rows found, not changed (the driver's default): the ledger row, plus its owner row if any
      long n = Db.update(x,
          // the record's business key and fingerprint as read now: a takeover of this very record
          // after a configuration change (ClaimPolicy) confirms what the record is under it
          "UPDATE " + ledger + " l LEFT JOIN " + owners + " o ON o.owner = l.owner"
              + " SET l.owner = ?, l.lease_until = " + NOW_MS + " + ?, l.attempts = l.attempts + 1,"
              + " l.source_topic = ?, l.source_partition = ?, l.source_offset = ?, l.business_key = ?, l.fingerprint = ?,"
              + " l.field_digests = IF(?, ?, l.field_digests), l.payload = IF(?, ?, l.payload), l.payload_size = IF(?, ?, l.payload_size),"
              + " o.taken_over = o.taken_over + (o.alive_until <= " + NOW_MS + ")"
              + " WHERE l.route = ? AND l.dedup_key = ? AND l.status = 'PENDING' AND l.owner = ? AND l.attempts = ?"
              + " AND (? OR l.lease_until IS NULL OR l.lease_until <= " + NOW_MS + " OR o.alive_until <= " + NOW_MS + ")",
          cmd.owner(), cmd.leaseMillis(), cmd.source().topic(), cmd.source().partition(), cmd.source().offset(),
          sameKey ? e.businessKey() : row.businessKey(), sameKey ? e.fingerprint() : row.fingerprint(), sameKey, digests(e), sameKey,
          payload(e), sameKey, payloadSize(e), cmd.route(), row.dedupKey(),
          row.owner(), row.attempts(), force);
      if (n < 1) {
        return new ClaimOutcome.Retry("takeover lost: the claim changed meanwhile");
      }
      if (cmd.machine() != null) {
        Db.update(x, "UPDATE " + entity + " SET pending_until = " + NOW_MS + " + ? WHERE machine = ? AND entity_id = ? AND pending_key = ?",
            cmd.leaseMillis(), cmd.machine(), e.entityId(), row.dedupKey());
      }
      return new ClaimOutcome.Claimed(row.fromState(), until, row.attempts() + 1, true, sameKey ? null : row.dedupKey());
    });
  }

  @Override
  public CompletionStage<Boolean> releaseAbandonedApiClaim(String machine, String entityId, String pendingKey, long graceMillis) {
    // The lookup runs in autocommit: records waiting on an expired Kafka claim repeat it every
    // early-arrival-retry until Kafka's redelivery takes the claim over, and need no transaction.
    // The entity's pending key always has its PENDING ledger row (claim, confirm and abort write
    // both together). Exactly one row: it is that claim. Several: the same dedup key and entity
    // id are pending in another machine's route too, and which row holds this entity cannot be
    // told: leave them. The undo is fenced on owner and attempt.
    return db.autocommit(c -> {
      List<PendingRow> found = Db.query(c,
          "SELECT route, owner, attempts, source_partition, " + NOW_MS + " - lease_until FROM " + ledger
              + " WHERE entity_id = ? AND dedup_key = ? AND status = 'PENDING'",
          r -> new PendingRow(r.getString(1), r.getString(2), r.getInt(3), r.getInt(4), Db.longOrNull(r, 5)),
          entityId, pendingKey);
      if (found.size() != 1) {
        return false;
      }
      PendingRow p = found.get(0);
      if (p.partition() >= 0 || p.overdueMillis() == null || p.overdueMillis() <= graceMillis) {
        return false;
      }
      // kept as REJECTED, not deleted: the caller was handed the claim and may have acted on it, so a
      // later claim of the key is a redelivery (flagged), never a first delivery
      return Db.transaction(c, x -> rejectClaim(x, new Claim(p.route(), pendingKey, null, null, machine, entityId, null, null, null,
          p.owner(), 0, p.attempts(), false, null), System.currentTimeMillis()));
    });
  }

  private record PendingRow(String route, String owner, int attempts, int partition, Long overdueMillis) {}

  @Override
  public CompletionStage<List<LedgerRow>> pendingRows(String entityId, String pendingKey) {
    return db.autocommit(c -> Db.query(c,
        "SELECT " + LEDGER_ROW_COLUMNS + " FROM " + ledger + " l LEFT JOIN " + owners + " o ON o.owner = l.owner"
            + " WHERE l.entity_id = ? AND l.dedup_key = ? AND l.status = 'PENDING'",
        MysqlGuardStore::ledgerRow, entityId, pendingKey));
  }

  @Override
  public CompletionStage<List<LedgerRow>> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit) {
    if (routes.isEmpty()) {
      return CompletableFuture.completedFuture(List.of());
    }
    // the index (entity_id, event) finds the rows; its entries hold the primary key, whose first
    // column is the route, so the route filter needs no extra row reads
    StringBuilder in = new StringBuilder();
    List<Object> args = new ArrayList<>(routes.size() + 4);
    args.add(entityId);
    args.add(event);
    for (String r : routes) {
      in.append(in.isEmpty() ? "?" : ", ?");
      args.add(r);
    }
    args.add(fingerprint);
    args.add(limit);
    return db.autocommit(c -> Db.query(c,
        "SELECT " + LEDGER_ROW_COLUMNS + " FROM " + ledger + " l LEFT JOIN " + owners + " o ON o.owner = l.owner"
            + " WHERE l.entity_id = ? AND l.event = ? AND l.status = 'DONE' AND l.route IN (" + in + ")"
            + " ORDER BY l.fingerprint = ? DESC, l.completed_at DESC LIMIT ?",
        MysqlGuardStore::ledgerRow, args.toArray()));
  }

  private static Object nullable(String s) {
    return s == null ? Db.NULL_STRING : s;
  }

  // ---------------------------------------------------------------------------- confirm/abort

  /** @param response kept with the DONE row; {@code null}: none */
  private record Confirm(Claim claim, long nowMillis, StoredResponse response) {}

  @Override
  public CompletionStage<Boolean> confirm(Claim claim, long nowMillis, StoredResponse response) {
    Source s = claim.source();
    if (s != null && RecordTimeline.on()) {
      RecordTimeline.submitted(s.topic(), s.partition(), s.offset(), RecordTimeline.Step.CONFIRM, confirms.queued(), confirms.running());
    }
    return confirms.submit(new Confirm(claim, nowMillis, response))
        .thenCompose(ok -> ok ? CompletableFuture.completedFuture(true) : confirmedEarlier(claim));
  }

  @Override
  public CompletionStage<StoredResponse> storedResponse(String route, String dedupKey) {
    return db.autocommit(c -> {
      List<StoredResponse> rows = Db.query(c, "SELECT response, response_type, completed_at FROM " + ledger
              + " WHERE route = ? AND dedup_key = ? AND status = 'DONE' AND response IS NOT NULL",
          r -> new StoredResponse(r.getBytes(1), r.getString(2) == null ? "" : r.getString(2), r.getLong(3)), route, dedupKey);
      return rows.isEmpty() ? null : rows.get(0);
    });
  }

  /**
   * Confirms of one group. Alone, one statement in autocommit ({@link #confirmOne}). Several share
   * one transaction of two single-table UPDATEs for the whole group, in two round trips
   * ({@link #confirmAllInTrips}; the two single-table UPDATEs measured ~25% cheaper end to end than
   * one two-table UPDATE); without entities, one UPDATE in autocommit ({@link #confirmAll}). If
   * some claim of the group was lost, they are confirmed one by one instead.
   */
  private CompletionStage<List<Boolean>> confirmGroup(List<Confirm> group) {
    List<Source> sources = RecordTimeline.on()
        ? group.stream().map(f -> f.claim().source()).filter(java.util.Objects::nonNull).toList() : null;
    return db.autocommit(traced(RecordTimeline.Step.CONFIRM, sources, c -> {
      // a stored response is one more column per row: those confirms (Guard API calls, off the
      // Kafka path) are written one statement each rather than widen the group's UPDATE
      if (group.size() == 1 || group.stream().anyMatch(f -> f.response() != null)) {
        List<Boolean> out = new ArrayList<>(group.size());
        for (Confirm f : group) {
          out.add(confirmOne(c, f));
        }
        return out;
      }
      // without entities the group's confirm is one UPDATE, atomic by itself in autocommit (one
      // round trip instead of three); if it matched fewer rows than the group holds, those it did
      // match are confirmed already, and confirming them again one by one finds them DONE under
      // their own claim (confirm: confirmedEarlier)
      boolean appendOnly = group.stream().allMatch(f -> f.claim().machine() == null);
      try {
        return appendOnly ? confirmAll(c, group) : confirmAllInTrips(c, group);
      } catch (SomeClaimLost lost) {
        List<Boolean> out = new ArrayList<>(group.size());
        for (Confirm f : group) {
          out.add(confirmOne(c, f));
        }
        return out;
      }
    }));
  }

  /**
   * One confirm, one statement in autocommit: the ledger row turns DONE and the entity's pending
   * transition is released together or not at all (the LEFT JOIN reads the ledger first, so rows
   * are locked in the usual order, ledger then entity; the entity is only touched if it still
   * waits on this key).
   */
  private boolean confirmOne(Connection c, Confirm f) throws SQLException {
    Claim claim = f.claim();
    long now = f.nowMillis();
    StoredResponse response = f.response();
    Object body = response == null ? new Db.Null(java.sql.Types.LONGVARBINARY) : response.body();
    Object type = response == null ? Db.NULL_STRING : response.contentType();
    if (claim.machine() == null) {
      return Db.update(c,
          "UPDATE " + ledger + " SET status = 'DONE', completed_at = ?, lease_until = NULL, response = ?, response_type = ?"
              + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
          now, body, type, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts()) == 1;
    }
    return Db.update(c,
        "UPDATE " + ledger + " l LEFT JOIN " + entity + " e ON e.machine = ? AND e.entity_id = ? AND e.pending_key = l.dedup_key"
            + " SET l.status = 'DONE', l.completed_at = ?, l.lease_until = NULL, l.response = ?, l.response_type = ?,"
            + " e.pending_key = NULL, e.pending_until = NULL, e.updated_at = ?"
            + " WHERE l.route = ? AND l.dedup_key = ? AND l.owner = ? AND l.attempts = ? AND l.status = 'PENDING'",
        claim.machine(), claim.entityId(), now, body, type, now, claim.route(), claim.dedupKey(), claim.owner(),
        claim.attempts()) >= 1;
  }

  /** Inside a group confirm: a ledger row was not its claim's any more; the group is confirmed one by one instead. */
  private static final class SomeClaimLost extends Db.Signal {
    private static final long serialVersionUID = 1L;
  }

  /**
   * A group without entities: every ledger row DONE in one UPDATE, fenced on (owner, attempt)
   * each, in autocommit. If it matched fewer rows than the group holds, some claim was lost, and
   * which one cannot be told from a row count ({@link SomeClaimLost}; the rows it matched are
   * confirmed, see {@link #confirmGroup}).
   */
  private List<Boolean> confirmAll(Connection c, List<Confirm> group) throws SQLException {
    Stmt ledgerDone = confirmUpdates(group)[0];
    if (Db.update(c, ledgerDone.sql(), ledgerDone.args().toArray()) != group.size()) {
      throw new SomeClaimLost();
    }
    return Collections.nCopies(group.size(), true);
  }

  /**
   * A group with entities, as one transaction in two round trips instead of four: START
   * TRANSACTION travels with the ledger rows' UPDATE, and COMMIT with the entities' (the first
   * count decides between the second trip and a rollback, so it comes back first). If the ledger's
   * UPDATE matched fewer rows than the group holds, some claim was lost: the transaction rolls back
   * ({@link SomeClaimLost}).
   */
  private List<Boolean> confirmAllInTrips(Connection c, List<Confirm> group) throws SQLException {
    Stmt[] updates = confirmUpdates(group);
    return Db.rollingBack(c, x -> {
      if (Db.together(x, List.of("START TRANSACTION", updates[0].sql()), updates[0].args().toArray())[1] != group.size()) {
        throw new SomeClaimLost();
      }
      RecordTimeline.beforeCommit();
      // a group with entities: the release statement exists (confirmGroup sends the others to confirmAll)
      Db.together(x, List.of(updates[1].sql(), "COMMIT"), updates[1].args().toArray());
      return Collections.nCopies(group.size(), true);
    });
  }

  /**
   * A group's confirm: the UPDATE of its ledger rows, fenced on (owner, attempt) each, and the
   * UPDATE that releases its entities (only those still pending on their claim's key; null
   * without entities).
   */
  private Stmt[] confirmUpdates(List<Confirm> group) {
    long now = group.get(group.size() - 1).nowMillis();
    List<Object> args = new ArrayList<>(1 + group.size() * 4);
    args.add(now);
    StringBuilder in = new StringBuilder();
    List<Object> entityArgs = new ArrayList<>();
    entityArgs.add(now);
    StringBuilder entityIn = new StringBuilder();
    for (Confirm f : group) {
      Claim claim = f.claim();
      in.append(in.isEmpty() ? "" : ", ").append("(?, ?, ?, ?)");
      args.addAll(List.of(claim.route(), claim.dedupKey(), claim.owner(), claim.attempts()));
      if (claim.machine() != null) {
        entityIn.append(entityIn.isEmpty() ? "" : ", ").append("(?, ?, ?)");
        entityArgs.addAll(List.of(claim.machine(), claim.entityId(), claim.dedupKey()));
      }
    }
    Stmt ledgerDone = new Stmt("UPDATE " + ledger + " SET status = 'DONE', completed_at = ?, lease_until = NULL"
        + " WHERE status = 'PENDING' AND (route, dedup_key, owner, attempts) IN (" + in + ")", args);
    Stmt release = entityIn.isEmpty() ? null : new Stmt("UPDATE " + entity + " SET pending_key = NULL, pending_until = NULL,"
        + " updated_at = ? WHERE (machine, entity_id, pending_key) IN (" + entityIn + ")", entityArgs);
    return new Stmt[] {ledgerDone, release};
  }

  /**
   * Whether the claim is DONE under this owner already: a confirm whose COMMIT reached the server
   * but whose answer was lost (connection killed) is retried, and the retry finds nothing PENDING.
   * That is success, not a lost claim. DONE rows keep their owner, so a claim another owner took
   * over and confirmed still answers false. Costs a round trip only when the UPDATE matched nothing.
   */
  private CompletionStage<Boolean> confirmedEarlier(Claim claim) {
    return db.autocommit(c -> {
      List<Boolean> rows = Db.query(c, "SELECT status, owner, attempts FROM " + ledger + " WHERE route = ? AND dedup_key = ?",
          r -> "DONE".equals(r.getString(1)) && claim.owner().equals(r.getString(2)) && claim.attempts() == r.getInt(3),
          claim.route(), claim.dedupKey());
      return !rows.isEmpty() && rows.get(0);
    });
  }

  @Override
  public CompletionStage<Boolean> abort(Claim claim, boolean maySeen, long nowMillis) {
    return db.atomically(claim.machine() != null, c -> maySeen
            ? rejectClaim(c, claim, nowMillis)
            : deleteClaim(c, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts(), claim.machine(), claim.entityId(), nowMillis))
        .thenCompose(ok -> ok ? CompletableFuture.completedFuture(true) : abortedEarlier(claim, maySeen));
  }

  /**
   * Whether this very claim was aborted already: an abort whose COMMIT reached the server but whose
   * answer was lost (connection reset, failover, socket timeout) is run again, and the rerun finds
   * nothing PENDING. That is success, not a lost claim, or the rejection would never be escalated.
   * A rejected row keeps its owner and attempt, so a claim another owner took over and rejected
   * still answers false; a deleted row (the business never saw the record) leaves nothing that
   * another owner could hold. Costs a round trip only when the fenced statement matched nothing.
   */
  private CompletionStage<Boolean> abortedEarlier(Claim claim, boolean maySeen) {
    return db.autocommit(c -> {
      List<Boolean> rows = Db.query(c, "SELECT status, owner, attempts FROM " + ledger + " WHERE route = ? AND dedup_key = ?",
          r -> maySeen && "REJECTED".equals(r.getString(1)) && claim.owner().equals(r.getString(2)) && claim.attempts() == r.getInt(3),
          claim.route(), claim.dedupKey());
      return rows.isEmpty() ? !maySeen : rows.get(0);
    });
  }

  /**
   * Keeps the ledger row of exactly this claim as REJECTED (so a replay is claimed again flagged as
   * a redelivery) and puts the entity back where it was. Inside the caller's transaction.
   */
  private boolean rejectClaim(Connection c, Claim claim, long nowMillis) throws SQLException {
    long n = Db.update(c,
        "UPDATE " + ledger + " SET status = 'REJECTED', lease_until = NULL, completed_at = ?"
            + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
        nowMillis, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts());
    return n == 1 && restoreEntity(c, claim.machine(), claim.entityId(), claim.dedupKey(), nowMillis);
  }

  /**
   * Deletes the PENDING ledger row of exactly this claim (owner and attempt) and puts the entity
   * back where it was; false if the row is not that claim's any more. Inside the caller's
   * transaction.
   */
  private boolean deleteClaim(Connection c, String route, String dedupKey, String owner, int attempts, String machine,
      String entityId, long nowMillis) throws SQLException {
    long n = Db.update(c,
        "DELETE FROM " + ledger + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
        route, dedupKey, owner, attempts);
    return n == 1 && restoreEntity(c, machine, entityId, dedupKey, nowMillis);
  }

  private boolean restoreEntity(Connection c, String machine, String entityId, String dedupKey, long nowMillis) throws SQLException {
    if (machine == null) {
      return true;
    }
    // a creating event leaves no previous state: the entity row goes
    long deleted = Db.update(c,
        "DELETE FROM " + entity + " WHERE machine = ? AND entity_id = ? AND pending_key = ? AND prev_state IS NULL AND version = 1",
        machine, entityId, dedupKey);
    if (deleted != 1) {
      Db.update(c, "UPDATE " + entity + " SET state = prev_state, prev_state = NULL, version = version - 1,"
              + " pending_key = NULL, pending_until = NULL, updated_at = ?"
              + " WHERE machine = ? AND entity_id = ? AND pending_key = ?",
          nowMillis, machine, entityId, dedupKey);
    }
    return true;
  }

  // ------------------------------------------------------------------------- leases and owners

  @Override
  public CompletionStage<Boolean> renew(Claim claim, long leaseMillis) {
    return leases.renew(claim, leaseMillis);
  }

  @Override
  public CompletionStage<Void> heartbeat(String owner, long ttlMillis) {
    return leases.heartbeat(owner, ttlMillis);
  }

  @Override
  public CompletionStage<Void> retire(String owner) {
    return leases.retire(owner);
  }

  // -------------------------------------------------------------------------------- identity

  /**
   * The ledger's identity, which scopes the L1 keys ({@link RedisIdempotencyCache}): drawn once by
   * the migration (schema version 4), the same for every sidecar on this database, different for
   * any other database or this one created again. If the row is missing (an operator deleted it to
   * draw a new id, e.g. after restoring the database from a backup), a new one is drawn here. Fails
   * with the store if the schema predates the table.
   */
  public CompletionStage<String> ledgerId() {
    return db.autocommit(c -> {
      List<String> ids = Db.query(c, "SELECT ledger_id FROM " + ledgerIdTable + " WHERE one_row = 1", r -> r.getString(1));
      if (!ids.isEmpty()) {
        return ids.get(0);
      }
      // IGNORE: sidecars starting together draw one id, the first insert's
      Db.update(c, "INSERT IGNORE INTO " + ledgerIdTable + " (one_row, ledger_id, created_at) VALUES (1, " + Migrations.NEW_LEDGER_ID
          + ", " + NOW_MS + ")");
      return Db.query(c, "SELECT ledger_id FROM " + ledgerIdTable + " WHERE one_row = 1", r -> r.getString(1)).get(0);
    });
  }

  // ---------------------------------------------------------------------------------- operator

  /** See {@link AdminQueries#resetEntity}. Blocks; for the command line, not the pipeline. */
  public AdminQueries.ResetOutcome resetEntity(String machine, String entityId, String state, Verdict audit, long nowMillis,
      boolean releaseOrphan) {
    return admin.resetEntity(machine, entityId, state, audit, nowMillis, releaseOrphan);
  }

  // ------------------------------------------------------------------------ decisions/explain

  @Override
  public CompletionStage<Void> recordDecision(Verdict v, Source s, long nowMillis) {
    return decisions.record(v, s, nowMillis);
  }

  @Override
  public CompletionStage<Long> purgeDecisions(long beforeMillis) {
    return decisions.purge(beforeMillis);
  }

  @Override
  public CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit) {
    return admin.explain(route, machine, dedupKey, entityId, limit);
  }

  @Override
  public void close() {
    db.close();
  }
}
