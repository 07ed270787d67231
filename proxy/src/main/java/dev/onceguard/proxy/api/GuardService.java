package dev.onceguard.proxy.api;

import com.google.protobuf.Any;
import com.google.protobuf.ByteString;
import com.google.rpc.RetryInfo;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.guard.Verdicts;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.store.StoreUnavailableException;
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
import dev.onceguard.v1.StoredResponse;
import dev.onceguard.v1.SubmitResponse;
import dev.onceguard.v1.Verdict;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The synchronous {@code Guard} API: the same guard as the Kafka path, for callers outside Kafka.
 * Verdicts are response data; transient conditions are status codes — {@code ABORTED} for an
 * entity that is busy or not yet in a from-state, or a store transaction that lost a race (retry
 * the call), {@code UNAVAILABLE} for a store outage, {@code INVALID_ARGUMENT} for an unknown route,
 * {@code NOT_FOUND} for an unknown or expired claim token, {@code RESOURCE_EXHAUSTED} for a call
 * beyond the bound of calls in flight.
 *
 * <p><b>Admission.</b> At most {@link #callBound} Submit and Explain calls are in flight at once,
 * and as many Complete calls (a bound of their own, so that a flood of Submits cannot keep the
 * accepted claims from being completed within their leases). A call beyond its bound is answered
 * {@code RESOURCE_EXHAUSTED} at once, before any store work is queued and without a verdict, with
 * a retry-after: in the description, as {@code google.rpc.RetryInfo} in the status details, and as
 * the trailer {@code grpc-retry-pushback-ms} that a gRPC client's retry policy honours. So a store
 * that slows down makes callers wait instead of piling their calls up in the heap.
 *
 * <p>Claim tokens live in this process only; an unfinished claim expires with its lease: a timer
 * forgets its token at lease end, after which a Submit with the same {@code request_id} takes it
 * over (flagged {@code redelivery}). Thread-safe; handlers never block.
 */
public final class GuardService extends GuardGrpc.GuardImplBase {
  /** Calls of each bound in flight per MySQL connection (see {@link #callBound}). */
  public static final int CALLS_PER_CONNECTION = 64;
  /** The retry-after of a refused call follows the recent call duration, within these limits. */
  static final long MIN_RETRY_AFTER_MILLIS = 100;
  static final long MAX_RETRY_AFTER_MILLIS = 10_000;
  /** The trailer gRPC clients read a server's retry pushback from (gRFC A6). */
  static final Metadata.Key<String> RETRY_PUSHBACK_MS = Metadata.Key.of("grpc-retry-pushback-ms", Metadata.ASCII_STRING_MARSHALLER);

  private final Guard guard;
  private final Scheduler timer;
  private final Map<String, RouteConfig> routes = new HashMap<>();
  private final Map<String, Extractor> extractors = new HashMap<>();
  /** Accepted claims by token, until completed or their lease ends. */
  private final Map<String, Outstanding> claims = new ConcurrentHashMap<>();
  private final SecureRandom random = new SecureRandom();
  private final int bound;
  /** Submit and Explain calls in flight. */
  private final Semaphore calls;
  /** Complete calls in flight. */
  private final Semaphore completes;
  private final LongAdder refusedSubmits = new LongAdder();
  private final LongAdder refusedCompletes = new LongAdder();
  private final LongAdder refusedExplains = new LongAdder();
  /** Moving mean of admitted calls' durations, nanoseconds: what a refused caller is asked to wait. */
  private final AtomicLong meanCallNanos = new AtomicLong();

  /** A claim awaiting its Complete, and the timer that forgets it when its lease ends. */
  private record Outstanding(Claim claim, CompletableFuture<Void> expiry) {}

  /**
   * Uses, does not own, {@code guard} (and its clock, for leases) and {@code timer} (lease ends);
   * admits {@link #callBound} calls of each kind.
   */
  public GuardService(SidecarConfig config, Guard guard, Scheduler timer) {
    this(config, guard, timer, callBound(config));
  }

  /** @param bound Submit and Explain calls in flight at most, and as many Complete calls */
  GuardService(SidecarConfig config, Guard guard, Scheduler timer, int bound) {
    if (bound < 1) {
      throw new IllegalArgumentException("bound must be at least 1: " + bound);
    }
    this.guard = guard;
    this.timer = timer;
    this.bound = bound;
    this.calls = new Semaphore(bound);
    this.completes = new Semaphore(bound);
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
    StreamObserver<SubmitResponse> admitted = admit(calls, refusedSubmits, "Submit", out);
    if (admitted != null) {
      answering(admitted, () -> submitAdmitted(route, req, admitted));
    }
  }

  private void submitAdmitted(RouteConfig route, SubmitRequest req, StreamObserver<SubmitResponse> out) {
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
      out.onNext(SubmitResponse.newBuilder().setVerdict(v).setOutcome(SubmitOutcomes.of(v)).build());
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
        out.onNext(SubmitResponse.newBuilder().setVerdict(a.verdict()).setOutcome(SubmitResponse.Outcome.PROCEED)
            .setClaimToken(t).setLeaseUntilMs(c.leaseUntilMillis())
            .setFromState(c.fromState() == null ? "" : c.fromState()).setToState(c.toState() == null ? "" : c.toState())
            .setRedelivery(c.redelivery()).build());
        out.onCompleted();
      } else if (r instanceof ClaimResult.Rejected j) {
        guard.record(j.verdict(), source);
        answerRefused(route, e, j.verdict(), out);
      } else if (!retried && releaseExpired(route.name(), e.dedupKey())) {
        // the key was held by an expired claim of this process; released, it can be taken over
        claim(route, e, source, out, true);
      } else if (heldByAnotherCaller((ClaimResult.Wait) r)) {
        // the same key claimed by another request in this process: answered as from any other
        // process (DUPLICATE_IGNORE/IN_FLIGHT, in progress), not as a busy entity
        ClaimResult.Wait w = (ClaimResult.Wait) r;
        Verdict v = Verdicts.duplicate(w.ifTimedOut().toBuilder(), Layer.LEDGER, Reason.IN_FLIGHT, w.ifTimedOut().getDetail());
        guard.record(v, source);
        answerRefused(route, e, v, out);
      } else {
        ClaimResult.Wait w = (ClaimResult.Wait) r;
        String why = switch (w.kind()) {
          case EARLY_ARRIVAL -> "entity is not in a from-state yet (" + w.ifTimedOut().getDetail() + "); retry later";
          case ENTITY_BUSY, KEY_HELD -> "entity has another transition in flight; retry later";
          case OWN_LEASE_LIVE -> "this request id is still claimed until " + w.retryAtMillis() + " ms since the epoch; retry after it";
        };
        out.onError(Status.ABORTED.withDescription(why).asRuntimeException());
      }
    });
  }

  /** A wait on the same dedup key held by another request of this process (not a busy entity, not this request's own claim). */
  private static boolean heldByAnotherCaller(ClaimResult.Wait w) {
    return w.kind() == ClaimResult.Wait.Kind.KEY_HELD;
  }

  /**
   * A claim that was not accepted: the verdict with what the caller does next; a duplicate carries
   * the response stored with the original (one primary-key read, only when the verdict is one).
   */
  private void answerRefused(RouteConfig route, ExtractedEvent e, Verdict v, StreamObserver<SubmitResponse> out) {
    SubmitResponse.Outcome outcome = SubmitOutcomes.of(v);
    SubmitResponse.Builder b = SubmitResponse.newBuilder().setVerdict(v).setOutcome(outcome);
    long now = guard.clock().nowMillis();
    if (v.hasOriginalAgeMs()) {
      b.setOriginalAtMs(now - v.getOriginalAgeMs());
    }
    if (outcome == SubmitResponse.Outcome.IN_PROGRESS) {
      b.setRetryAfterMs((int) Math.min(Integer.MAX_VALUE, Math.max(1, route.timings().earlyArrivalRetry().toMillis())));
    }
    if (outcome != SubmitResponse.Outcome.DUPLICATE) {
      out.onNext(b.build());
      out.onCompleted();
      return;
    }
    guard.storedResponse(route.name(), e.dedupKey()).whenComplete((stored, err) -> {
      if (err != null) {
        // the verdict stands; without its response the caller cannot answer as the first time
        out.onError(statusOf(err).asRuntimeException());
        return;
      }
      if (stored != null) {
        b.setResponse(StoredResponse.newBuilder().setBody(ByteString.copyFrom(stored.body())).setContentType(stored.contentType()))
            .setOriginalAtMs(stored.completedAtMillis());
      }
      out.onNext(b.build());
      out.onCompleted();
    });
  }

  @Override
  public void complete(CompleteRequest req, StreamObserver<CompleteResponse> out) {
    if (req.getOutcome() != HandleResult.Outcome.OK && req.getOutcome() != HandleResult.Outcome.REJECT) {
      out.onError(Status.INVALID_ARGUMENT.withDescription("outcome must be OK or REJECT").asRuntimeException());
      return;
    }
    if (req.hasResponse() && req.getOutcome() != HandleResult.Outcome.OK) {
      out.onError(Status.INVALID_ARGUMENT.withDescription("response: only a Complete with outcome OK stores a response").asRuntimeException());
      return;
    }
    StreamObserver<CompleteResponse> admitted = admit(completes, refusedCompletes, "Complete", out);
    if (admitted != null) {
      answering(admitted, () -> completeAdmitted(req, admitted));
    }
  }

  private void completeAdmitted(CompleteRequest req, StreamObserver<CompleteResponse> out) {
    String token = req.getClaimToken();
    Outstanding held = claims.get(token);
    String tooLarge = held == null || !req.hasResponse() ? null : responseProblem(routes.get(held.claim().route()), req.getResponse());
    if (tooLarge != null) {
      // refused before the claim is taken out: the caller can complete again with a smaller response
      out.onError(Status.INVALID_ARGUMENT.withDescription(tooLarge).asRuntimeException());
      return;
    }
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
      dev.onceguard.proxy.store.StoredResponse response = req.hasResponse()
          ? new dev.onceguard.proxy.store.StoredResponse(req.getResponse().getBody().toByteArray(), req.getResponse().getContentType(), 0)
          : null;
      guard.confirm(route, c, response).whenComplete((ok, err) -> {
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

  /** Why {@code response} cannot be stored on {@code route}'s ledger; {@code null} if it can. */
  static String responseProblem(RouteConfig route, StoredResponse response) {
    int max = route.ledgerContent().responseMaxBytes();
    if (response.getBody().size() > max) {
      return "response.body is " + response.getBody().size() + " bytes; route '" + route.name() + "' stores at most " + max
          + " (response-max-bytes)";
    }
    int chars = response.getContentType().codePointCount(0, response.getContentType().length());
    if (chars > dev.onceguard.proxy.store.StoredResponse.MAX_CONTENT_TYPE_CHARS) {
      return "response.content_type is " + chars + " characters; at most " + dev.onceguard.proxy.store.StoredResponse.MAX_CONTENT_TYPE_CHARS;
    }
    return null;
  }

  /** Claims accepted through this API and not yet completed, aborted or expired. */
  int heldClaims() {
    return claims.size();
  }

  /**
   * Calls of each bound in flight at most for a process with {@code config}'s MySQL pool:
   * {@value #CALLS_PER_CONNECTION} per connection (512 for the default pool of 8, as many as a
   * route's default {@code max-in-flight}). Each admitted call has at most one store step queued
   * at a time.
   */
  public static int callBound(SidecarConfig config) {
    return CALLS_PER_CONNECTION * config.mysql().poolSize();
  }

  /** The bound of each kind of call in flight (Submit and Explain; Complete). */
  public int bound() {
    return bound;
  }

  /** Calls admitted and not answered yet, every kind. */
  public int inFlight() {
    return 2 * bound - calls.availablePermits() - completes.availablePermits();
  }

  /** Calls answered {@code RESOURCE_EXHAUSTED} so far: Submit, Complete, Explain. */
  public long[] refusedCalls() {
    return new long[] {refusedSubmits.sum(), refusedCompletes.sum(), refusedExplains.sum()};
  }

  /**
   * Takes a slot of {@code slots} for a call: the observer to answer through, which frees the
   * slot with the answer; or {@code null} when every slot is taken, after answering
   * {@code RESOURCE_EXHAUSTED} with a retry-after.
   */
  private <T> StreamObserver<T> admit(Semaphore slots, LongAdder refused, String method, StreamObserver<T> out) {
    if (slots.tryAcquire()) {
      return new Admitted<>(out, slots, System.nanoTime());
    }
    refused.increment();
    long ms = retryAfterMillis();
    String why = method + " refused: " + bound + " calls are in flight already (the store is slower than the calls arrive);"
        + " retry after " + ms + " ms";
    Metadata trailers = new Metadata();
    trailers.put(RETRY_PUSHBACK_MS, Long.toString(ms));
    com.google.rpc.Status status = com.google.rpc.Status.newBuilder().setCode(Status.Code.RESOURCE_EXHAUSTED.value()).setMessage(why)
        .addDetails(Any.pack(RetryInfo.newBuilder().setRetryDelay(com.google.protobuf.Duration.newBuilder()
            .setSeconds(ms / 1000).setNanos((int) (ms % 1000) * 1_000_000)).build()))
        .build();
    out.onError(StatusProto.toStatusRuntimeException(status, trailers));
    return null;
  }

  /** About one call's recent duration: by then, the calls in flight now have been answered. */
  long retryAfterMillis() {
    long ms = meanCallNanos.get() / 1_000_000;
    return Math.max(MIN_RETRY_AFTER_MILLIS, Math.min(MAX_RETRY_AFTER_MILLIS, ms));
  }

  /** Runs a handler's body; a bug that throws still answers the call (and frees its slot). */
  private static <T> void answering(StreamObserver<T> out, Runnable body) {
    try {
      body.run();
    } catch (RuntimeException e) {
      out.onError(Status.INTERNAL.withDescription(e.toString()).withCause(e).asRuntimeException());
    }
  }

  /** An admitted call's observer: its answer frees the call's slot, once, and feeds the mean duration. */
  private final class Admitted<T> implements StreamObserver<T> {
    private final StreamObserver<T> out;
    private final Semaphore slots;
    private final long started;
    private final AtomicBoolean freed = new AtomicBoolean();

    Admitted(StreamObserver<T> out, Semaphore slots, long started) {
      this.out = out;
      this.slots = slots;
      this.started = started;
    }

    private void free() {
      if (freed.compareAndSet(false, true)) {
        long took = System.nanoTime() - started;
        meanCallNanos.getAndUpdate(m -> m + (took - m) / 8);
        slots.release();
      }
    }

    @Override
    public void onNext(T value) {
      try {
        out.onNext(value);
      } catch (RuntimeException e) {
        free();
        throw e;
      }
    }

    @Override
    public void onError(Throwable t) {
      free();
      out.onError(t);
    }

    @Override
    public void onCompleted() {
      free();
      out.onCompleted();
    }
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
    StreamObserver<ExplainResponse> admitted = admit(calls, refusedExplains, "Explain", out);
    if (admitted != null) {
      answering(admitted, () -> explainAdmitted(route, req, admitted));
    }
  }

  private void explainAdmitted(RouteConfig route, ExplainRequest req, StreamObserver<ExplainResponse> out) {
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
