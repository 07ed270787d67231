package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.escalate.EscalationSink;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.pipeline.Cancellation;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.pipeline.Deliveries;
import dev.onceguard.proxy.pipeline.DeliveryIds;
import dev.onceguard.proxy.pipeline.OrderSlot;
import dev.onceguard.proxy.pipeline.RecordProcessor;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.time.Scheduler;
import dev.onceguard.proxy.trace.RecordLog;
import dev.onceguard.proxy.trace.RecordSpan;
import dev.onceguard.proxy.trace.RecordTimeline;
import dev.onceguard.proxy.trace.Tracing;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import io.opentelemetry.api.trace.Span;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * The claim/confirm protocol for one consumed record, in one place (DESIGN.md, "Processing one
 * record"):
 *
 * <ol>
 *   <li><b>extract</b> — unreadable input is escalated (MALFORMED / MISSING_FIELD / UNKNOWN_EVENT);
 *   <li><b>L1, claim</b> — through the {@link Guard}; a duplicate ends here, an illegal transition
 *       is escalated, an early arrival or a busy entity waits (per entity, without blocking other
 *       entities) up to {@code early-arrival-timeout} (store outages not counted), then is
 *       escalated as OUT_OF_ORDER; a redelivery of a record still leased by a dead owner waits for
 *       the lease and takes over;
 *   <li><b>reorder window</b> — a waiting early arrival parks in its {@link OrderSlot}, so later
 *       records of its entity in the same partition may start and heal a swapped pair; the
 *       pipeline starts such a later record only where {@link #mayOvertake} allows it (its
 *       transition keeps every earlier parked one applicable: its target reaches their
 *       from-states), otherwise it holds it behind them: records are reordered only into an order
 *       the machine allows, never one that would make an earlier record illegal;
 *   <li><b>forward</b> — {@code MessageHandler.Handle} with the route's deadline; the lease is
 *       renewed while the call and its retries run; RETRY backs off with jitter up to
 *       {@code retry.max-attempts}, then counts as a rejection; a business that cannot be reached
 *       at all (no connection) is waited for without bound, like a store outage;
 *   <li><b>confirm</b> on OK (retried until the database takes it; never forwarded again), or
 *       <b>abort</b> on REJECT then escalate as BUSINESS_REJECTED.
 * </ol>
 *
 * A store outage never becomes a verdict: the step is retried with backoff and the record stays
 * unfinished, so its partition fills its in-flight bound and pauses, and no offset passes it.
 * Escalations complete only once Kafka acknowledged the write.
 *
 * <p>Tracing ({@link Tracing}): each record gets an {@code onceguard.consume} span (continuing its
 * {@code traceparent}), with one child per claim, business call ({@code onceguard.handle}, whose
 * context goes to the business), confirm, abort and escalation (whose context the escalated record
 * carries). Log lines about a record carry its fields ({@link RecordLog}).
 *
 * <p>Threading: {@link #process} never blocks. Each record's way is one object ({@code Run})
 * with an explicit {@link State}, driven on a {@link SerialExecutor} of its own: every continuation
 * of the record (store, dispatcher and escalator answers, timers, nudges, cancellation) is a task
 * of that context, so a record's steps never overlap and its state needs no lock; a continuation
 * that arrives after the record left the state it was meant for (a late answer, a stale timer) is
 * recognised by the state and ignored. The tasks run on the stores', the dispatcher's, the
 * scheduler's and the poll thread, whichever hands the record its next event. Thread-safe; one
 * instance per route.
 */
public final class GuardedProcessor implements RecordProcessor {
  private static final Logger log = LoggerFactory.getLogger(GuardedProcessor.class);

  private final RouteConfig route;
  private final Extractor extractor;
  private final Guard guard;
  private final Dispatcher dispatcher;
  private final EscalationSink escalator;
  private final Scheduler scheduler;
  private final Clock clock;
  private final Backoff backoff;
  private final DeliveryIds ids;
  private final VerdictListener listener;
  private final Tracing tracing;
  private final AtomicLong storeFailures = new AtomicLong();
  /** Time this route's claims found the store unable to answer; early-arrival waits do not count it. */
  private final OutageClock outages = new OutageClock();
  /** The route's machine; null without one. */
  private final StateMachine machine;

  /** Without tracing. Uses and does not own any of its collaborators. */
  public GuardedProcessor(RouteConfig route, MachineConfig machine, Guard guard, Dispatcher dispatcher, EscalationSink escalator,
      Scheduler scheduler, Backoff backoff, DeliveryIds ids, VerdictListener listener) {
    this(route, machine, guard, dispatcher, escalator, scheduler, backoff, ids, listener, Tracing.off());
  }

  /** Uses and does not own any of its collaborators. */
  public GuardedProcessor(RouteConfig route, MachineConfig machine, Guard guard, Dispatcher dispatcher, EscalationSink escalator,
      Scheduler scheduler, Backoff backoff, DeliveryIds ids, VerdictListener listener, Tracing tracing) {
    this.route = route;
    this.extractor = new Extractor(route, machine);
    this.guard = guard;
    this.dispatcher = dispatcher;
    this.escalator = escalator;
    this.scheduler = scheduler;
    this.clock = guard.clock();
    this.backoff = backoff;
    this.ids = ids;
    this.listener = listener;
    this.tracing = tracing;
    this.machine = route.hasMachine() ? guard.machine(route.machine()) : null;
  }

  /**
   * Extractions made on the poll thread for {@link #orderingKey}, read by the record's run and by
   * {@link #mayOvertake}. Identity-keyed and weak: a record the pipeline let go of leaves nothing
   * behind.
   */
  private final Map<ConsumerRecord<byte[], byte[]>, Extraction> extractedForOrdering =
      java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());

  /**
   * The entity id (records of one entity run one at a time, in order); without a machine, or
   * when the id cannot be read, the Kafka key, else the record's own coordinates.
   */
  @Override
  public String orderingKey(ConsumerRecord<byte[], byte[]> r) {
    String id = null;
    if (!route.extraction().entityId().isEmpty()) {
      // the whole extraction, kept for the record's run: the value is parsed once, not twice
      Extraction x = extractor.extract(r.key(), r.value(), r.headers());
      extractedForOrdering.put(r, x);
      id = x instanceof Extraction.Ok ok && ok.event().entityId() != null ? ok.event().entityId()
          : extractor.entityIdOrNull(r.key(), r.value(), r.headers());
    }
    if (id != null) {
      return "e:" + id;
    }
    if (r.key() != null) {
      return "k:" + new String(r.key(), StandardCharsets.ISO_8859_1);
    }
    return "o:" + r.partition() + "@" + r.offset();
  }

  @Override
  public CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> record, Cancellation cancel) {
    return process(record, cancel, OrderSlot.NONE);
  }

  @Override
  public CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> record, Cancellation cancel, OrderSlot slot) {
    Run run = new Run(record, cancel, slot);
    run.ctx.execute(run::start);
    return run.done;
  }

  /**
   * Where one record is in the protocol. A record is in exactly one state; only its own context
   * changes it, and only forward: {@code EXTRACTING → CLAIMING ⇄ WAITING/PARKED → DISPATCHING →
   * CONFIRMING | ABORTING → (ESCALATING →) PUBLISHING → DONE}, with {@code ABANDONING → ABANDONED}
   * and {@code FAILED} reachable from any unfinished state; a lease that cannot be renewed leads
   * from {@code DISPATCHING} back to {@code CLAIMING}.
   */
  enum State {
    /** Reading the event from the record. */
    EXTRACTING,
    /** A claim was asked of the guard, or is asked again after a store failure. */
    CLAIMING,
    /** Waiting to claim again, not parked: a live lease of an earlier owner, or no machine to reorder by. */
    WAITING,
    /** Waiting to claim again while parked in the reorder window: an early arrival or a busy entity. */
    PARKED,
    /** Forwarding the accepted claim: an attempt, its backoff, or the renewal a late attempt waits for. */
    DISPATCHING,
    /** The business applied it; the claim is confirmed (retried until the store takes it). */
    CONFIRMING,
    /** The business did not apply it; the claim is aborted (retried until the store takes it). */
    ABORTING,
    /** Written to the escalation topic (retried until Kafka acknowledges it). */
    ESCALATING,
    /** The verdict is recorded and published (retried until Kafka acknowledges it). */
    PUBLISHING,
    /** Cancelled or lost with an unused claim: the claim is being handed on. */
    ABANDONING,
    /** Finished: the stage completed normally, the offset may be committed. */
    DONE,
    /** Given up on a cancellation (or a closed scheduler): Kafka redelivers the record. */
    ABANDONED,
    /** A step threw: the stage completed exceptionally and the pipeline tries the record again. */
    FAILED;

    /** No step runs any more: the record's stage completed. */
    boolean finished() {
      return this == DONE || this == ABANDONED || this == FAILED;
    }
  }

  /**
   * With a machine, false when applying {@code later}'s event first would make {@code parked}'s
   * impossible: its target state neither is nor leads to one of {@code parked}'s from-states. True
   * without a machine, and for a record whose event cannot be read (it is escalated, never applied).
   */
  @Override
  public boolean mayOvertake(ConsumerRecord<byte[], byte[]> parked, ConsumerRecord<byte[], byte[]> later) {
    if (machine == null) {
      return true;
    }
    ExtractedEvent p = eventOrNull(parked);
    ExtractedEvent l = eventOrNull(later);
    return p == null || l == null || mayOvertake(p, l);
  }

  /** The record's event, from the extraction {@link #orderingKey} kept if there is one; null if unreadable. */
  private ExtractedEvent eventOrNull(ConsumerRecord<byte[], byte[]> r) {
    Extraction x = extractedForOrdering.get(r);
    if (x == null) {
      x = extractor.extract(r.key(), r.value(), r.headers());
    }
    return x instanceof Extraction.Ok ok ? ok.event() : null;
  }

  /** See {@link #mayOvertake(ConsumerRecord, ConsumerRecord)}; both events of this route's machine. */
  private boolean mayOvertake(ExtractedEvent parked, ExtractedEvent later) {
    String state = machine.event(later.event()).to();
    EventConfig waiting = machine.event(parked.event());
    return waiting.from().stream().anyMatch(f -> f.equals(state) || machine.reachable(state, f));
  }

  /** Store failures seen so far (each retried). */
  public long storeFailures() {
    return storeFailures.get();
  }

  /**
   * One record's way through the protocol, the single owner of its lifecycle.
   *
   * <p>Threading contract: every field not final is read and written only by tasks of {@link
   * #ctx}, and every continuation re-enters through it ({@link #step} for stages, {@code
   * ctx.execute} for timers, nudges and cancellation), so the fields are plain. Each task first
   * looks at {@link #state}: once the record {@linkplain State#finished() finished}, a task does
   * nothing.
   */
  private final class Run {
    final ConsumerRecord<byte[], byte[]> record;
    final Cancellation cancel;
    final OrderSlot slot;
    final Source source;
    final CompletableFuture<Void> done = new CompletableFuture<>();
    /** The record's consume span; ended when the record completes. */
    final RecordSpan trace;
    /** The record's serial context; a task that throws fails the record. */
    final SerialExecutor ctx = new SerialExecutor(this::failed);
    State state = State.EXTRACTING;
    ExtractedEvent event;
    /** When the early-arrival wait began; -1: not waiting. */
    long waitingSince = -1;
    /** {@link #outages} when the wait began. */
    long outagesAtWaitStart;
    int storeRetries;
    /**
     * Parked in the slot; stays so while a parked record claims again ({@link State#CLAIMING}),
     * until it goes on to the business or finishes.
     */
    boolean isParked;
    /** The wait of a parked record, which a nudge ends early. */
    CompletableFuture<Void> wake;
    /** A nudge came since the last claim began: whatever it waited for may have happened. */
    boolean nudged;
    /** The accepted claim being forwarded; null before the guard accepted one. */
    Forward forward;

    Run(ConsumerRecord<byte[], byte[]> record, Cancellation cancel, OrderSlot slot) {
      this.record = record;
      this.cancel = cancel;
      this.slot = slot;
      this.source = new Source(record.topic(), record.partition(), record.offset());
      this.trace = tracing.consume(route.name(), record);
      done.whenComplete((v, e) -> trace.end(e));
    }

    /** {@code line} with the record's structured fields. */
    LoggingEventBuilder fields(LoggingEventBuilder line) {
      return RecordLog.fields(line, route.name(), record, event, null, trace);
    }

    /**
     * A step's continuation, run as a task of the record's context, that cannot leave the record
     * hanging: if it throws (a bug, a broken collaborator), the record fails ({@link #failed}).
     * Once the record finished, later continuations (a call or a timer still running beside a
     * step that failed) do nothing: the pipeline's retry owns the record from then on.
     */
    <T> java.util.function.BiConsumer<T, Throwable> step(java.util.function.BiConsumer<T, Throwable> body) {
      return (v, e) -> ctx.execute(() -> {
        if (state.finished()) {
          log.debug("{}: record already {}; a late continuation is ignored", where(), state);
          return;
        }
        body.accept(v, e);
      });
    }

    /**
     * In the context: a task threw. The record completes exceptionally, and the pipeline logs it
     * and tries it again; a claim it held is given up first.
     */
    void failed(Throwable t) {
      if (state.finished()) {
        log.debug("{}: a task failed after the record {}", where(), state, t);
        return;
      }
      fields(log.atError()).setCause(t).log("{}: a step failed unexpectedly in state {}; the record is given back to the pipeline",
          where(), state);
      state = State.FAILED;
      Forward f = forward;
      if (f != null) {
        try {
          f.giveUp();
        } catch (RuntimeException | Error t2) {
          t.addSuppressed(t2);
        }
      }
      done.completeExceptionally(t);
    }

    /** The record stops unfinished (cancelled, or its scheduler closed): Kafka redelivers it. */
    void abandoned(String why) {
      state = State.ABANDONED;
      done.completeExceptionally(new CancelledException(why));
    }

    /**
     * {@link #step(java.util.function.BiConsumer)} that first ends the step's span with the outcome
     * {@code outcome} gives for the result (null when the step failed): a late continuation, which
     * {@code step} ignores, still ends (and exports) it.
     */
    <T> java.util.function.BiConsumer<T, Throwable> step(Span span, java.util.function.Function<T, String> outcome,
        java.util.function.BiConsumer<T, Throwable> body) {
      java.util.function.BiConsumer<T, Throwable> next = step(body);
      return (v, e) -> {
        String told;
        try {
          told = outcome.apply(v);
        } catch (RuntimeException broken) {
          told = null; // a malformed result: the body meets it too, and gives the record back
        }
        RecordSpan.end(span, told, e);
        next.accept(v, e);
      };
    }

    /** Tells the listener how long {@code s}, begun at {@code beganNanos}, took. */
    void timed(VerdictListener.Step s, long beganNanos) {
      try {
        listener.onStep(route.name(), s, System.nanoTime() - beganNanos);
      } catch (RuntimeException le) {
        fields(log.atWarn()).log("verdict listener failed on a step: {}", le.toString());
      }
    }

    /** Stamps {@code m} on the record's timeline, if the benchmark follows it. */
    void mark(RecordTimeline.Mark m) {
      RecordTimeline.mark(source.topic(), source.partition(), source.offset(), m);
    }

    String where() {
      return "route=" + route.name() + " " + source + (event == null ? "" : " key=" + event.dedupKey().substring(0, 12));
    }

    void start() {
      state = State.EXTRACTING;
      Extraction x = extractedForOrdering.get(record);
      if (x == null) {
        x = extractor.extract(record.key(), record.value(), record.headers());
      }
      if (x instanceof Extraction.Failed f) {
        finish(Verdicts.extractionFailed(route.name(), f), false);
        return;
      }
      event = ((Extraction.Ok) x).event();
      trace.event(event);
      claim();
    }

    boolean stopIfCancelled() {
      if (cancel.isCancelled()) {
        abandoned(where());
        return true;
      }
      return false;
    }

    void claim() {
      if (stopIfCancelled()) {
        return;
      }
      nudged = false;
      state = State.CLAIMING;
      Span span = trace.step("onceguard.claim");
      long began = System.nanoTime();
      long askedAt = clock.nowMillis();
      guard.claim(route, event, source).whenComplete(step(span, r -> r == null ? null : r.getClass().getSimpleName(), (r, e) -> {
        mark(RecordTimeline.Mark.CLAIM_BACK);
        if (e != null) {
          if (!(unwrap(e) instanceof ContentionException)) {
            outages.failed(askedAt); // a claim that hung until it failed was in the outage too
          }
          storeTrouble("claim", e, this::claim);
          return;
        }
        outages.answered(clock.nowMillis());
        timed(VerdictListener.Step.CLAIM, began);
        storeRetries = 0;
        if (r instanceof ClaimResult.Accepted a) {
          // registered first: whatever throws from here on must hand the claim back (giveUp)
          Forward f = new Forward(a.claim(), a.verdict());
          forward = f;
          unpark();
          f.attempt(1);
        } else if (r instanceof ClaimResult.Rejected j) {
          finish(j.verdict(), false);
        } else {
          waitThenClaim((ClaimResult.Wait) r);
        }
      }));
    }

    /** Lets later records of the entity start (reorder window, where {@link #mayOvertake} allows). */
    void park() {
      if (isParked || machine == null) {
        return;
      }
      isParked = true;
      cancel.onCancel(() -> ctx.execute(this::nudge));
      slot.park(() -> ctx.execute(this::nudge));
    }

    /** Going on to the business: later records of the entity wait again. */
    void unpark() {
      if (isParked) {
        isParked = false;
        slot.unpark();
      }
    }

    /** In the context: a record of the entity finished (or the work is cancelled); look again now. */
    void nudge() {
      if (state.finished()) {
        return;
      }
      nudged = true;
      CompletableFuture<Void> w = wake;
      if (w != null) {
        w.complete(null);
      }
    }

    /** Waits {@code d} or until nudged, then claims again. */
    void waitParked(Duration d) {
      state = isParked ? State.PARKED : State.WAITING;
      CompletableFuture<Void> w = new CompletableFuture<>();
      wake = w;
      if (nudged || cancel.isCancelled()) {
        w.complete(null);
      } else {
        CompletableFuture<Void> timer = scheduler.delay(d).toCompletableFuture();
        timer.whenComplete((v, e) -> {
          if (e != null) {
            w.completeExceptionally(e);
          } else {
            w.complete(null);
          }
        });
        w.whenComplete((v, e) -> timer.cancel(false));
      }
      w.whenComplete(step((v, e) -> {
        if (e != null && !cancel.isCancelled()) {
          abandoned(where() + " (scheduler closed)");
        } else {
          claim();
        }
      }));
    }

    void waitThenClaim(ClaimResult.Wait w) {
      long now = clock.nowMillis();
      if (w.kind() == ClaimResult.Wait.Kind.OWN_LEASE_LIVE) {
        // Kafka redelivered a record a dead owner still holds: wait for its lease, then take over
        fields(log.atInfo()).log("{}: record still leased by an earlier owner; taking over in {} ms", where(),
            Math.max(0, w.retryAtMillis() - now));
        state = State.WAITING;
        later(Duration.ofMillis(Math.max(10, w.retryAtMillis() - now + 5)), this::claim);
        return;
      }
      startWaiting(now);
      if (waited(now) >= route.timings().earlyArrivalTimeout().toMillis()) {
        finish(w.ifTimedOut(), false);
        return;
      }
      park();
      waitParked(route.timings().earlyArrivalRetry());
    }

    void startWaiting(long now) {
      if (waitingSince < 0) {
        waitingSince = now;
        outagesAtWaitStart = outages.total(now);
      }
    }

    /**
     * How long this record has waited, without the time the store could not answer this route's
     * claims meanwhile: an outage also holds up the predecessor the record waits for, so counting
     * it would escalate records that are merely early, and would let the records the pipeline
     * holds behind a parked one go first.
     */
    long waited(long now) {
      return now - waitingSince - (outages.total(now) - outagesAtWaitStart);
    }

    void storeTrouble(String step, Throwable e, Runnable retry) {
      if (unwrap(e) instanceof ContentionException) {
        // a race lost to another transaction, after the guard's own immediate retries: not an
        // outage, so no backoff and no warning; it is counted by the guard
        later(Duration.ofMillis(1 + java.util.concurrent.ThreadLocalRandom.current().nextLong(20)), retry);
        return;
      }
      storeFailures.incrementAndGet();
      Duration d = backoff.delay(++storeRetries);
      if (Integer.bitCount(storeRetries) == 1) {
        fields(log.atWarn()).log("{}: {} failed ({}); the record stays unfinished, retrying in {} ms (retry {})",
            where(), step, rootMessage(e), d.toMillis(), storeRetries);
      }
      later(d, retry);
    }

    void later(Duration d, Runnable step) {
      scheduler.delay(d).whenComplete(step((v, e) -> {
        if (e != null) {
          abandoned(where() + " (scheduler closed)");
        } else {
          step.run();
        }
      }));
    }

    /** Escalates if needed, records the decision, tells the listener, then completes. */
    void finish(Verdict v, boolean forwarded) {
      if (v.getDisposition() == Disposition.ILLEGAL_TRANSITION_ESCALATE) {
        escalate(v);
        return;
      }
      complete(v, forwarded);
    }

    void escalate(Verdict v) {
      if (stopIfCancelled()) {
        return;
      }
      state = State.ESCALATING;
      Span span = trace.step("onceguard.escalate");
      escalator.escalate(route.outputs().escalationTopic(), record, v, clock.nowMillis(), RecordSpan.traceparent(span))
          .whenComplete(step(span, x -> v.getReason().name(), (x, e) -> {
        if (e != null) {
          storeTrouble("escalation to " + route.outputs().escalationTopic(), e, () -> escalate(v));
          return;
        }
        RecordLog.fields(log.atInfo(), route.name(), record, event, v, trace)
            .log("{}: escalated {} ({}) to {}", where(), v.getReason(), v.getDetail(), route.outputs().escalationTopic());
        complete(v, false);
      }));
    }

    void complete(Verdict v, boolean forwarded) {
      state = State.PUBLISHING;
      trace.verdict(v);
      if (v.getDisposition() != Disposition.ACCEPTED) {
        guard.record(v, source);
      }
      Supplier<CompletionStage<Void>> publish = () -> route.outputs().verdictTopic() == null
          ? CompletableFuture.completedFuture(null)
          : escalator.publishVerdict(route.outputs().verdictTopic(), record, v);
      publish.get().whenComplete(step((x, e) -> {
        if (e != null) {
          storeTrouble("verdict publish to " + route.outputs().verdictTopic(), e, () -> complete(v, forwarded));
          return;
        }
        mark(RecordTimeline.Mark.VERDICT);
        try {
          listener.onVerdict(record, v, forwarded);
        } catch (RuntimeException le) {
          fields(log.atWarn()).log("verdict listener failed: {}", le.toString());
        }
        state = State.DONE;
        done.complete(null);
      }));
    }

    /**
     * Forwarding one accepted claim: attempts, lease renewal, confirm or abort. Confined to the
     * record's context like the rest of the run: the renewal timer's turns and answers are tasks
     * of it too, interleaved with the attempt chain's, never beside them.
     */
    final class Forward {
      Claim claim;
      final Verdict accepted;
      /** Lease renewals run until the claim is confirmed, aborted or abandoned. */
      CompletableFuture<Void> renewTimer;
      boolean renewalStopped;
      /** The claim was definitely taken over by another owner. */
      boolean lost;
      /** The call or backoff in progress; a cancellation cancels it. */
      CompletableFuture<?> current;
      /** Some attempt went out: the business may have seen the record. */
      boolean dispatched;
      /** Some attempt ended ambiguously (deadline, transport): later ones are redeliveries. */
      boolean maybeSeen;
      /** Attempts that reached the business or may have (unreachable-business attempts do not count). */
      int counted;
      /**
       * The claim was handed back to the guard (confirmed, aborted or released): the guard no
       * longer counts it as active in this process, so it must not be released again.
       */
      boolean settled;

      Forward(Claim claim, Verdict accepted) {
        this.claim = claim;
        this.accepted = accepted;
        cancel.onCancel(() -> ctx.execute(() -> {
          CompletableFuture<?> c = current;
          if (c != null) {
            c.cancel(false);
          }
        }));
      }

      void attempt(int n) {
        state = State.DISPATCHING;
        if (cancel.isCancelled() || lost) {
          abandon();
          return;
        }
        long now = clock.nowMillis();
        long margin = Math.min(2000, route.timings().lease().toMillis() / 4);
        if (claim.leaseUntilMillis() - margin <= now) {
          // never call the business on a lease that may already belong to someone else: renew
          // first; if that cannot be done, claim the record again from scratch
          guard.renew(route, claim).whenComplete(step((c, e) -> {
            if (e == null && c != null) {
              claim = c;
              attempt(n);
            } else if (e == null) {
              lost = true;
              abandon();
            } else {
              reclaim("lease renewal", e);
            }
          }));
          return;
        }
        Delivery d = Deliveries.fromRecord(route.name(), record)
            .setEntityId(nz(claim.entityId()))
            .setEvent(nz(claim.event()))
            .setFromState(nz(claim.fromState()))
            .setToState(nz(claim.toState()))
            .setDedupKey(claim.dedupKey())
            .setBusinessKey(claim.businessKey())
            .setAttempt(n)
            .setRedelivery(claim.redelivery() || claim.attempts() > 1 || maybeSeen)
            .setDeliveryId(ids.next())
            .build();
        scheduleRenewal();
        dispatched = true;
        Span span = trace.handle(n);
        long began = System.nanoTime();
        mark(RecordTimeline.Mark.CALL_START);
        CompletableFuture<DispatchResult> call =
            dispatcher.dispatch(d, route.delivery().handlerTimeout(), RecordSpan.contextOf(span)).toCompletableFuture();
        current = call;
        BiConsumer<DispatchResult, Throwable> answered = step(span, res -> res == null ? null : res.kind().name(), (res, e) -> {
          mark(RecordTimeline.Mark.CALL_BACK);
          timed(VerdictListener.Step.HANDLE, began);
          if (cancel.isCancelled()) {
            abandon();
            return;
          }
          if (e != null) {
            res = DispatchResult.retry("dispatcher failed: " + e);
          }
          onResult(n, res);
        });
        call.whenComplete((res, e) -> {
          mark(RecordTimeline.Mark.CALL_END);
          answered.accept(res, e);
        });
      }

      void onResult(int n, DispatchResult res) {
        switch (res.kind()) {
          case OK -> confirm();
          case REJECT -> abort("business rejected it at attempt " + n + ": " + res.message());
          case RETRY -> {
            maybeSeen |= res.maybeDelivered();
            if (!res.businessDown() && ++counted >= route.delivery().retry().maxAttempts()) {
              abort("business did not apply it after " + n + " attempts; last: " + res.message()
                  + (maybeSeen ? "; " + MAY_HAVE_APPLIED : ""));
              return;
            }
            Duration wait = backoff.delay(n, res.retryAfter());
            if (Integer.bitCount(n) == 1) {
              fields(log.atWarn()).log("{}: attempt {} not applied ({}); retrying in {} ms", where(), n, res.message(), wait.toMillis());
            }
            CompletableFuture<Void> delay = scheduler.delay(wait).toCompletableFuture();
            current = delay;
            delay.whenComplete(step((v, e) -> {
              if (e != null && !cancel.isCancelled()) {
                abandoned(where() + " (scheduler closed)");
              } else {
                attempt(n + 1);
              }
            }));
          }
        }
      }

      void scheduleRenewal() {
        if (renewTimer != null || renewalStopped) {
          return;
        }
        Duration every = route.timings().lease().dividedBy(3);
        CompletableFuture<Void> t = scheduler.delay(every).toCompletableFuture();
        renewTimer = t;
        t.whenComplete((v, e) -> ctx.execute(() -> {
          if (e != null || renewTimer != t || renewalStopped || state.finished()) {
            return;
          }
          guard.renew(route, claim).whenComplete(step((c, err) -> {
            if (err == null && c == null) {
              lost = true;
              fields(log.atWarn()).log("{}: lease lost while forwarding (taken over by another owner)", where());
            } else if (err == null) {
              claim = c;
            }
            if (renewTimer == t) {
              renewTimer = null;
              if (!renewalStopped && !lost && !cancel.isCancelled()) {
                scheduleRenewal();
              }
            }
          }));
        }));
      }

      void stopRenewal() {
        renewalStopped = true;
        CompletableFuture<Void> t = renewTimer;
        renewTimer = null;
        if (t != null) {
          t.cancel(false);
        }
      }

      void confirm() {
        // the lease stays renewed until the confirm is through: a confirm retried past the lease
        // must not let another owner forward the record again
        state = State.CONFIRMING;
        scheduleRenewal();
        Span span = trace.step("onceguard.confirm");
        long began = System.nanoTime();
        guard.confirm(route, claim, false).whenComplete(step(span, ok -> ok == null ? null : ok ? "confirmed" : "taken over", (ok, e) -> {
          mark(RecordTimeline.Mark.CONFIRM_BACK);
          if (e != null) {
            // never forward again for it: only the confirm is retried
            storeTrouble("confirm", e, this::confirm);
            return;
          }
          timed(VerdictListener.Step.CONFIRM, began);
          settled = true; // Guard.confirm released it
          stopRenewal();
          storeRetries = 0;
          complete(ok ? accepted : Verdicts.duplicate(Verdicts.base(route.name(), event), Layer.LEDGER, Reason.IN_FLIGHT,
              "claim was taken over by another owner while forwarding; it confirms"), ok);
        }));
      }

      void abort(String why) {
        state = State.ABORTING;
        scheduleRenewal();
        Span span = trace.step("onceguard.abort");
        guard.abort(claim).whenComplete(step(span, ok -> ok == null ? null : ok ? "aborted" : "taken over", (ok, e) -> {
          if (e != null) {
            storeTrouble("abort", e, () -> abort(why));
            return;
          }
          settled = true; // Guard.abort released it
          stopRenewal();
          storeRetries = 0;
          if (!ok) {
            // another owner took the claim over meanwhile and delivers the record itself: its
            // outcome stands, this rejection is not the record's verdict
            complete(Verdicts.duplicate(Verdicts.base(route.name(), event), Layer.LEDGER, Reason.IN_FLIGHT,
                "claim was taken over by another owner before the rejection could be recorded (" + why + ")"), false);
            return;
          }
          Verdict.Builder vb = Verdicts.base(route.name(), event).setCurrentState(nz(claim.fromState()));
          finish(Verdicts.escalate(vb, Layer.BUSINESS, Reason.BUSINESS_REJECTED, why), false);
        }));
      }

      /**
       * The lease could not be renewed (store trouble): give the claim up locally and claim the
       * record again after a backoff. The fresh claim takes our own expired claim back (flagged)
       * or finds another owner's live one (then this copy is IN_FLIGHT and that owner finishes).
       */
      void reclaim(String step, Throwable e) {
        stopRenewal();
        release();
        state = State.CLAIMING;
        storeTrouble(step, e, Run.this::claim);
      }

      /** Hands the claim back to the guard locally, once. */
      void release() {
        if (!settled) {
          settled = true;
          guard.release(claim);
        }
      }

      /**
       * A step threw while this claim was held: stop renewing and release it locally, so that the
       * pipeline's retry of the record is not refused as "still in flight in this process". The
       * store row is left as it is: it is our own PENDING row of this very record with no active
       * attempt, which the retry takes over at once (ClaimPolicy: TakeOver, force) and forwards
       * flagged as a redelivery, which is right whether or not the business saw it; a retry in
       * another process (after a rebalance) takes it over once the lease, no longer renewed, ends.
       * Aborting it instead would need a store round trip on a path that is already broken, and
       * with {@code maySeen=false} would be wrong once an attempt went out.
       */
      void giveUp() {
        stopRenewal();
        release();
      }

      /** Cancelled or lost mid-way: Kafka redelivers the record (cancel) or the new owner finishes it. */
      void abandon() {
        stopRenewal();
        if (!dispatched && !lost && !settled) {
          settled = true;
          state = State.ABANDONING;
          // not sent in this attempt: hand the claim on now instead of leaving it leased, so the
          // partition's next owner takes the record at once. A fresh claim nobody ever sent is
          // undone (its row deleted: the next delivery is a first one). A claim whose record the
          // business may have seen before (a takeover, a rejected record claimed again) keeps its
          // row, so the next delivery is flagged: only its lease ends now.
          boolean seenBefore = claim.attempts() > 1; // a takeover or a re-claim is attempt 2 or later
          CompletionStage<Boolean> handOn = seenBefore ? guard.relinquish(claim) : guard.abort(claim, false);
          handOn.whenComplete(step((ok, e) -> {
            if (e != null) {
              guard.release(claim); // Guard.abort and relinquish release only on success
              fields(log.atDebug()).log("{}: handing the unused claim on failed; it expires with its lease: {}", where(), e.toString());
            }
            abandoned(where());
          }));
          return;
        }
        release();
        if (lost && !cancel.isCancelled()) {
          complete(Verdicts.duplicate(Verdicts.base(route.name(), event), Layer.LEDGER, Reason.IN_FLIGHT,
              "claim was taken over by another owner while forwarding"), false);
          return;
        }
        abandoned(where());
      }
    }
  }

  /**
   * Said of a record given up after its business attempts ran out when some attempt's answer was
   * lost: the business may have applied it although the guard undid its claim, so a human checks.
   */
  public static final String MAY_HAVE_APPLIED = "an answer was lost, so the business may have applied it";

  private static String nz(String s) {
    return s == null ? "" : s;
  }

  /** The failure without its CompletionException wrappers. */
  private static Throwable unwrap(Throwable e) {
    Throwable t = e;
    while (t instanceof java.util.concurrent.CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  private static String rootMessage(Throwable e) {
    Throwable t = unwrap(e);
    return t.getMessage() != null ? t.getMessage() : t.toString();
  }

  /**
   * Outages of the store as this route's claims see them: one begins when a claim fails for a
   * reason other than contention (from when that claim was sent, unless a claim was answered
   * later) and ends at the next answered claim. Thread-safe; an answered claim outside an outage
   * costs one volatile write and one volatile read.
   */
  static final class OutageClock {
    private long ended;
    private long since;
    private volatile boolean running;
    private volatile long lastAnswered = Long.MIN_VALUE;

    synchronized void failed(long askedAt) {
      if (!running) {
        since = Math.max(askedAt, lastAnswered);
        running = true;
      }
    }

    void answered(long now) {
      lastAnswered = now;
      if (running) {
        synchronized (this) {
          if (running) {
            ended += Math.max(0, now - since);
            running = false;
          }
        }
      }
    }

    /** Outage time up to {@code now}, the running outage included. */
    synchronized long total(long now) {
      return ended + (running ? Math.max(0, now - since) : 0);
    }
  }
}
