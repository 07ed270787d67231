package dev.onceguard.proxy.store;

import java.util.concurrent.CompletionStage;

/**
 * Leases and owners: a claim's lease renewed (ledger row and entity together, fenced on owner and
 * attempt), and each process's liveness row ({@code <prefix>owner}) heartbeated on the control
 * connection, which busy workers cannot delay. Every time is the database's
 * ({@link MysqlGuardStore#NOW_MS}). Thread-safe; non-blocking.
 */
final class Leases {
  private final Db db;
  private final String ledger;
  private final String entity;
  private final String owners;

  Leases(Db db, String ledger, String entity, String owners) {
    this.db = db;
    this.ledger = ledger;
    this.entity = entity;
    this.owners = owners;
  }

  /** Extends the lease to {@code leaseMillis} from the database's now; false if the claim is no longer this owner's. */
  CompletionStage<Boolean> renew(Claim claim, long leaseMillis) {
    return db.atomically(claim.machine() != null, c -> {
      long n = Db.update(c,
          "UPDATE " + ledger + " SET lease_until = " + MysqlGuardStore.NOW_MS + " + ?"
              + " WHERE route = ? AND dedup_key = ? AND owner = ? AND attempts = ? AND status = 'PENDING'",
          leaseMillis, claim.route(), claim.dedupKey(), claim.owner(), claim.attempts());
      if (n != 1) {
        return false;
      }
      if (claim.machine() != null) {
        Db.update(c, "UPDATE " + entity + " SET pending_until = " + MysqlGuardStore.NOW_MS
                + " + ? WHERE machine = ? AND entity_id = ? AND pending_key = ?",
            leaseMillis, claim.machine(), claim.entityId(), claim.dedupKey());
      }
      return true;
    });
  }

  /** {@code owner} is alive for {@code ttlMillis} more (database time). */
  CompletionStage<Void> heartbeat(String owner, long ttlMillis) {
    return db.control(c -> {
      Db.update(c,
          "INSERT INTO " + owners + " (owner, alive_until, started_at) VALUES (?, " + MysqlGuardStore.NOW_MS + " + ?, "
              + MysqlGuardStore.NOW_MS + ") ON DUPLICATE KEY UPDATE alive_until = VALUES(alive_until)",
          owner, ttlMillis);
      return null;
    });
  }

  /** {@code owner} is gone (graceful stop): its claims may be taken over at once. */
  CompletionStage<Void> retire(String owner) {
    // rows of owners gone for a day are purged on the way: nothing reads them any more
    return db.control(c -> {
      Db.update(c,
          "INSERT INTO " + owners + " (owner, alive_until, started_at) VALUES (?, " + MysqlGuardStore.NOW_MS + ", "
              + MysqlGuardStore.NOW_MS + ") ON DUPLICATE KEY UPDATE alive_until = VALUES(alive_until)", owner);
      Db.update(c, "DELETE FROM " + owners + " WHERE alive_until < " + MysqlGuardStore.NOW_MS + " - 86400000 LIMIT 1000");
      return null;
    });
  }
}
