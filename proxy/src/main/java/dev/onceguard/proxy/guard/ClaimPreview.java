package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.List;
import org.apache.kafka.common.header.Headers;

/**
 * What the guard would do with a record if it were consumed now, without claiming anything: the
 * route's extraction, then the ledger row of its key and the entity's state as they are, judged by
 * the same {@link ClaimPolicy} the pipeline uses. For {@code redrive --dry-run} (and for the
 * redrive's own skip of records that could only come back as duplicates).
 *
 * <p>A preview is a forecast, not a claim: another record may change the ledger or the entity
 * before the previewed one is consumed, and each record is judged against the state as it is, not
 * as the records previewed before it would leave it. L1 is not consulted: it only answers for
 * keys the ledger holds as DONE, which the preview reads. Blocking (through {@link Facts});
 * thread-safe if {@link Facts} is.
 */
public final class ClaimPreview {

  /** The class of outcome, as an operator deciding whether to redrive needs it. */
  public enum Outcome {
    /** Claimed and forwarded to the business. */
    APPLY,
    /** Ignored as a replay of a fact already applied (LEDGER_HIT, ALREADY_APPLIED, or this very record's replay). */
    DUPLICATE,
    /** Escalated again as a distinct fact under a used key or on an entity that holds another (KEY_COLLISION, CONFLICTING_FACT). */
    CONFLICT,
    /** Escalated again by the state machine (ILLEGAL_TRANSITION). */
    REFUSED,
    /** Not decidable yet: an early arrival or a busy entity; escalated OUT_OF_ORDER if its predecessor never comes. */
    WAIT,
    /** Rejected before the ledger: the extraction fails again (MALFORMED, MISSING_FIELD, UNKNOWN_EVENT). */
    INVALID
  }

  /**
   * @param reason the verdict's reason ({@code NONE} for {@link Outcome#APPLY})
   * @param redelivery an APPLY that the business would receive flagged {@code redelivery} (it saw
   *     the key before: a rejected record, or an abandoned claim)
   */
  public record Preview(Outcome outcome, Reason reason, String detail, boolean redelivery) {}

  /** The store's read-only facts a claim would meet. Blocking. */
  public interface Facts {
    /** The ledger row of the key, or {@code null}. */
    LedgerRow ledgerRow(String route, String dedupKey);

    /** The entity's row, or {@code null} if it does not exist. */
    EntityRow entity(String machine, String entityId);

    /** As {@link dev.onceguard.proxy.store.GuardStore#appliedRows}. */
    List<LedgerRow> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit);
  }

  private static final String OWNER = "onceguard-preview";
  private static final int APPLIED_ROWS = 10;

  private final RouteConfig route;
  private final Extractor extractor;
  private final StateMachine machine;
  private final List<String> machineRoutes;
  private final Facts facts;

  /**
   * @param machine the route's machine, {@code null} without one
   * @param machineRoutes the names of every route of that machine (the ledger rows that may have applied one of its transitions)
   */
  public ClaimPreview(RouteConfig route, MachineConfig machine, List<String> machineRoutes, Facts facts) {
    this.route = route;
    this.extractor = new Extractor(route, machine);
    this.machine = machine == null ? null : new StateMachine(machine);
    this.machineRoutes = List.copyOf(machineRoutes);
    this.facts = facts;
  }

  /**
   * What the guard would answer for a new record with this key, value and headers on {@code topic}
   * (a new record: never the source of an existing claim).
   */
  public Preview preview(String topic, byte[] key, byte[] value, Headers headers, long nowMillis) {
    Extraction x = extractor.extract(key, value, headers);
    if (x instanceof Extraction.Failed f) {
      return new Preview(Outcome.INVALID, f.reason(), f.detail(), false);
    }
    return preview(((Extraction.Ok) x).event(), topic, nowMillis);
  }

  /** The same for a record the route's extraction has read already as {@code e}. */
  public Preview preview(ExtractedEvent e, String topic, long nowMillis) {
    EventConfig ev = machine == null ? null : machine.event(e.event());
    // a record produced again lands at a new offset: it is nobody's claimed source
    Source fresh = new Source(topic, Integer.MAX_VALUE, Long.MAX_VALUE);
    ClaimPolicy.Attempt a = new ClaimPolicy.Attempt(route.name(), machine, ev, e, fresh, OWNER, false, nowMillis,
        route.timings().earlyArrivalRetry().toMillis());
    boolean redelivery = false;
    LedgerRow row = facts.ledgerRow(route.name(), e.dedupKey());
    if (row != null) {
      ClaimPolicy.Decision d = ClaimPolicy.onLedgerConflict(a, row);
      if (d instanceof ClaimPolicy.Done done) {
        return of(done.result());
      }
      redelivery = true; // a takeover: the business may have seen the key
      if (!row.rejected()) {
        // an abandoned PENDING claim: the entity already holds it, no CAS again
        return new Preview(Outcome.APPLY, Reason.NONE, "takes over the abandoned claim from " + row.source(), true);
      }
    }
    if (machine == null) {
      return apply(redelivery, row);
    }
    EntityRow entity = facts.entity(machine.name(), e.entityId());
    boolean casWins = ev.creating() ? entity == null : entity != null && !entity.busy() && ev.from().contains(entity.state());
    if (casWins) {
      return apply(redelivery, row);
    }
    ClaimPolicy.Decision d = ClaimPolicy.onCasLost(a, entity, null); // the key's row decided above
    if (d instanceof ClaimPolicy.Done done) {
      return of(done.result());
    }
    if (d instanceof ClaimPolicy.CompareApplied c) {
      return of(ClaimPolicy.onApplied(a, c.entity(),
          facts.appliedRows(machineRoutes, e.entityId(), e.event(), e.fingerprint(), APPLIED_ROWS)));
    }
    return new Preview(Outcome.WAIT, Reason.OUT_OF_ORDER, "entity " + e.entityId() + " is held by a claim whose lease ended: it is"
        + " undone or taken over first", false);
  }

  private static Preview apply(boolean redelivery, LedgerRow rejected) {
    return new Preview(Outcome.APPLY, Reason.NONE, rejected == null ? "claimed and forwarded to the business"
        : "claimed again and forwarded flagged redelivery (rejected before, from " + rejected.source() + ")", redelivery);
  }

  private static Preview of(ClaimResult r) {
    if (r instanceof ClaimResult.Wait w) {
      return new Preview(Outcome.WAIT, w.ifTimedOut().getReason(), w.ifTimedOut().getDetail(), false);
    }
    Verdict v = r instanceof ClaimResult.Rejected rej ? rej.verdict() : ((ClaimResult.Accepted) r).verdict();
    if (v.getDisposition() != Disposition.ILLEGAL_TRANSITION_ESCALATE) {
      return new Preview(v.getDisposition() == Disposition.ACCEPTED && !v.getReplayed() ? Outcome.APPLY : Outcome.DUPLICATE, v.getReason(),
          v.getDetail(), false);
    }
    Outcome o = switch (v.getReason()) {
      case KEY_COLLISION, CONFLICTING_FACT -> Outcome.CONFLICT;
      case IN_FLIGHT, OUT_OF_ORDER -> Outcome.WAIT;
      default -> Outcome.REFUSED;
    };
    return new Preview(o, v.getReason(), v.getDetail(), false);
  }
}
