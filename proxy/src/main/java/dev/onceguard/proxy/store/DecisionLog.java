package dev.onceguard.proxy.store;

import dev.onceguard.v1.Verdict;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * The decision log ({@code <prefix>decision}): every non-accepted verdict with its reason, for
 * {@code Explain} and {@code ttl-advice}, kept for {@code mysql.decision-retention}. Best effort:
 * entries ready together are one multi-row INSERT in autocommit, on one connection at most, so the
 * log never takes the claims' connections. Thread-safe; non-blocking.
 */
final class DecisionLog {
  private final Db db;
  private final String table;
  private final CommitGroups<Entry, Boolean> groups;

  /** One verdict to log; {@code source} is null for an operator's entry. */
  record Entry(Verdict verdict, Source source, long nowMillis) {}

  /** @param groupSize entries in one INSERT at most */
  DecisionLog(Db db, String table, int groupSize) {
    this.db = db;
    this.table = table;
    this.groups = new CommitGroups<>(1, groupSize, db.queueBound(), this::group, e -> false);
  }

  CompletionStage<Void> record(Verdict v, Source s, long nowMillis) {
    return groups.submit(new Entry(v, s, nowMillis)).thenApply(x -> null);
  }

  /** Entries waiting for their group, and refused at the queue's bound. */
  long queued() {
    return groups.queued();
  }

  long refused() {
    return groups.refused();
  }

  private CompletionStage<List<Boolean>> group(List<Entry> group) {
    List<Boolean> done = Collections.nCopies(group.size(), true);
    return db.autocommit(c -> {
      insert(c, group);
      return done;
    });
  }

  /** Writes {@code group} on {@code c}, inside the caller's transaction if it has one (an operator's reset). */
  void insert(Connection c, List<Entry> group) throws SQLException {
    StringBuilder sql = new StringBuilder("INSERT INTO ").append(table)
        .append(" (at_ms, route, dedup_key, entity_id, event, disposition, layer, reason, detail, current_state, current_version,"
            + " source_topic, source_partition, source_offset, original_age_ms) VALUES ");
    List<Object> args = new ArrayList<>(group.size() * 15);
    for (int i = 0; i < group.size(); i++) {
      Entry d = group.get(i);
      Verdict v = d.verdict();
      Source s = d.source();
      String detail = v.getDetail().length() > 1000 ? v.getDetail().substring(0, 999) + "…" : v.getDetail();
      sql.append(i == 0 ? "" : ", ").append("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      args.addAll(Arrays.asList(d.nowMillis(), v.getRoute(), emptyToNull(v.getDedupKey()), emptyToNull(v.getEntityId()),
          emptyToNull(v.getEvent()), v.getDisposition().name(), v.getLayer().name(), v.getReason().name(), detail,
          emptyToNull(v.getCurrentState()), v.getCurrentState().isEmpty() ? Db.NULL_LONG : v.getCurrentVersion(),
          s == null ? Db.NULL_STRING : s.topic(), s == null ? Db.NULL_INT : s.partition(),
          s == null ? Db.NULL_LONG : s.offset(), v.hasOriginalAgeMs() ? v.getOriginalAgeMs() : Db.NULL_LONG));
    }
    Db.update(c, sql.toString(), args.toArray());
  }

  /** Deletes entries older than {@code beforeMillis}, at most 10,000 per call; returns how many. */
  CompletionStage<Long> purge(long beforeMillis) {
    return db.autocommit(c -> Db.update(c, "DELETE FROM " + table + " WHERE at_ms < ? LIMIT 10000", beforeMillis));
  }

  private static Object emptyToNull(String s) {
    return s == null || s.isEmpty() ? Db.NULL_STRING : s;
  }
}
