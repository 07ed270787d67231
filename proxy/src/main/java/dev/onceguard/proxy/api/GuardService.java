package dev.onceguard.proxy.api;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.Claim;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.ContentionException;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.guard.Source;
import dev.onceguard.proxy.guard.StoreUnavailableException;
import dev.onceguard.proxy.guard.Verdicts;
import dev.onceguard.proxy.time.Scheduler;
import dev.onceguard.v1.CompleteRequest;
import dev.onceguard.v1.CompleteResponse;
import dev.onceguard.v1.ExplainRequest;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.GuardGrpc;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.Header;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.SubmitRequest;
import dev.onceguard.v1.SubmitResponse;
import dev.onceguard.v1.Verdict;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The synchronous {@code Guard} API: the same guard as the Kafka path, for callers outside Kafka.
 * Verdicts are response data; transient conditions are status codes — {@code ABORTED} for an
 * entity that is busy or not yet in a from-state, or a store transaction that lost a race (retry
 * the call), {@code UNAVAILABLE} for a store outage, {@code INVALID_ARGUMENT} for an unknown route,
 * {@code NOT_FOUND} for an unknown or expired claim token.
 *
 * <p>Claim tokens live in this process only; an unfinished claim expires with its lease: a timer
 * forgets its token at lease end, after which a Submit with the same {@code request_id} takes it
 * over (flagged {@code redelivery}). Thread-safe; handlers never block.
 */
public final class GuardService extends GuardGrpc.GuardImplBase {
  private final Guard guard;
  private final Scheduler timer;
  private final Map<String, RouteConfig> routes = new HashMap<>();
  private final Map<String, Extractor> extractors = new HashMap<>();
  /** Accepted claims by token, until completed or their lease ends. */
  private final Map<String, Outstanding> claims = new ConcurrentHashMap<>();
  private final SecureRandom random = new SecureRandom();

  /** A claim awaiting its Complete, and the timer that forgets it when its lease ends. */
  private record Outstanding(Claim claim, CompletableFuture<Void> expiry) {}

  /**
   * Uses, does not own, {@code guard} (and its clock, for leases) and {@code timer} (lease ends).
   */
  public GuardService(SidecarConfig config, Guard guard, Scheduler timer) {
    this.guard = guard;
    this.timer = timer;
    for (RouteConfig r : config.routes()) {
      routes.put(r.name(), r);
      extractors.put(r.name(), new Extractor(r, r.machine() == null ? null : config.machines().get(r.machine())));
    }
  }

  @Override
  public void submit(SubmitRequest req, StreamObserver<SubmitResponse> out) {
    RouteConfig route = routes.get(req.getRoute());
    if (route == null) {
      out.onError(Status.INVALID_ARGUMENT.withDescription("unknown route '" + req.getRoute() + "' (configured: " + routes.keySet() + ")").asRuntimeException());
      return;
    }
    RecordHeaders hs = new RecordHeaders();
    for (Header h : req.getHeadersList()) {
      hs.add(h.getKey(), h.hasValue() ? h.getValue().toByteArray() : null);
    }
    Extraction x = extractors.get(route.name()).extract(req.hasKey() ? req.getKey().toByteArray() : null,
        req.hasValue() ? req.getValue().toByteArray() : null, hs);
    String requestId = req.getRequestId().isEmpty() ? HexFormat.of().formatHex(token(12)) : req.getRequestId();
    Source source = Source.api(requestId);
    if (x instanceof Extraction.Failed f) {
      Verdict v = Verdicts.extractionFailed(route.name(), f);
      guard.record(v, source);
      out.onNext(SubmitResponse.newBuilder().setVerdict(v).build());
      out.onCompleted();
      return;
    }
    ExtractedEvent e = ((Extraction.Ok) x).event();
    claim(route, e, source, out, false);
  }

  private void claim(RouteConfig route, ExtractedEvent e, Source source, StreamObserver<SubmitResponse> out, boolean retried) {
    guard.claim(route, e, source).whenComplete((r, err) -> {
      if (err != null) {
        out.onError(statusOf(err).asRuntimeException());
        return;
      }
      if (r instanceof ClaimResult.Accepted a) {
        Claim c = a.claim();
        String t = HexFormat.of().formatHex(token(16));
        hold(t, c);
        out.onNext(SubmitResponse.newBuilder().setVerdict(a.verdict()).setClaimToken(t).setLeaseUntilMs(c.leaseUntilMillis())
            .setFromState(c.fromState() == null ? "" : c.fromState()).setToState(c.toState() == null ? "" : c.toState())
            .setRedelivery(c.redelivery()).build());
        out.onCompleted();
      } else if (r instanceof ClaimResult.Rejected j) {
        guard.record(j.verdict(), source);
        out.onNext(SubmitResponse.newBuilder().setVerdict(j.verdict()).build());
        out.onCompleted();
      } else if (!retried && releaseExpired(route.name(), e.dedupKey())) {
        // the key was held by an expired claim of this process; released, it can be taken over
        claim(route, e, source, out, true);
      } else {
        ClaimResult.Wait w = (ClaimResult.Wait) r;
        String why = switch (w.kind()) {
          case EARLY_ARRIVAL -> "entity is not in a from-state yet (" + w.ifTimedOut().getDetail() + "); retry later";
          case ENTITY_BUSY -> "entity has another transition in flight; retry later";
          case OWN_LEASE_LIVE -> "this request id is still claimed until " + w.retryAtMillis() + " ms since the epoch; retry after it";
        };
        out.onError(Status.ABORTED.withDescription(why).asRuntimeException());
      }
    });
  }

  @Override
  public void complete(CompleteRequest req, StreamObserver<CompleteResponse> out) {
    if (req.getOutcome() != HandleResult.Outcome.OK && req.getOutcome() != HandleResult.Outcome.REJECT) {
      out.onError(Status.INVALID_ARGUMENT.withDescription("outcome must be OK or REJECT").asRuntimeException());
      return;
    }
    String token = req.getClaimToken();
    Outstanding o = claims.remove(token);
    if (o == null) {
      out.onError(Status.NOT_FOUND.withDescription("unknown, expired or already completed claim token").asRuntimeException());
      return;
    }
    Claim c = o.claim();
    if (leaseOver(c, guard.clock().nowMillis())) {
      // its timer has not fired yet
      forget(o);
      out.onError(Status.NOT_FOUND.withDescription("claim expired at " + c.leaseUntilMillis() + " ms since the epoch").asRuntimeException());
      return;
    }
    RouteConfig route = routes.get(c.route());
    Verdict.Builder vb = Verdict.newBuilder().setRoute(c.route()).setDedupKey(c.dedupKey());
    if (c.entityId() != null) {
      vb.setEntityId(c.entityId()).setEvent(c.event());
    }
    if (req.getOutcome() == HandleResult.Outcome.OK) {
      guard.confirm(route, c).whenComplete((ok, err) -> {
        if (err != null) {
          restore(token, o); // let the caller retry the Complete
          out.onError(statusOf(err).asRuntimeException());
          return;
        }
        o.expiry().cancel(false);
        if (!ok) {
          out.onError(Status.NOT_FOUND.withDescription("claim was taken over after its lease expired").asRuntimeException());
        } else {
          out.onNext(CompleteResponse.newBuilder().setVerdict(Verdicts.of(vb.setCurrentState(c.toState() == null ? "" : c.toState()),
              dev.onceguard.v1.Disposition.ACCEPTED, c.machine() == null ? Layer.LEDGER : Layer.STATE_MACHINE, Reason.NONE, "confirmed")).build());
          out.onCompleted();
        }
      });
    } else {
      guard.abort(c).whenComplete((ok, err) -> {
        if (err != null) {
          restore(token, o);
          out.onError(statusOf(err).asRuntimeException());
          return;
        }
        o.expiry().cancel(false);
        if (!ok) {
          out.onError(Status.NOT_FOUND.withDescription("claim was taken over after its lease expired").asRuntimeException());
        } else {
          Verdict v = Verdicts.escalate(vb.setCurrentState(c.fromState() == null ? "" : c.fromState()), Layer.BUSINESS, Reason.BUSINESS_REJECTED,
              req.getMessage().isEmpty() ? "rejected by the caller" : req.getMessage());
          guard.record(v, c.source());
          out.onNext(CompleteResponse.newBuilder().setVerdict(v).build());
          out.onCompleted();
        }
      });
    }
  }

  /** Claims accepted through this API and not yet completed, aborted or expired. */
  int heldClaims() {
    return claims.size();
  }

  @Override
  public void explain(ExplainRequest req, StreamObserver<ExplainResponse> out) {
    RouteConfig route = routes.get(req.getRoute());
    if (route == null) {
      out.onError(Status.INVALID_ARGUMENT.withDescription("unknown route '" + req.getRoute() + "'").asRuntimeException());
      return;
    }
    if (req.getSubjectCase() == ExplainRequest.SubjectCase.SUBJECT_NOT_SET) {
      out.onError(Status.INVALID_ARGUMENT.withDescription("give a dedup_key or an entity_id").asRuntimeException());
      return;
    }
    String key = req.hasDedupKey() ? req.getDedupKey() : null;
    String entity = req.hasEntityId() ? req.getEntityId() : null;
    guard.explain(route, key, entity, (int) req.getLimit()).whenComplete((r, err) -> {
      if (err != null) {
        out.onError(statusOf(err).asRuntimeException());
      } else {
        out.onNext(r);
        out.onCompleted();
      }
    });
  }

  /**
   * Keeps an accepted claim under {@code token} until it is completed or its lease ends. Nothing
   * redelivers a submission whose caller went away (Kafka would redeliver a record), so at lease
   * end the token is forgotten and the claim released here: the key must not stay "active in this
   * process", or the guard would answer "busy" to the caller's retry.
   */
  private void hold(String token, Claim c) {
    CompletableFuture<Void> expiry = timer.delay(Duration.ofMillis(c.leaseUntilMillis() - guard.clock().nowMillis())).toCompletableFuture();
    Outstanding o = new Outstanding(c, expiry);
    claims.put(token, o);
    expiry.thenRun(() -> expire(token, o));
  }

  /** Puts back a claim whose Complete failed; its lease may have ended meanwhile. */
  private void restore(String token, Outstanding o) {
    claims.put(token, o);
    if (o.expiry().isDone()) {
      expire(token, o);
    }
  }

  private void expire(String token, Outstanding o) {
    if (claims.remove(token, o)) {
      guard.release(o.claim());
    }
  }

  private void forget(Outstanding o) {
    o.expiry().cancel(false);
    guard.release(o.claim());
  }

  /**
   * Releases this process's expired claims on one key whose timer has not fired yet; true if
   * there was one. Scans the tokens, so it runs only when a claim was refused.
   */
  private boolean releaseExpired(String route, String dedupKey) {
    long now = guard.clock().nowMillis();
    boolean released = false;
    for (Map.Entry<String, Outstanding> e : claims.entrySet()) {
      Claim c = e.getValue().claim();
      if (leaseOver(c, now) && c.route().equals(route) && c.dedupKey().equals(dedupKey) && claims.remove(e.getKey(), e.getValue())) {
        forget(e.getValue());
        released = true;
      }
    }
    return released;
  }

  /** Like the store: a lease is live while {@code leaseUntil > now}. */
  private static boolean leaseOver(Claim c, long nowMillis) {
    return c.leaseUntilMillis() <= nowMillis;
  }

  private byte[] token(int bytes) {
    byte[] b = new byte[bytes];
    random.nextBytes(b);
    return b;
  }

  /**
   * Transient store failures by type, wherever they sit in the cause chain (stages wrap them in
   * {@link CompletionException}, possibly more than once).
   */
  private static Status statusOf(Throwable err) {
    for (Throwable t = err; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof ContentionException) {
        return Status.ABORTED.withDescription("lost a race with a concurrent transaction in the store (" + t.getMessage() + "); retry the call")
            .withCause(t);
      }
      if (t instanceof StoreUnavailableException) {
        return Status.UNAVAILABLE.withDescription(t.getMessage()).withCause(t);
      }
    }
    Throwable t = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
    return Status.INTERNAL.withDescription(t.toString()).withCause(t);
  }
}
