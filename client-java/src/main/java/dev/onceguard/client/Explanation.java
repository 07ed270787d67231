package dev.onceguard.client;

import java.util.List;
import java.util.Optional;

/**
 * What the sidecar knows about a dedup key or an entity: ledger rows, the entity's state, and
 * recent decisions (newest first). Immutable.
 */
public final class Explanation {
  private final List<LedgerEntry> ledger;
  private final EntityState entity;
  private final List<Decision> decisions;

  /**
   * Creates an explanation.
   *
   * @param ledger ledger rows
   * @param entity the entity, or {@code null} if it does not exist or the route has no machine
   * @param decisions recent decisions, newest first
   */
  public Explanation(List<LedgerEntry> ledger, EntityState entity, List<Decision> decisions) {
    this.ledger = List.copyOf(ledger);
    this.entity = entity;
    this.decisions = List.copyOf(decisions);
  }

  /** {@return ledger rows} */
  public List<LedgerEntry> ledger() {
    return ledger;
  }

  /** {@return the entity; empty if it does not exist or the route has no state machine} */
  public Optional<EntityState> entity() {
    return Optional.ofNullable(entity);
  }

  /** {@return recent decisions, newest first} */
  public List<Decision> decisions() {
    return decisions;
  }

  @Override
  public String toString() {
    return "Explanation{ledger=" + ledger + ", entity=" + entity + ", decisions=" + decisions + "}";
  }
}
