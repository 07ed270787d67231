package dev.onceguard.client.internal;

import com.google.protobuf.ByteString;
import dev.onceguard.client.ClaimExpiredException;
import dev.onceguard.client.Decision;
import dev.onceguard.client.EntityBusyException;
import dev.onceguard.client.EntityState;
import dev.onceguard.client.Explanation;
import dev.onceguard.client.LedgerEntry;
import dev.onceguard.client.OnceGuardException;
import dev.onceguard.client.SidecarBusyException;
import dev.onceguard.client.SidecarUnavailableException;
import dev.onceguard.client.StoredResponse;
import dev.onceguard.client.SubmitOutcome;
import dev.onceguard.client.SubmitResult;
import dev.onceguard.client.Submission;
import dev.onceguard.client.Verdict;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Header;
import dev.onceguard.v1.SubmitRequest;
import dev.onceguard.v1.SubmitResponse;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.time.Instant;

/** Conversions between the Guard service's messages and the client's Java types. */
public final class GuardMapping {
  private GuardMapping() {}

  /** A submission as a request. */
  public static SubmitRequest toRequest(Submission s) {
    SubmitRequest.Builder b = SubmitRequest.newBuilder().setRoute(s.route()).setRequestId(s.requestId());
    byte[] key = s.key();
    if (key != null) {
      b.setKey(ByteString.copyFrom(key));
    }
    byte[] value = s.value();
    if (value != null) {
      b.setValue(ByteString.copyFrom(value));
    }
    for (org.apache.kafka.common.header.Header h : s.headers()) {
      Header.Builder hb = Header.newBuilder().setKey(h.key());
      if (h.value() != null) {
        hb.setValue(ByteString.copyFrom(h.value()));
      }
      b.addHeaders(hb);
    }
    return b.build();
  }

  /** A submit response as a result. */
  public static SubmitResult toResult(SubmitResponse r) {
    Verdict verdict = toVerdict(r.getVerdict());
    String token = r.getClaimToken().isEmpty() ? null : r.getClaimToken();
    StoredResponse stored = r.hasResponse()
        ? new StoredResponse(r.getResponse().getBody().toByteArray(), r.getResponse().getContentType()) : null;
    return new SubmitResult(verdict, token, instantOrNull(r.getLeaseUntilMs()), r.getFromState(), r.getToState(), r.getRedelivery(),
        outcome(r, verdict), Duration.ofMillis(Integer.toUnsignedLong(r.getRetryAfterMs())), stored, instantOrNull(r.getOriginalAtMs()));
  }

  /** The sidecar's outcome; from the verdict when the sidecar predates the field (same rules as the sidecar's). */
  static SubmitOutcome outcome(SubmitResponse r, Verdict v) {
    if (r.getOutcome() != SubmitResponse.Outcome.OUTCOME_UNSPECIFIED) {
      return mirror(SubmitOutcome.class, r.getOutcome());
    }
    switch (v.disposition()) {
      case ACCEPTED:
        return SubmitOutcome.PROCEED;
      case DUPLICATE_IGNORE:
        return v.reason() == Verdict.Reason.IN_FLIGHT ? SubmitOutcome.IN_PROGRESS : SubmitOutcome.DUPLICATE;
      case ILLEGAL_TRANSITION_ESCALATE:
        return v.reason() == Verdict.Reason.KEY_COLLISION || v.reason() == Verdict.Reason.CONFLICTING_FACT
            ? SubmitOutcome.CONFLICT : SubmitOutcome.ESCALATED;
      default:
        return SubmitOutcome.UNSPECIFIED;
    }
  }

  /** A verdict message as a verdict. */
  public static Verdict toVerdict(dev.onceguard.v1.Verdict v) {
    return new Verdict(
        mirror(Verdict.Disposition.class, v.getDisposition()),
        mirror(Verdict.Layer.class, v.getLayer()),
        mirror(Verdict.Reason.class, v.getReason()),
        v.getCurrentState(),
        v.getCurrentVersion(),
        v.getExpectedFromStatesList(),
        v.getDedupKey(),
        v.getDetail(),
        v.getRoute(),
        v.getEntityId(),
        v.getEvent());
  }

  /** An explain response as an explanation. */
  public static Explanation toExplanation(ExplainResponse r) {
    return new Explanation(
        r.getLedgerList().stream().map(GuardMapping::toLedgerEntry).toList(),
        r.hasEntity() ? toEntityState(r.getEntity()) : null,
        r.getDecisionsList().stream()
            .map(d -> new Decision(
                instantOrNull(d.getAtMs()),
                toVerdict(d.getVerdict()),
                d.getSourceTopic(),
                d.getSourcePartition(),
                d.getSourceOffset()))
            .toList());
  }

  private static LedgerEntry toLedgerEntry(dev.onceguard.v1.LedgerEntry e) {
    return new LedgerEntry(
        e.getRoute(),
        e.getDedupKey(),
        e.getBusinessKey(),
        e.getFingerprint(),
        e.getEntityId(),
        e.getEvent(),
        e.getFromState(),
        e.getToState(),
        e.getStatus(),
        e.getOwner(),
        instantOrNull(e.getLeaseUntilMs()),
        e.getAttempts(),
        e.getSourceTopic(),
        e.getSourcePartition(),
        e.getSourceOffset(),
        instantOrNull(e.getCreatedAtMs()),
        instantOrNull(e.getCompletedAtMs()));
  }

  private static EntityState toEntityState(dev.onceguard.v1.EntityState e) {
    return new EntityState(
        e.getMachine(),
        e.getEntityId(),
        e.getState(),
        e.getVersion(),
        e.getPendingKey(),
        instantOrNull(e.getPendingUntilMs()),
        instantOrNull(e.getUpdatedAtMs()));
  }

  /**
   * Maps a proto enum to the Java mirror of the same name; {@code *_UNSPECIFIED}, and values
   * this client does not know (a newer sidecar), become {@code UNSPECIFIED}.
   */
  static <E extends Enum<E>> E mirror(Class<E> type, Enum<?> proto) {
    try {
      return Enum.valueOf(type, proto.name());
    } catch (IllegalArgumentException unknownOrUnspecified) {
      return Enum.valueOf(type, "UNSPECIFIED");
    }
  }

  /**
   * The exception for a failed Guard call.
   *
   * @param e the failure
   * @param completing whether the call was {@code Complete}, where NOT_FOUND means the claim
   *     expired
   * @return the exception to throw
   */
  public static OnceGuardException toException(StatusRuntimeException e, boolean completing) {
    Status.Code code = e.getStatus().getCode();
    switch (code) {
      case ABORTED:
        return new EntityBusyException(e);
      case UNAVAILABLE:
        return new SidecarUnavailableException(e);
      case RESOURCE_EXHAUSTED:
        return new SidecarBusyException(e);
      case NOT_FOUND:
        return completing ? new ClaimExpiredException(e) : new OnceGuardException(e);
      default:
        return new OnceGuardException(e);
    }
  }

  private static Instant instantOrNull(long epochMs) {
    return epochMs == 0 ? null : Instant.ofEpochMilli(epochMs);
  }
}
