package dev.onceguard.bench.contention;

/** The two ways of making one state transition that the contention bench compares. */
enum Variant {
  /**
   * {@code SELECT … FOR UPDATE}, the business call with the row lock held, {@code UPDATE},
   * {@code COMMIT}: the lock is held from the SELECT until the COMMIT reaches the server.
   */
  FOR_UPDATE,
  /**
   * OnceGuard's claim (ledger INSERT and the entity's CAS in one transaction), the business call
   * outside any lock, then the confirm: the sidecar's own {@code Guard} and MySQL store.
   */
  CLAIM
}
