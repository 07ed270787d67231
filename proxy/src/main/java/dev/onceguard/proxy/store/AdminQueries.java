package dev.onceguard.proxy.store;

import com.google.protobuf.ByteString;
import dev.onceguard.v1.Decision;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.EntityState;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.FieldDigest;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.LedgerEntry;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.StoredResponse;
import dev.onceguard.v1.Verdict;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * The admin side of the store: {@code Explain} (a key's or an entity's ledger rows, state and
 * recent decisions) and the operator's {@code reset-entity}. Reads and repairs, never on a record's
 * path. Thread-safe.
 */
public final class AdminQueries {
  private final Db db;
  private final String ledger;
  private final String entity;
  private final String decision;
  private final String owners;
  private final DecisionLog decisions;

  AdminQueries(Db db, String ledger, String entity, String decision, String owners, DecisionLog decisions) {
    this.db = db;
    this.ledger = ledger;
    this.entity = entity;
    this.decision = decision;
    this.owners = owners;
    this.decisions = decisions;
  }

  /** What {@link #resetEntity} did. */
  public sealed interface ResetOutcome {
    /**
     * The state was set; {@code previousState} is null if the entity did not exist;
     * {@code releasedClaim} is the dedup key of an orphaned claim that was released first, or null.
     */
    record Reset(String previousState, long previousVersion, long version, String releasedClaim) implements ResetOutcome {}

    /**
     * A transition is in flight on the entity: nothing was changed. {@code live}: its claim is held
     * by an owner that heartbeats and its lease runs (it finishes by itself); otherwise it is
     * orphaned and {@code releaseOrphan} would release it.
     */
    record Busy(String pendingKey, boolean live) implements ResetOutcome {}
  }

  /**
   * Sets an entity's state by hand (an operator's repair), unless a transition is in flight on it,
   * and appends {@code audit} to the decision log in the same transaction: the change and its record
   * commit together. The version moves on, so a claim computed against the old state cannot apply.
   * A missing entity is created in {@code state}.
   *
   * <p>With {@code releaseOrphan}, a transition in flight whose claim is not live (its lease ended,
   * or its owner stopped heartbeating: e.g. left behind by a route that was removed) is released
   * first: its ledger row is kept as REJECTED, so a later delivery of its key is flagged as a
   * redelivery. A live claim is never released. Blocks; for the command line, not the pipeline.
   */
  public ResetOutcome resetEntity(String machine, String entityId, String state, Verdict audit, long nowMillis, boolean releaseOrphan) {
    return db.blocking(c -> Db.transaction(c, x -> {
      List<EntityRow> rows = Db.query(x, "SELECT state, version, pending_key, NULL FROM " + entity
          + " WHERE machine = ? AND entity_id = ? FOR UPDATE", r -> new EntityRow(r.getString(1), r.getLong(2), r.getString(3), null),
          machine, entityId);
      String released = null;
      if (!rows.isEmpty() && rows.get(0).busy()) {
        String pendingKey = rows.get(0).pendingKey();
        List<LedgerRow> claims = Db.query(x, "SELECT " + MysqlGuardStore.LEDGER_ROW_COLUMNS + " FROM " + ledger + " l LEFT JOIN " + owners
            + " o ON o.owner = l.owner WHERE l.entity_id = ? AND l.dedup_key = ? AND l.status = 'PENDING' FOR UPDATE",
            MysqlGuardStore::ledgerRow, entityId, pendingKey);
        boolean live = claims.stream().anyMatch(LedgerRow::live);
        if (!releaseOrphan || live) {
          return new ResetOutcome.Busy(pendingKey, live);
        }
        for (LedgerRow l : claims) {
          Db.update(x, "UPDATE " + ledger + " SET status = 'REJECTED', lease_until = NULL, completed_at = ?"
              + " WHERE route = ? AND dedup_key = ? AND status = 'PENDING' AND owner <=> ? AND attempts = ?",
              nowMillis, l.route(), l.dedupKey(), l.owner(), l.attempts());
        }
        Db.update(x, "UPDATE " + entity + " SET pending_key = NULL, pending_until = NULL WHERE machine = ? AND entity_id = ?",
            machine, entityId);
        released = pendingKey;
      }
      ResetOutcome.Reset done;
      if (rows.isEmpty()) {
        Db.update(x, "INSERT INTO " + entity + " (machine, entity_id, state, prev_state, version, pending_key, pending_until, updated_at)"
            + " VALUES (?, ?, ?, NULL, 1, NULL, NULL, ?)", machine, entityId, state, nowMillis);
        done = new ResetOutcome.Reset(null, 0, 1, null);
      } else {
        EntityRow e = rows.get(0);
        Db.update(x, "UPDATE " + entity + " SET state = ?, prev_state = NULL, version = version + 1, updated_at = ?"
            + " WHERE machine = ? AND entity_id = ?", state, nowMillis, machine, entityId);
        done = new ResetOutcome.Reset(e.state(), e.version(), e.version() + 1, released);
      }
      Verdict v = audit.toBuilder().setCurrentState(state).setCurrentVersion(done.version())
          .setDetail(audit.getDetail() + (released == null ? "" : " (released the orphaned claim " + released + ")")).build();
      decisions.insert(x, List.of(new DecisionLog.Entry(v, null, nowMillis)));
      return done;
    }));
  }

  /** Ledger rows, entity and recent decisions for a dedup key or an entity. */
  public CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit) {
    int lim = limit <= 0 ? 50 : Math.min(limit, 1000);
    return db.autocommit(c -> {
      List<LedgerEntry> ls = dedupKey != null
          ? Db.query(c, "SELECT * FROM " + ledger + " WHERE route = ? AND dedup_key = ?", AdminQueries::ledgerEntry, route, dedupKey)
          : Db.query(c, "SELECT * FROM " + ledger + " WHERE route = ? AND entity_id = ? ORDER BY created_at LIMIT ?",
              AdminQueries::ledgerEntry, route, entityId, lim);
      String ent = entityId != null ? entityId : ls.isEmpty() ? null : emptyToNullString(ls.get(0).getEntityId());
      List<EntityState> es = machine == null || ent == null ? List.of()
          : Db.query(c, "SELECT machine, entity_id, state, version, pending_key, pending_until, updated_at FROM " + entity
                  + " WHERE machine = ? AND entity_id = ?",
              r -> {
                EntityState.Builder b = EntityState.newBuilder().setMachine(r.getString(1)).setEntityId(r.getString(2))
                    .setState(r.getString(3)).setVersion(r.getLong(4)).setUpdatedAtMs(r.getLong(7));
                if (r.getString(5) != null) {
                  b.setPendingKey(r.getString(5)).setPendingUntilMs(r.getLong(6));
                }
                return b.build();
              }, machine, ent);
      List<Decision> ds = dedupKey != null
          ? Db.query(c, "SELECT * FROM " + decision + " WHERE route = ? AND dedup_key = ? ORDER BY id DESC LIMIT ?",
              AdminQueries::decisionRow, route, dedupKey, lim)
          : Db.query(c, "SELECT * FROM " + decision + " WHERE entity_id = ? ORDER BY id DESC LIMIT ?",
              AdminQueries::decisionRow, entityId, lim);
      ExplainResponse.Builder b = ExplainResponse.newBuilder().addAllLedger(ls).addAllDecisions(ds);
      if (!es.isEmpty()) {
        b.setEntity(es.get(0));
      }
      return b.build();
    });
  }

  private static String emptyToNullString(String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  private static LedgerEntry ledgerEntry(ResultSet r) throws SQLException {
    LedgerEntry.Builder b = LedgerEntry.newBuilder()
        .setRoute(r.getString("route"))
        .setDedupKey(r.getString("dedup_key"))
        .setBusinessKey(r.getString("business_key"))
        .setFingerprint(r.getString("fingerprint"))
        .setStatus(r.getString("status"))
        .setAttempts(r.getInt("attempts"))
        .setSourceTopic(r.getString("source_topic"))
        .setSourcePartition(r.getInt("source_partition"))
        .setSourceOffset(r.getLong("source_offset"))
        .setCreatedAtMs(r.getLong("created_at"));
    setIf(r.getString("entity_id"), b::setEntityId);
    setIf(r.getString("event"), b::setEvent);
    setIf(r.getString("from_state"), b::setFromState);
    setIf(r.getString("to_state"), b::setToState);
    setIf(r.getString("owner"), b::setOwner);
    Long lease = Db.longOrNull(r, "lease_until");
    if (lease != null) {
      b.setLeaseUntilMs(lease);
    }
    Long done = Db.longOrNull(r, "completed_at");
    if (done != null) {
      b.setCompletedAtMs(done);
    }
    // what the row keeps of the applied record (store-payload) and of the caller's response
    dev.onceguard.proxy.extract.FieldDigests.decode(r.getBytes("field_digests")).digests()
        .forEach((pointer, digest) -> b.addFieldDigests(FieldDigest.newBuilder().setPointer(pointer).setDigest(digest)));
    byte[] payload = r.getBytes("payload");
    Long size = Db.longOrNull(r, "payload_size");
    if (payload != null) {
      b.setPayload(ByteString.copyFrom(payload));
    } else if (size != null) {
      b.setPayloadOmittedBytes(size.intValue());
    }
    byte[] response = r.getBytes("response");
    if (response != null) {
      String type = r.getString("response_type");
      b.setResponse(StoredResponse.newBuilder().setBody(ByteString.copyFrom(response)).setContentType(type == null ? "" : type));
    }
    return b.build();
  }

  private static Decision decisionRow(ResultSet r) throws SQLException {
    Verdict.Builder v = Verdict.newBuilder()
        .setRoute(r.getString("route"))
        .setDisposition(Disposition.valueOf(r.getString("disposition")))
        .setLayer(Layer.valueOf(r.getString("layer")))
        .setReason(Reason.valueOf(r.getString("reason")))
        .setDetail(r.getString("detail"));
    setIf(r.getString("dedup_key"), v::setDedupKey);
    setIf(r.getString("entity_id"), v::setEntityId);
    setIf(r.getString("event"), v::setEvent);
    setIf(r.getString("current_state"), v::setCurrentState);
    Long ver = Db.longOrNull(r, "current_version");
    if (ver != null) {
      v.setCurrentVersion(ver);
    }
    Long age = Db.longOrNull(r, "original_age_ms");
    if (age != null) {
      v.setOriginalAgeMs(age);
    }
    Decision.Builder d = Decision.newBuilder().setAtMs(r.getLong("at_ms")).setVerdict(v);
    setIf(r.getString("source_topic"), d::setSourceTopic);
    Integer part = Db.intOrNull(r, "source_partition");
    if (part != null) {
      d.setSourcePartition(part);
    }
    Long off = Db.longOrNull(r, "source_offset");
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

}
