package dev.onceguard.proxy.store;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Explicit, versioned schema migration. Each version is a list of statements applied once, in
 * order, recorded in {@code <prefix>schema_version}. Instances starting together serialise on a
 * named MySQL lock, so exactly one applies each version.
 *
 * <p>Table names come from the validated prefix (letters, digits, underscore); no value is ever
 * concatenated into SQL.
 */
public final class Migrations {
  private static final Logger log = LoggerFactory.getLogger(Migrations.class);

  private final Db db;
  private final String p;

  public Migrations(Db db, String tablePrefix) {
    this.db = db;
    this.p = tablePrefix;
  }

  /** The schema, one entry per version. Never edit a released entry: append a new one. */
  List<List<String>> versions() {
    return List.of(
        List.of(
            "CREATE TABLE IF NOT EXISTS " + p + "entity ("
                + " machine VARCHAR(64) NOT NULL,"
                + " entity_id VARCHAR(255) NOT NULL,"
                + " state VARCHAR(64) NOT NULL,"
                // the state before the pending transition, so that an abort can restore it
                + " prev_state VARCHAR(64) NULL,"
                + " version BIGINT NOT NULL,"
                + " pending_key CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,"
                + " pending_until BIGINT NULL,"
                + " updated_at BIGINT NOT NULL,"
                + " PRIMARY KEY (machine, entity_id)"
                + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
            "CREATE TABLE IF NOT EXISTS " + p + "ledger ("
                + " route VARCHAR(64) NOT NULL,"
                + " dedup_key CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,"
                + " business_key TEXT NOT NULL,"
                + " fingerprint CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,"
                + " entity_id VARCHAR(255) NULL,"
                + " event VARCHAR(64) NULL,"
                + " from_state VARCHAR(64) NULL,"
                + " to_state VARCHAR(64) NULL,"
                + " status VARCHAR(8) CHARACTER SET ascii NOT NULL,"
                + " owner VARCHAR(160) NULL,"
                + " lease_until BIGINT NULL,"
                + " attempts INT NOT NULL,"
                + " source_topic VARCHAR(249) NOT NULL,"
                + " source_partition INT NOT NULL,"
                + " source_offset BIGINT NOT NULL,"
                + " created_at BIGINT NOT NULL,"
                + " completed_at BIGINT NULL,"
                // the design's UNIQUE(route, dedup_key), as the clustered primary key
                + " PRIMARY KEY (route, dedup_key),"
                + " KEY " + p + "ledger_entity (entity_id(64)),"
                + " KEY " + p + "ledger_done (status, completed_at)"
                + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
            "CREATE TABLE IF NOT EXISTS " + p + "decision ("
                + " id BIGINT NOT NULL AUTO_INCREMENT,"
                + " at_ms BIGINT NOT NULL,"
                + " route VARCHAR(64) NOT NULL,"
                + " dedup_key CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,"
                + " entity_id VARCHAR(255) NULL,"
                + " event VARCHAR(64) NULL,"
                + " disposition VARCHAR(32) CHARACTER SET ascii NOT NULL,"
                + " layer VARCHAR(16) CHARACTER SET ascii NOT NULL,"
                + " reason VARCHAR(32) CHARACTER SET ascii NOT NULL,"
                + " detail VARCHAR(1000) NOT NULL,"
                + " current_state VARCHAR(64) NULL,"
                + " current_version BIGINT NULL,"
                + " source_topic VARCHAR(249) NULL,"
                + " source_partition INT NULL,"
                + " source_offset BIGINT NULL,"
                + " PRIMARY KEY (id),"
                + " KEY " + p + "decision_key (route, dedup_key),"
                + " KEY " + p + "decision_entity (entity_id(64)),"
                + " KEY " + p + "decision_at (at_ms)"
                + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"),
        List.of(
            // one row per process run, heartbeated: a claim whose owner stopped heartbeating is
            // taken over without waiting for the claim's lease
            "CREATE TABLE IF NOT EXISTS " + p + "owner ("
                + " owner VARCHAR(160) NOT NULL,"
                + " alive_until BIGINT NOT NULL,"
                + " started_at BIGINT NOT NULL,"
                + " PRIMARY KEY (owner)"
                + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
            // a rejected record's row is kept (status REJECTED) so that its replay is flagged; the
            // applied-row lookup after a lost CAS reads rows by entity and event
            "ALTER TABLE " + p + "ledger ADD KEY " + p + "ledger_entity_event (entity_id(64), event), DROP KEY " + p + "ledger_entity"),
        List.of(
            // a duplicate's time since its original was confirmed: what `ttl-advice --from-db` reads.
            // One statement, so that a migration cut off midway can simply run again.
            "ALTER TABLE " + p + "decision ADD COLUMN original_age_ms BIGINT NULL, ADD KEY " + p + "decision_route_at (route, at_ms)"),
        List.of(
            // The ledger's identity: a random id, drawn once here, that scopes the Redis L1 keys
            // (RedisIdempotencyCache), so that L1 only answers for facts of this ledger. Sidecars
            // on this database share it; another database, or this one created again, draws its
            // own. Both statements can run again (IF NOT EXISTS, IGNORE keeps the first id).
            "CREATE TABLE IF NOT EXISTS " + p + "ledger_id ("
                + " one_row TINYINT NOT NULL,"
                + " ledger_id CHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,"
                + " created_at BIGINT NOT NULL,"
                + " PRIMARY KEY (one_row)"
                + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
            "INSERT IGNORE INTO " + p + "ledger_id (one_row, ledger_id, created_at)"
                + " VALUES (1, " + NEW_LEDGER_ID + ", " + MysqlGuardStore.NOW_MS + ")"),
        List.of(
            // claims taken over from the owner while it was dead: the takeover writes the owner row
            // it judged dead, so that on Galera a heartbeat certified meanwhile on another node
            // conflicts with it (MysqlGuardStore.takeOverPending)
            "ALTER TABLE " + p + "owner ADD COLUMN taken_over BIGINT NOT NULL DEFAULT 0"),
        List.of(
            // What a row keeps beside its keys: the response a Guard API Complete stored with it
            // (returned to later Submits of the same fact), the per-field digest map that names the
            // fields a KEY_COLLISION or CONFLICTING_FACT differs in, and, where a route opts in,
            // the record's value. One ALTER, so the ledger is rebuilt once and a migration cut off
            // midway runs again whole.
            "ALTER TABLE " + p + "ledger ADD COLUMN response MEDIUMBLOB NULL, ADD COLUMN response_type VARCHAR(255) NULL,"
                + " ADD COLUMN field_digests BLOB NULL, ADD COLUMN payload MEDIUMBLOB NULL, ADD COLUMN payload_size INT NULL"));
  }

  /**
   * SQL for a new ledger id: 16 hex digits (64 bits) of a digest of a UUID and a random number,
   * drawn by the server (no value of the caller's in the SQL).
   */
  public static final String NEW_LEDGER_ID = "LEFT(SHA2(CONCAT(UUID(), '/', RAND()), 256), 16)";

  /**
   * For a sidecar that does not migrate: fails unless the database is at the schema version this
   * sidecar uses (its statements need every table and column of it). Blocks.
   */
  public void requireCurrent() {
    int current = db.blocking(c -> {
      List<Integer> v = Db.query(c, "SELECT COALESCE(MAX(version), 0) FROM " + p + "schema_version", r -> r.getInt(1));
      return v.isEmpty() ? 0 : v.get(0);
    });
    if (current < versions().size()) {
      throw new IllegalStateException("database schema version " + current + " (table prefix '" + p + "') is older than this sidecar"
          + " needs (" + versions().size() + "); run the migration: `onceguard.jar migrate --config FILE`, or mysql.migrate-on-start");
    }
  }

  /** Applies missing versions; returns the schema version afterwards. Blocks. */
  public int migrate() {
    return db.blocking(c -> {
      // no socket timeout while migrating: the lock waits up to 60 s, and an ALTER of a large
      // table takes as long as it takes; cut off midway, it would leave a version half applied
      int timeout = c.getNetworkTimeout();
      c.setNetworkTimeout(Runnable::run, 0);
      try {
        return lockedAndMigrated(c);
      } finally {
        c.setNetworkTimeout(Runnable::run, timeout);
      }
    });
  }

  private int lockedAndMigrated(Connection c) throws SQLException {
    String lock = "onceguard-migrate-" + p;
    List<Long> got = Db.query(c, "SELECT GET_LOCK(?, 60)", r -> Db.longOrNull(r, 1), lock);
    if (got.isEmpty() || got.get(0) == null || got.get(0) != 1L) {
      throw new IllegalStateException("could not take the migration lock '" + lock + "' within 60s");
    }
    try {
      return lockedMigrate(c);
    } finally {
      Db.query(c, "SELECT RELEASE_LOCK(?)", r -> Db.longOrNull(r, 1), lock);
    }
  }

  private int lockedMigrate(Connection c) throws SQLException {
    Db.exec(c, "CREATE TABLE IF NOT EXISTS " + p + "schema_version (version INT NOT NULL PRIMARY KEY, applied_at BIGINT NOT NULL) ENGINE=InnoDB");
    int current = Db.query(c, "SELECT COALESCE(MAX(version), 0) FROM " + p + "schema_version", r -> r.getInt(1)).get(0);
    List<List<String>> all = versions();
    if (current > all.size()) {
      throw new IllegalStateException("database schema version " + current + " is newer than this sidecar knows (" + all.size()
          + "); upgrade the sidecar");
    }
    for (int v = current + 1; v <= all.size(); v++) {
      for (String sql : all.get(v - 1)) {
        Db.exec(c, sql);
      }
      Db.update(c, "INSERT INTO " + p + "schema_version (version, applied_at) VALUES (?, ?)", v, System.currentTimeMillis());
      log.info("applied schema version {} (table prefix '{}')", v, p);
    }
    return all.size();
  }
}
