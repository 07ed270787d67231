package dev.onceguard.proxy.store;

/**
 * One entity row as the store read it.
 *
 * @param pendingKey dedup key of the transition between claim and confirm, {@code null} if none
 * @param pendingOverdueMillis how long ago the pending transition's lease ended, by the database
 *     clock (negative while it runs); {@code null} if nothing is pending
 */
public record EntityRow(String state, long version, String pendingKey, Long pendingOverdueMillis) {

  public boolean busy() {
    return pendingKey != null;
  }

  public boolean pendingExpired() {
    return pendingOverdueMillis != null && pendingOverdueMillis > 0;
  }
}
