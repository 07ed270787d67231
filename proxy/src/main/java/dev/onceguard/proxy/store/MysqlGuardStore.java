package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.guard.Claim;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Source;
import dev.onceguard.proxy.guard.StateMachine;
import dev.onceguard.proxy.guard.Verdicts;
import dev.onceguard.proxy.store.Db.DuplicateKeyException;
import dev.onceguard.v1.Decision;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.EntityState;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.LedgerEntry;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Readable;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;

/**
 * {@link GuardStore} on MySQL/MariaDB (InnoDB) through r2dbc-mysql.
 *
 * <p>Every statement on a claimed row is fenced on (owner, attempts): a takeover increments
 * {@code attempts}, so an earlier holder — another process, or an earlier attempt in this one —
 * can no longer renew, confirm or abort it.
 *
 * <p>Lock order is the same in every transaction — ledger row first, then entity row — so claim,
 * confirm and abort of the same key cannot deadlock each other. The state change is one CAS
 * {@code UPDATE … WHERE state IN (from) AND pending_key IS NULL}: read, check and write in one
 * statement, no {@code SELECT … FOR UPDATE}, no lock wait beyond the statement.
 *
 * <p>Round trips: an accepted record costs BEGIN, INSERT ledger, UPDATE entity, COMMIT to claim
 * and one two-table UPDATE (ledger DONE and entity released in one statement, autocommit) to
 * confirm; an exact replay that misses L1 costs BEGIN, INSERT (refused), ROLLBACK and one SELECT.
 * A route without a machine has one statement per step, run in autocommit: 1 + 1 for an accepted
 * record, INSERT (refused) + SELECT for a replay.
 */
public final class MysqlGuardStore implements GuardStore {
  private static final Logger log = LoggerFactory.getLogger(MysqlGuardStore.class);
  private static final int MAX_CLAIM_LOOPS = 5;
  /** An abandoned Guard API claim is undone this long after its lease ran out. */
  static final long EXPIRY_GRACE_MILLIS = 2_000;

  private final Db db;
  private final String ledger;
  private final String entity;
  private final String decision;

  public MysqlGuardStore(Db db, String tablePrefix) {
    this.db = db;
    this.ledger = tablePrefix + "ledger";
    this.entity = tablePrefix + "entity";
    this.decision = tablePrefix + "decision";
  }

  // ---------------------------------------------------------------------------------- claim

  @Override
  public CompletionStage<ClaimResult> claim(ClaimCommand cmd) {
    return claimLoop(cmd, 0).toFuture();
  }

  /** A conflict whose row vanished before it could be read (confirmed+purged, aborted) is retried. */
  private Mono<ClaimResult> claimLoop(ClaimCommand cmd, int loop) {
    return tryClaim(cmd)
        .onErrorResume(LedgerConflict.class, x -> onLedgerConflict(cmd))
        .onErrorResume(EntityConflict.class, x -> onEntityConflict(cmd))
        .flatMap(r -> {
          if (r == RETRY && loop < MAX_CLAIM_LOOPS) {
            return claimLoop(cmd, loop + 1);
          }
          if (r == RETRY) {
            return Mono.just(busy(cmd, "claim raced with other owners " + MAX_CLAIM_LOOPS + " times"));
          }
          return Mono.just(r);
        });
  }

  /** Sentinel: race lost in an unusual way, run the claim again. */
  private static final ClaimResult RETRY = new ClaimResult.Rejected(Verdict.getDefaultInstance());

  private static final class LedgerConflict extends Db.Signal {
    private static final long serialVersionUID = 1L;
  }

  private static final class EntityConflict extends Db.Signal {
    private static final long serialVersionUID = 1L;
  }

  private Mono<ClaimResult> tryClaim(ClaimCommand cmd) {
    ExtractedEvent e = cmd.extracted();
    EventConfig ev = cmd.event();
    long until = cmd.nowMillis() + cmd.leaseMillis();
    String knownFrom = ev != null && ev.from().size() == 1 ? ev.from().iterator().next() : null;
    // without a machine the claim is the INSERT alone
    return db.atomically(cmd.machine() != null, c -> Db.update(c,
                "INSERT INTO " + ledger + " (route, dedup_key, business_key, fingerprint, entity_id, event, from_state, to_state,"
                    + " status, owner, lease_until, attempts, source_topic, source_partition, source_offset, created_at)"
                    + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?, 1, ?, ?, ?, ?)",
                cmd.route(), e.dedupKey(), e.businessKey(), e.fingerprint(), nullable(e.entityId()), nullable(e.event()),
                nullable(knownFrom), ev == null ? Db.NULL_STRING : ev.to(), cmd.owner(), until,
                cmd.source().topic(), cmd.source().partition(), cmd.source().offset(), cmd.nowMillis())
            .onErrorMap(DuplicateKeyException.class, x -> new LedgerConflict())
            .then(Mono.defer(() -> cmd.machine() == null ? Mono.just(Step.NO_MACHINE) : applyCas(c, cmd, until)))
            .flatMap(step -> {
              if (step == Step.CAS_LOST) {
                return Mono.error(new EntityConflict());
              }
              if (step == Step.NEEDS_FROM) {
                return Db.query(c, "SELECT prev_state FROM " + entity + " WHERE machine = ? AND entity_id = ?",
                        r -> r.get(0, String.class), cmd.machine().name(), e.entityId())
                    .flatMap(rows -> Db.update(c, "UPDATE " + ledger + " SET from_state = ? WHERE route = ? AND dedup_key = ?",
                            rows.get(0), cmd.route(), e.dedupKey())
                        .thenReturn(accepted(cmd, rows.get(0), until, 1, false)));
              }
              return Mono.just(accepted(cmd, knownFrom, until, 1, false));
            }));
  }

  private enum Step {
    NO_MACHINE,
    APPLIED,
    NEEDS_FROM,
    CAS_LOST
  }

  private Mono<Step> applyCas(Connection c, ClaimCommand cmd, long until) {
    EventConfig ev = cmd.event();
    ExtractedEvent e = cmd.extracted();
    String machine = cmd.machine().name();
    if (ev.creating()) {
      return Db.update(c,
              "INSERT INTO " + entity + " (machine, entity_id, state, prev_state, version, pending_key, pending_until, updated_at)"
                  + " VALUES (?, ?, ?, NULL, 1, ?, ?, ?)",
              machine, e.entityId(), ev.to(), e.dedupKey(), until, cmd.nowMillis())
          .thenReturn(Step.APPLIED)
          .onErrorResume(DuplicateKeyException.class, x -> Mono.just(Step.CAS_LOST));
    }
    List<String> from = new ArrayList<>(ev.from());
    StringBuilder in = new StringBuilder();
    Object[] args = new Object[6 + from.size()];
    args[0] = ev.to();
    args[1] = e.dedupKey();
    args[2] = until;
    args[3] = cmd.nowMillis();
    args[4] = machine;
    args[5] = e.entityId();
    for (int i = 0; i < from.size(); i++) {
      in.append(i == 0 ? "?" : ", ?");
      args[6 + i] = from.get(i);
    }
    // prev_state = state is evaluated before state = ? (single-table UPDATE assigns left to right)
    return Db.update(c,
            "UPDATE " + entity + " SET prev_state = state, state = ?, version = version + 1, pending_key = ?, pending_until = ?, updated_at = ?"
                + " WHERE machine = ? AND entity_id = ? AND pending_key IS NULL AND state IN (" + in + ")",
            args)
        .map(n -> n == 1 ? (from.size() == 1 ? Step.APPLIED : Step.NEEDS_FROM) : Step.CAS_LOST);
  }

  private static ClaimResult accepted(ClaimCommand cmd, String from, long until, int attempts, boolean redelivery) {
    ExtractedEvent e = cmd.extracted();
    EventConfig ev = cmd.event();
    Claim claim = new Claim(cmd.route(), e.dedupKey(), e.businessKey(), e.fingerprint(), cmd.machine() == null ? null : cmd.machine().name(),
        e.entityId(), e.event(), from, ev == null ? null : ev.to(), cmd.owner(), until, attempts, redelivery, cmd.source());
    Verdict v = Verdicts.of(Verdicts.base(cmd.route(), e).addAllExpectedFromStates(ev == null ? List.of() : ev.from()),
        Disposition.ACCEPTED, cmd.machine() == null ? Layer.LEDGER : Layer.STATE_MACHINE, Reason.NONE,
        redelivery ? "claim taken over from an earlier owner (attempt " + attempts + ")" : "");
    return new ClaimResult.Accepted(claim, v);
  }

  private record LedgerRow(String fingerprint, String status, String owner, Long leaseUntil, String topic, int partition,
      long offset, String from, String to, int attempts) {}

  private Mono<ClaimResult> onLedgerConflict(ClaimCommand cmd) {
    ExtractedEvent e = cmd.extracted();
    return db.autocommit(c -> Db.query(c,
            "SELECT fingerprint, status, owner, lease_until, source_topic, source_partition, source_offset, from_state, to_state, attempts"
                + " FROM " + ledger + " WHERE route = ? AND dedup_key = ?",
            r -> new LedgerRow(r.get(0, String.class), r.get(1, String.class), r.get(2, String.class), r.get(3, Long.class),
                r.get(4, String.class), r.get(5, Integer.class), r.get(6, Long.class), r.get(7, String.class), r.get(8, String.class),
                r.get(9, Integer.class)),
            cmd.route(), e.dedupKey()))
        .flatMap(rows -> {
          if (rows.isEmpty()) {
            return Mono.just(RETRY);
          }
          LedgerRow row = rows.get(0);
          Verdict.Builder vb = Verdicts.base(cmd.route(), e).addAllExpectedFromStates(cmd.event() == null ? List.of() : cmd.event().from());
          if (!row.fingerprint().equals(e.fingerprint())) {
            return Mono.just(new ClaimResult.Rejected(Verdicts.escalate(vb, Layer.LEDGER, Reason.KEY_COLLISION,
                "dedup key already used by a record with different content (ledger row " + row.status() + " from "
                    + row.topic() + "/" + row.partition() + "@" + row.offset()
                    + "): the configured business key does not identify the record; add the missing field")));
          }
          if ("DONE".equals(row.status())) {
            return Mono.just(new ClaimResult.Rejected(Verdicts.duplicate(vb, Layer.LEDGER, Reason.LEDGER_HIT,
                "already confirmed from " + row.topic() + "/" + row.partition() + "@" + row.offset())));
          }
          boolean sameSource = row.topic().equals(cmd.source().topic()) && row.partition() == cmd.source().partition()
              && row.offset() == cmd.source().offset();
          boolean live = row.leaseUntil() != null && row.leaseUntil() > cmd.nowMillis();
          boolean ours = row.owner().equals(cmd.owner());
          if (ours && cmd.ownAttemptActive()) {
            // another attempt in this process still works on the key (its lease may even have
            // lapsed during a store outage): never run two at once; it finishes or gives it up
            long retryAt = sameSource && live ? row.leaseUntil() : cmd.nowMillis() + cmd.earlyArrivalRetryMillis();
            return Mono.just(new ClaimResult.Wait(sameSource ? ClaimResult.Wait.Kind.OWN_LEASE_LIVE : ClaimResult.Wait.Kind.ENTITY_BUSY,
                retryAt, Verdicts.escalate(vb, Layer.LEDGER, Reason.IN_FLIGHT, "dedup key still in flight in this process")));
          }
          if (live && !sameSource && row.partition() < 0 && cmd.source().partition() >= 0) {
            // held by a Guard API caller: unlike a Kafka owner, nothing redelivers its record if
            // the caller goes away, so this Kafka copy must not be ignored: wait for the lease
            return Mono.just(new ClaimResult.Wait(ClaimResult.Wait.Kind.OWN_LEASE_LIVE, row.leaseUntil(),
                Verdicts.escalate(vb, Layer.LEDGER, Reason.IN_FLIGHT, "dedup key claimed through the Guard API by " + row.owner())));
          }
          if (live && !sameSource) {
            return Mono.just(new ClaimResult.Rejected(Verdicts.duplicate(vb, Layer.LEDGER, Reason.IN_FLIGHT,
                "in flight from " + row.topic() + "/" + row.partition() + "@" + row.offset() + " (owner " + row.owner() + ")")));
          }
          if (live) {
            if (ours) {
              // our own earlier, abandoned attempt of this very record: nobody forwards it now
              return takeOver(cmd, row);
            }
            return Mono.just(new ClaimResult.Wait(ClaimResult.Wait.Kind.OWN_LEASE_LIVE, row.leaseUntil(),
                Verdicts.escalate(vb, Layer.LEDGER, Reason.IN_FLIGHT, "claim of this record by " + row.owner() + " did not expire")));
          }
          return takeOver(cmd, row);
        });
  }

  /** CAS on owner and lease: exactly one of several contenders takes an expired claim. */
  private Mono<ClaimResult> takeOver(ClaimCommand cmd, LedgerRow row) {
    ExtractedEvent e = cmd.extracted();
    long until = cmd.nowMillis() + cmd.leaseMillis();
    return db.atomically(cmd.machine() != null, c -> Db.update(c,
                "UPDATE " + ledger + " SET owner = ?, lease_until = ?, attempts = attempts + 1, source_topic = ?, source_partition = ?, source_offset = ?"
                    + " WHERE route = ? AND dedup_key = ? AND status = 'PENDING' AND owner = ? AND lease_until <=> ?",
                cmd.owner(), until, cmd.source().topic(), cmd.source().partition(), cmd.source().offset(),
                cmd.route(), e.dedupKey(), row.owner(), row.leaseUntil() == null ? Db.NULL_LONG : row.leaseUntil())
            .flatMap(n -> {
              if (n != 1) {
                return Mono.just(RETRY);
              }
              Mono<Long> ent = cmd.machine() == null ? Mono.just(0L)
                  : Db.update(c, "UPDATE " + entity + " SET pending_until = ? WHERE machine = ? AND entity_id = ? AND pending_key = ?",
                      until, cmd.machine().name(), e.entityId(), e.dedupKey());
              return ent.thenReturn(accepted(cmd, row.from(), until, row.attempts() + 1, true));
            }));
  }

  private record EntityRow(String state, long version, String pendingKey, Long pendingUntil) {}

  private Mono<ClaimResult> onEntityConflict(ClaimCommand cmd) {
    StateMachine m = cmd.machine();
    return db.autocommit(c -> Db.query(c,
            "SELECT state, version, pending_key, pending_until FROM " + entity + " WHERE machine = ? AND entity_id = ?",
            r -> new EntityRow(r.get(0, String.class), r.get(1, Long.class), r.get(2, String.class), r.get(3, Long.class)),
            m.name(), cmd.extracted().entityId()))
        .flatMap(rows -> {
          EntityRow row = rows.isEmpty() ? null : rows.get(0);
          if (row != null && row.pendingKey() != null && row.pendingUntil() != null && row.pendingUntil() < cmd.nowMillis()) {
            return expireAbandonedApiClaim(cmd, row).map(expired -> expired ? RETRY : classify(cmd, row));
          }
          return Mono.just(classify(cmd, row));
        });
  }

  private record PendingRow(String route, String owner, int attempts, Long leaseUntil, int partition) {}

  /**
   * The entity is held by a transition whose lease ran out. A Kafka record's claim is left alone:
   * Kafka redelivers that record (never committed past) and its next owner takes the claim over,
   * flagged as a redelivery, since the business may have applied it. A Guard API claim has nobody
   * to redeliver it: its caller either retries (and takes it over) or went away, and then the
   * claim must expire with its lease as the API promises, or the entity would stay busy forever.
   * So an expired API claim is undone (fenced on owner and attempt; API claims are never renewed)
   * and the claim retried.
   *
   * @return true if the claim was undone here
   */
  private Mono<Boolean> expireAbandonedApiClaim(ClaimCommand cmd, EntityRow row) {
    String machine = cmd.machine().name();
    String entityId = cmd.extracted().entityId();
    // The lookup runs in autocommit: records waiting on an expired Kafka claim repeat it every
    // early-arrival-retry until Kafka's redelivery takes the claim over, and need no transaction.
    // The undo is fenced on owner and attempt, so a row taken over or confirmed meanwhile is left.
    return db.autocommit(c -> Db.query(c,
            "SELECT route, owner, attempts, lease_until, source_partition FROM " + ledger
                + " WHERE entity_id = ? AND dedup_key = ? AND status = 'PENDING'",
            r -> new PendingRow(r.get(0, String.class), r.get(1, String.class), r.get(2, Integer.class), r.get(3, Long.class),
                r.get(4, Integer.class)),
            entityId, row.pendingKey()))
        .flatMap(found -> {
          // The entity's pending key always has its PENDING ledger row (claim, confirm and abort
          // write both together). Exactly one row: it is that claim. Several: the same dedup key
          // and entity id are pending in another machine's route too, and which row holds this
          // entity cannot be told: leave them. The grace covers clocks of other sidecars running
          // a little behind ours (the owner refuses a Complete from its lease on).
          if (found.size() != 1) {
            return Mono.just(false);
          }
          PendingRow p = found.get(0);
          if (p.partition() >= 0 || p.leaseUntil() == null || p.leaseUntil() + EXPIRY_GRACE_MILLIS >= cmd.nowMillis()) {
            return Mono.just(false);
          }
          return db.atomically(true, c -> undo(c, p.route(), row.pendingKey(), p.owner(), p.attempts(), machine, entityId,
                  cmd.nowMillis()))
              .doOnNext(done -> {
                if (done) {
                  log.warn("route {}: released an abandoned Guard API claim on entity {} (route {}, owner {}, lease expired {} ms ago)",
                      cmd.route(), entityId, p.route(), p.owner(), cmd.nowMillis() - p.leaseUntil());
                }
              });
        });
  }

  private ClaimResult classify(ClaimCommand cmd, EntityRow row) {
    ExtractedEvent e = cmd.extracted();
    StateMachine m = cmd.machine();
    EventConfig ev = cmd.event();
    Verdict.Builder vb = Verdicts.base(cmd.route(), e).addAllExpectedFromStates(ev.from());
    if (row != null) {
      vb.setCurrentState(row.state()).setCurrentVersion(row.version());
    }
    if (row == null && ev.creating()) {
      return RETRY; // the entity was deleted (creation aborted) between our INSERT and SELECT
    }
    boolean busy = row != null && row.pendingKey() != null;
    StateMachine.Classification cl = m.classify(ev, row == null ? null : row.state(), busy);
    long retryAt = cmd.nowMillis() + cmd.earlyArrivalRetryMillis();
    switch (cl) {
      case ALREADY_APPLIED:
        return new ClaimResult.Rejected(Verdicts.duplicate(vb, Layer.STATE_MACHINE, Reason.ALREADY_APPLIED,
            "entity is already in '" + row.state() + "' (version " + row.version() + "); '" + ev.name() + "' leads to '" + ev.to() + "'"));
      case EARLY_ARRIVAL: {
        String why = row == null ? "entity does not exist yet"
            : busy ? "entity has another transition pending (dedup key " + row.pendingKey()
                + (row.pendingUntil() != null && row.pendingUntil() < cmd.nowMillis()
                    ? ", its lease expired " + (cmd.nowMillis() - row.pendingUntil()) + " ms ago and nobody took it over: see Explain" : "")
                + ")"
            : "entity is in '" + row.state() + "', not yet in " + ev.from();
        Verdict timeout = Verdicts.escalate(vb.clone(), Layer.STATE_MACHINE, Reason.OUT_OF_ORDER,
            "'" + ev.name() + "' arrived early and the entity never reached " + ev.from() + ": " + why);
        return new ClaimResult.Wait(busy ? ClaimResult.Wait.Kind.ENTITY_BUSY : ClaimResult.Wait.Kind.EARLY_ARRIVAL, retryAt, timeout);
      }
      default:
        return new ClaimResult.Rejected(Verdicts.escalate(vb, Layer.STATE_MACHINE, Reason.ILLEGAL_TRANSITION,
            "'" + ev.name() + "' is not allowed from '" + row.state() + "' (allowed from " + ev.from() + ")"));
    }
  }

  private static ClaimResult busy(ClaimCommand cmd, String why) {
    Verdict v = Verdicts.escalate(Verdicts.base(cmd.route(), cmd.extracted()), Layer.LEDGER, Reason.IN_FLIGHT, why);
    return new ClaimResult.Wait(ClaimResult.Wait.Kind.ENTITY_BUSY, cmd.nowMillis() + cmd.earlyArrivalRetryMillis(), v);
  }

  private static Object nullable(String s) {
    return s == null ? Db.NULL_STRING : s;
  }

  // ---------------------------------------------------------------------------- confirm/abort

  @Override
  public CompletionStage<Boolean> confirm(Claim claim, long nowMillis) {
    // One statement, so autocommit is enough: the ledger row turns DONE and the entity's pending
    // transition is released together or not at all. The LEFT JOIN reads the ledger first, so
    // rows are locked in the usual order (ledger, then entity); the entity is only touched if it
    // still waits on this key.
    Mono<Boolean> done = claim.machine() == null
        ? db.autocommit(c -> Db.update(c,
            "UPDATE " + ledger + " SET status = 'DONE', completed_at = ?, lease_until = NULL"
                + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
            nowMillis, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts()).map(n -> n == 1))
        : db.autocommit(c -> Db.update(c,
            "UPDATE " + ledger + " l LEFT JOIN " + entity + " e ON e.machine = ? AND e.entity_id = ? AND e.pending_key = l.dedup_key"
                + " SET l.status = 'DONE', l.completed_at = ?, l.lease_until = NULL,"
                + " e.pending_key = NULL, e.pending_until = NULL, e.updated_at = ?"
                + " WHERE l.route = ? AND l.dedup_key = ? AND l.owner = ? AND l.attempts = ? AND l.status = 'PENDING'",
            claim.machine(), claim.entityId(), nowMillis, nowMillis, claim.route(), claim.dedupKey(), claim.owner(),
            claim.attempts()).map(n -> n >= 1));
    return done.flatMap(ok -> ok ? Mono.just(true) : confirmedEarlier(claim)).toFuture();
  }

  /**
   * Whether the claim is DONE under this owner already: a confirm whose COMMIT reached the server
   * but whose answer was lost (connection killed) is retried, and the retry finds nothing PENDING.
   * That is success, not a lost claim. DONE rows keep their owner, so a claim another owner took
   * over and confirmed still answers false. Costs a round trip only when the UPDATE matched nothing.
   */
  private Mono<Boolean> confirmedEarlier(Claim claim) {
    return db.autocommit(c -> Db.query(c, "SELECT status, owner, attempts FROM " + ledger + " WHERE route = ? AND dedup_key = ?",
            r -> "DONE".equals(r.get(0, String.class)) && claim.owner().equals(r.get(1, String.class))
                && claim.attempts() == r.get(2, Integer.class),
            claim.route(), claim.dedupKey()))
        .map(rows -> !rows.isEmpty() && rows.get(0));
  }

  @Override
  public CompletionStage<Boolean> abort(Claim claim, long nowMillis) {
    return db.atomically(claim.machine() != null, c -> undo(c, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts(),
            claim.machine(), claim.entityId(), nowMillis))
        .toFuture();
  }

  /**
   * Deletes the PENDING ledger row of exactly this claim (owner and attempt) and puts the entity
   * back where it was; false if the row is not that claim's any more. Inside the caller's
   * transaction.
   */
  private Mono<Boolean> undo(Connection c, String route, String dedupKey, String owner, int attempts, String machine,
      String entityId, long nowMillis) {
    return Db.update(c,
            "DELETE FROM " + ledger + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
            route, dedupKey, owner, attempts)
        .flatMap(n -> {
          if (n != 1) {
            return Mono.just(false);
          }
          if (machine == null) {
            return Mono.just(true);
          }
          // a creating event leaves no previous state: the entity row goes
          return Db.update(c, "DELETE FROM " + entity + " WHERE machine = ? AND entity_id = ? AND pending_key = ? AND prev_state IS NULL AND version = 1",
                  machine, entityId, dedupKey)
              .flatMap(d -> d == 1 ? Mono.just(true)
                  : Db.update(c, "UPDATE " + entity + " SET state = prev_state, prev_state = NULL, version = version - 1,"
                          + " pending_key = NULL, pending_until = NULL, updated_at = ?"
                          + " WHERE machine = ? AND entity_id = ? AND pending_key = ?",
                      nowMillis, machine, entityId, dedupKey).thenReturn(true));
        });
  }

  @Override
  public CompletionStage<Boolean> renew(Claim claim, long leaseUntilMillis) {
    return db.atomically(claim.machine() != null, c -> Db.update(c,
                "UPDATE " + ledger + " SET lease_until = ? WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
                leaseUntilMillis, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts())
            .flatMap(n -> n != 1 ? Mono.just(false)
                : claim.machine() == null ? Mono.just(true)
                : Db.update(c, "UPDATE " + entity + " SET pending_until = ? WHERE machine = ? AND entity_id = ? AND pending_key = ?",
                    leaseUntilMillis, claim.machine(), claim.entityId(), claim.dedupKey()).thenReturn(true)))
        .toFuture();
  }

  // ------------------------------------------------------------------------ decisions/explain

  @Override
  public CompletionStage<Void> recordDecision(Verdict v, Source s, long nowMillis) {
    String detail = v.getDetail().length() > 1000 ? v.getDetail().substring(0, 999) + "…" : v.getDetail();
    return db.autocommit(c -> Db.update(c,
            "INSERT INTO " + decision + " (at_ms, route, dedup_key, entity_id, event, disposition, layer, reason, detail,"
                + " current_state, current_version, source_topic, source_partition, source_offset)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            nowMillis, v.getRoute(), emptyToNull(v.getDedupKey()), emptyToNull(v.getEntityId()), emptyToNull(v.getEvent()),
            v.getDisposition().name(), v.getLayer().name(), v.getReason().name(), detail, emptyToNull(v.getCurrentState()),
            v.getCurrentState().isEmpty() ? Db.NULL_LONG : v.getCurrentVersion(),
            s == null ? Db.NULL_STRING : s.topic(), s == null ? new Db.Null(Integer.class) : s.partition(),
            s == null ? Db.NULL_LONG : s.offset()))
        .then()
        .toFuture();
  }

  @Override
  public CompletionStage<Long> purgeDecisions(long beforeMillis) {
    return db.autocommit(c -> Db.update(c, "DELETE FROM " + decision + " WHERE at_ms < ? LIMIT 10000", beforeMillis)).toFuture();
  }

  private static Object emptyToNull(String s) {
    return s == null || s.isEmpty() ? Db.NULL_STRING : s;
  }

  @Override
  public CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit) {
    int lim = limit <= 0 ? 50 : Math.min(limit, 1000);
    return db.autocommit(c -> {
          Mono<List<LedgerEntry>> rows = dedupKey != null
              ? Db.query(c, "SELECT * FROM " + ledger + " WHERE route = ? AND dedup_key = ?", MysqlGuardStore::ledgerEntry, route, dedupKey)
              : Db.query(c, "SELECT * FROM " + ledger + " WHERE route = ? AND entity_id = ? ORDER BY created_at LIMIT ?",
                  MysqlGuardStore::ledgerEntry, route, entityId, lim);
          return rows.flatMap(ls -> {
            String ent = entityId != null ? entityId : ls.isEmpty() ? null : emptyToNullString(ls.get(0).getEntityId());
            Mono<List<EntityState>> es = machine == null || ent == null ? Mono.just(List.of())
                : Db.query(c, "SELECT machine, entity_id, state, version, pending_key, pending_until, updated_at FROM " + entity
                        + " WHERE machine = ? AND entity_id = ?",
                    r -> {
                      EntityState.Builder b = EntityState.newBuilder().setMachine(r.get(0, String.class)).setEntityId(r.get(1, String.class))
                          .setState(r.get(2, String.class)).setVersion(r.get(3, Long.class)).setUpdatedAtMs(r.get(6, Long.class));
                      if (r.get(4, String.class) != null) {
                        b.setPendingKey(r.get(4, String.class)).setPendingUntilMs(r.get(5, Long.class));
                      }
                      return b.build();
                    }, machine, ent);
            Mono<List<Decision>> ds = dedupKey != null
                ? Db.query(c, "SELECT * FROM " + decision + " WHERE route = ? AND dedup_key = ? ORDER BY id DESC LIMIT ?", MysqlGuardStore::decisionRow, route, dedupKey, lim)
                : Db.query(c, "SELECT * FROM " + decision + " WHERE entity_id = ? ORDER BY id DESC LIMIT ?", MysqlGuardStore::decisionRow, entityId, lim);
            return es.zipWith(ds, (e, d) -> {
              ExplainResponse.Builder b = ExplainResponse.newBuilder().addAllLedger(ls).addAllDecisions(d);
              if (!e.isEmpty()) {
                b.setEntity(e.get(0));
              }
              return b.build();
            });
          });
        })
        .toFuture();
  }

  private static String emptyToNullString(String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  private static LedgerEntry ledgerEntry(Readable r) {
    LedgerEntry.Builder b = LedgerEntry.newBuilder()
        .setRoute(r.get("route", String.class))
        .setDedupKey(r.get("dedup_key", String.class))
        .setBusinessKey(r.get("business_key", String.class))
        .setFingerprint(r.get("fingerprint", String.class))
        .setStatus(r.get("status", String.class))
        .setAttempts(r.get("attempts", Integer.class))
        .setSourceTopic(r.get("source_topic", String.class))
        .setSourcePartition(r.get("source_partition", Integer.class))
        .setSourceOffset(r.get("source_offset", Long.class))
        .setCreatedAtMs(r.get("created_at", Long.class));
    setIf(r.get("entity_id", String.class), b::setEntityId);
    setIf(r.get("event", String.class), b::setEvent);
    setIf(r.get("from_state", String.class), b::setFromState);
    setIf(r.get("to_state", String.class), b::setToState);
    setIf(r.get("owner", String.class), b::setOwner);
    Long lease = r.get("lease_until", Long.class);
    if (lease != null) {
      b.setLeaseUntilMs(lease);
    }
    Long done = r.get("completed_at", Long.class);
    if (done != null) {
      b.setCompletedAtMs(done);
    }
    return b.build();
  }

  private static Decision decisionRow(Readable r) {
    Verdict.Builder v = Verdict.newBuilder()
        .setRoute(r.get("route", String.class))
        .setDisposition(Disposition.valueOf(r.get("disposition", String.class)))
        .setLayer(Layer.valueOf(r.get("layer", String.class)))
        .setReason(Reason.valueOf(r.get("reason", String.class)))
        .setDetail(r.get("detail", String.class));
    setIf(r.get("dedup_key", String.class), v::setDedupKey);
    setIf(r.get("entity_id", String.class), v::setEntityId);
    setIf(r.get("event", String.class), v::setEvent);
    setIf(r.get("current_state", String.class), v::setCurrentState);
    Long ver = r.get("current_version", Long.class);
    if (ver != null) {
      v.setCurrentVersion(ver);
    }
    Decision.Builder d = Decision.newBuilder().setAtMs(r.get("at_ms", Long.class)).setVerdict(v);
    setIf(r.get("source_topic", String.class), d::setSourceTopic);
    Integer part = r.get("source_partition", Integer.class);
    if (part != null) {
      d.setSourcePartition(part);
    }
    Long off = r.get("source_offset", Long.class);
    if (off != null) {
      d.setSourceOffset(off);
    }
    return d.build();
  }

  private static void setIf(String v, java.util.function.Consumer<String> setter) {
    if (v != null) {
      setter.accept(v);
    }
  }

  @Override
  public void close() {
    db.close();
  }
}
