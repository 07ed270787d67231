package dev.onceguard.proxy.api;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.SubmitResponse.Outcome;
import dev.onceguard.v1.Verdict;
import org.junit.jupiter.api.Test;

class SubmitOutcomesTest {
  private static Outcome of(Disposition d, Reason r) {
    return SubmitOutcomes.of(Verdict.newBuilder().setDisposition(d).setReason(r).build());
  }

  @Test
  void everyVerdictMapsToWhatTheCallerDoesNext() {
    assertThat(of(Disposition.ACCEPTED, Reason.NONE)).isEqualTo(Outcome.PROCEED);
    assertThat(of(Disposition.DUPLICATE_IGNORE, Reason.CACHE_HIT)).isEqualTo(Outcome.DUPLICATE);
    assertThat(of(Disposition.DUPLICATE_IGNORE, Reason.LEDGER_HIT)).isEqualTo(Outcome.DUPLICATE);
    assertThat(of(Disposition.DUPLICATE_IGNORE, Reason.ALREADY_APPLIED)).isEqualTo(Outcome.DUPLICATE);
    assertThat(of(Disposition.DUPLICATE_IGNORE, Reason.IN_FLIGHT)).isEqualTo(Outcome.IN_PROGRESS);
    assertThat(of(Disposition.ILLEGAL_TRANSITION_ESCALATE, Reason.KEY_COLLISION)).isEqualTo(Outcome.CONFLICT);
    assertThat(of(Disposition.ILLEGAL_TRANSITION_ESCALATE, Reason.CONFLICTING_FACT)).isEqualTo(Outcome.CONFLICT);
    assertThat(of(Disposition.ILLEGAL_TRANSITION_ESCALATE, Reason.ILLEGAL_TRANSITION)).isEqualTo(Outcome.ESCALATED);
    assertThat(of(Disposition.ILLEGAL_TRANSITION_ESCALATE, Reason.MISSING_FIELD)).isEqualTo(Outcome.ESCALATED);
  }

  @Test
  void aReplayedAccept_isTheOriginalAgain_aDuplicate() {
    Verdict replayed = Verdict.newBuilder().setDisposition(Disposition.ACCEPTED).setReason(Reason.NONE).setReplayed(true).build();

    assertThat(SubmitOutcomes.of(replayed)).isEqualTo(Outcome.DUPLICATE);
  }
}
