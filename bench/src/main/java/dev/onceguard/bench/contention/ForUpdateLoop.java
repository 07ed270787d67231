package dev.onceguard.bench.contention;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Transitions the way a consumer with a {@code SELECT … FOR UPDATE} state machine makes them, on
 * one connection in autocommit=0 (BEGIN is implicit, no round trip): lock and read the row, check
 * the state, make the business call with the lock held, write the row, COMMIT. Three round trips;
 * the lock is held from the SELECT until the COMMIT reaches the server. Owns the connection.
 */
final class ForUpdateLoop implements Transitions {
  static final String TABLE = "fu_entity";

  private final Connection c;
  private final int entities;
  private final int holdMs;

  ForUpdateLoop(Connection c, int entities, int holdMs) {
    this.c = c;
    this.entities = entities;
    this.holdMs = holdMs;
  }

  /** The table and its {@code entities} rows, all in the machine's one state. */
  static void createTable(Connection admin, String database, int entities) throws SQLException {
    try (Statement s = admin.createStatement()) {
      s.execute("CREATE TABLE " + database + "." + TABLE + " (entity_id VARCHAR(64) NOT NULL PRIMARY KEY,"
          + " state VARCHAR(32) NOT NULL, version BIGINT NOT NULL, updated_at BIGINT NOT NULL) ENGINE=InnoDB");
    }
    try (PreparedStatement ins = admin.prepareStatement("INSERT INTO " + database + "." + TABLE + " VALUES (?, ?, 0, 0)")) {
      for (int i = 0; i < entities; i++) {
        ins.setString(1, ClaimSide.entityId(i));
        ins.setString(2, ClaimSide.STATE);
        ins.addBatch();
      }
      ins.executeBatch();
    }
  }

  @Override
  public Samples run(Recorder rec) throws SQLException, InterruptedException {
    c.setAutoCommit(false);
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    try (PreparedStatement sel = c.prepareStatement("SELECT state, version FROM " + TABLE + " WHERE entity_id = ? FOR UPDATE");
        PreparedStatement upd = c.prepareStatement("UPDATE " + TABLE + " SET state = ?, version = ?, updated_at = ? WHERE entity_id = ?")) {
      while (true) {
        long t0 = System.nanoTime();
        if (!rec.open(t0)) {
          return rec.samples();
        }
        String id = ClaimSide.entityId(rnd.nextInt(entities));
        sel.setString(1, id);
        long version;
        try (ResultSet rs = sel.executeQuery()) {
          if (!rs.next()) {
            throw new IllegalStateException("entity " + id + " missing");
          }
          if (!ClaimSide.STATE.equals(rs.getString(1))) { // the machine's check, in the client
            throw new IllegalStateException("entity " + id + " in state " + rs.getString(1));
          }
          version = rs.getLong(2);
        }
        long locked = System.nanoTime();
        ClaimSide.businessCall(holdMs);
        upd.setString(1, ClaimSide.STATE);
        upd.setLong(2, version + 1);
        upd.setLong(3, System.currentTimeMillis());
        upd.setString(4, id);
        if (upd.executeUpdate() != 1) {
          throw new IllegalStateException("entity " + id + " not updated under its lock");
        }
        c.commit();
        rec.add(t0, System.nanoTime() - t0, locked - t0, false);
      }
    }
  }

  @Override
  public void close() throws SQLException {
    c.close();
  }
}
