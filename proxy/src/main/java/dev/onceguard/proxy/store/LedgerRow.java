package dev.onceguard.proxy.store;

/**
 * One ledger row as the store read it, with its liveness judged by the database clock in the same
 * statement (never by the reader's clock).
 *
 * @param status {@code PENDING}, {@code DONE} or {@code REJECTED}
 * @param leaseUntil the stored lease end (database time), {@code null} once finished; the takeover
 *     is fenced on it
 * @param leaseLeftMillis lease end minus the database's now; {@code null} if there is no lease
 * @param ownerLeftMillis the owner's heartbeat expiry minus the database's now; {@code null} if the
 *     owner has no heartbeat row (it never heartbeats, or the row was purged): then only the lease counts
 * @param originalAtMillis when the row was confirmed, or claimed if it is not (the claiming
 *     sidecar's clock); {@code null} if not read. A duplicate's age is measured from it.
 * @param fieldDigests the row's per-field digest map ({@code dev.onceguard.proxy.extract.FieldDigests}
 *     stored form); {@code null} if it keeps none. Read to name the fields a conflict differs in
 */
public record LedgerRow(
    String route,
    String dedupKey,
    String businessKey,
    String fingerprint,
    String status,
    String owner,
    Long leaseUntil,
    String sourceTopic,
    int sourcePartition,
    long sourceOffset,
    String fromState,
    String toState,
    int attempts,
    Long leaseLeftMillis,
    Long ownerLeftMillis,
    Long originalAtMillis,
    byte[] fieldDigests) {

  /** A row read without its digest map. */
  public LedgerRow(String route, String dedupKey, String businessKey, String fingerprint, String status, String owner, Long leaseUntil,
      String sourceTopic, int sourcePartition, long sourceOffset, String fromState, String toState, int attempts, Long leaseLeftMillis,
      Long ownerLeftMillis, Long originalAtMillis) {
    this(route, dedupKey, businessKey, fingerprint, status, owner, leaseUntil, sourceTopic, sourcePartition, sourceOffset, fromState,
        toState, attempts, leaseLeftMillis, ownerLeftMillis, originalAtMillis, null);
  }

  public boolean done() {
    return "DONE".equals(status);
  }

  public boolean rejected() {
    return "REJECTED".equals(status);
  }

  /** The owner stopped heartbeating: its claims may be taken over before their lease ends. */
  public boolean ownerDead() {
    return ownerLeftMillis != null && ownerLeftMillis <= 0;
  }

  /** A PENDING claim whose lease runs and whose owner is alive. */
  public boolean live() {
    return leaseLeftMillis != null && leaseLeftMillis > 0 && !ownerDead();
  }

  /** Claimed through the Guard API (no Kafka record behind it, so nobody redelivers it). */
  public boolean apiClaim() {
    return sourcePartition < 0;
  }

  /** Milliseconds until the claim stops being live, by the database clock (0 if it is not live). */
  public long millisUntilNotLive() {
    if (!live()) {
      return 0;
    }
    return ownerLeftMillis == null ? leaseLeftMillis : Math.min(leaseLeftMillis, ownerLeftMillis);
  }

  public String source() {
    return sourceTopic + "/" + sourcePartition + "@" + sourceOffset;
  }

  /** Whether the row was claimed for the record at {@code s} (same topic, partition and offset). */
  public boolean claimedFor(Source s) {
    return sourceTopic.equals(s.topic()) && sourcePartition == s.partition() && sourceOffset == s.offset();
  }
}
