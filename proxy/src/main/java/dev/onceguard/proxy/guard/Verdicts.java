package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.Collection;

/** Builds {@link Verdict} messages in one consistent way. */
public final class Verdicts {
  private Verdicts() {}

  public static Verdict.Builder base(String route, ExtractedEvent e) {
    Verdict.Builder b = Verdict.newBuilder().setRoute(route);
    if (e != null) {
      b.setDedupKey(e.dedupKey());
      if (e.entityId() != null) {
        b.setEntityId(e.entityId());
      }
      if (e.event() != null) {
        b.setEvent(e.event());
      }
    }
    return b;
  }

  public static Verdict of(Verdict.Builder b, Disposition d, Layer l, Reason r, String detail) {
    return b.setDisposition(d).setLayer(l).setReason(r).setDetail(detail == null ? "" : detail).build();
  }

  public static Verdict accepted(String route, ExtractedEvent e, Collection<String> from, String detail) {
    return of(base(route, e).addAllExpectedFromStates(from), Disposition.ACCEPTED, Layer.STATE_MACHINE, Reason.NONE, detail);
  }

  /** The verdict on a record that could not be read (MALFORMED, MISSING_FIELD, UNKNOWN_EVENT). */
  public static Verdict extractionFailed(String route, Extraction.Failed f) {
    Verdict.Builder b = Verdict.newBuilder().setRoute(route);
    if (f.entityId() != null) {
      b.setEntityId(f.entityId());
    }
    if (f.event() != null) {
      b.setEvent(f.event());
    }
    return escalate(b, Layer.EXTRACT, f.reason(), f.detail());
  }

  public static Verdict duplicate(Verdict.Builder b, Layer l, Reason r, String detail) {
    return of(b, Disposition.DUPLICATE_IGNORE, l, r, detail);
  }

  /**
   * A duplicate of an original confirmed (or claimed) at {@code originalAtMillis}; {@code null} if
   * that time is not known. The age answers "how late do duplicates come", which sizes the L1 TTL.
   */
  public static Verdict duplicateOf(Verdict.Builder b, Layer l, Reason r, String detail, long nowMillis, Long originalAtMillis) {
    if (originalAtMillis != null && originalAtMillis >= 0) {
      b.setOriginalAgeMs(Math.max(0, nowMillis - originalAtMillis));
    }
    return duplicate(b, l, r, detail);
  }

  /**
   * ACCEPTED again for the record that applied its key, consumed once more after its verdict or
   * offset commit was lost: flagged {@code replayed}; the business is not called again.
   */
  public static Verdict replayedAccept(Verdict.Builder b, String detail) {
    return of(b.setReplayed(true), Disposition.ACCEPTED, Layer.LEDGER, Reason.NONE, detail);
  }

  public static Verdict escalate(Verdict.Builder b, Layer l, Reason r, String detail) {
    return of(b, Disposition.ILLEGAL_TRANSITION_ESCALATE, l, r, detail);
  }
}
