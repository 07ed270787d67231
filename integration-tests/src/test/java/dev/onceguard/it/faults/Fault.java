package dev.onceguard.it.faults;

import java.util.EnumSet;
import java.util.Set;

/** What one call to a store, the business or Kafka does in a schedule of the fault model. */
enum Fault {
  /** Fails before any effect: nothing was written, nothing was sent. */
  FAIL_BEFORE,
  /** The effect takes place (the COMMIT, the write, the business's work), then the answer is lost. */
  LOSE_ANSWER,
  /** The effect takes place, and the caller hears nothing until its deadline: then a timeout. */
  HANG,
  /** The call succeeds; the record's partition is revoked (or the sidecar stops) as its answer arrives. */
  REVOKE,
  /** The process dies as it is about to make the call: the call never happens. */
  CRASH_BEFORE,
  /** The call takes effect, and the process dies before its answer arrives. */
  CRASH_AFTER;

  /** The calls of the model, and which faults each can meet. */
  enum Call {
    CLAIM, TAKE_OVER, RELEASE_API, PENDING_ROWS, APPLIED_ROWS, RENEW, CONFIRM, ABORT, HEARTBEAT, DISPATCH, ESCALATE, VERDICT;

    Set<Fault> faults() {
      // a heartbeat's answer carries nothing: losing it is failing it; its only other fault is a
      // crash at an arbitrary moment of the run
      return this == HEARTBEAT ? EnumSet.of(FAIL_BEFORE, CRASH_BEFORE) : EnumSet.allOf(Fault.class);
    }
  }
}
