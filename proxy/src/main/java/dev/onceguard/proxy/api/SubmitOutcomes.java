package dev.onceguard.proxy.api;

import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.SubmitResponse;
import dev.onceguard.v1.Verdict;

/**
 * What a Guard API caller does next, told from a verdict: the verdict says what happened in the
 * guard's terms (layer, reason); the outcome says proceed, answer as before, retry, or give up. One
 * mapping, so every Submit answers the same verdict the same way.
 */
final class SubmitOutcomes {
  private SubmitOutcomes() {}

  static SubmitResponse.Outcome of(Verdict v) {
    if (v.getDisposition() == Disposition.ACCEPTED) {
      // a replayed accept is the original's own record again: done before
      return v.getReplayed() ? SubmitResponse.Outcome.DUPLICATE : SubmitResponse.Outcome.PROCEED;
    }
    if (v.getDisposition() == Disposition.DUPLICATE_IGNORE) {
      return v.getReason() == Reason.IN_FLIGHT ? SubmitResponse.Outcome.IN_PROGRESS : SubmitResponse.Outcome.DUPLICATE;
    }
    if (v.getReason() == Reason.KEY_COLLISION || v.getReason() == Reason.CONFLICTING_FACT) {
      return SubmitResponse.Outcome.CONFLICT;
    }
    return SubmitResponse.Outcome.ESCALATED;
  }
}
