package dev.onceguard.proxy.guard;

import static dev.onceguard.proxy.guard.FakeGuardStore.contention;
import static dev.onceguard.proxy.guard.FakeGuardStore.failure;
import static dev.onceguard.proxy.guard.FakeGuardStore.hold;
import static dev.onceguard.proxy.guard.FakeGuardStore.outage;
import static dev.onceguard.proxy.guard.FakeGuardStore.reply;
import static dev.onceguard.proxy.guard.OrderRoute.MACHINE;
import static dev.onceguard.proxy.guard.OrderRoute.OWNER;
import static dev.onceguard.proxy.guard.OrderRoute.ROUTE;
import static dev.onceguard.proxy.guard.OrderRoute.record;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.pipeline.Cancellation;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.pipeline.DeliveryIds;
import dev.onceguard.proxy.pipeline.KeyOrderedScheduler;
import dev.onceguard.proxy.pipeline.OrderSlot;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.GuardStore.ClaimCommand;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.proxy.trace.RecordTimeline;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

/**
 * One record through extract → claim → forward → confirm/abort → escalate, on a real {@link Guard}
 * over a {@link FakeGuardStore}, with fake time, a scripted business and a recording escalator.
 * Every step completes on the test's thread (fakes answer at once, {@link FakeTime} fires timers
 * when the test advances it).
 */
class GuardedProcessorTest {
  private static final long T0 = 1_000_000L;
  private final FakeTime time = new FakeTime(T0);
  private final FakeGuardStore store = new FakeGuardStore();
  private final FakeDispatcher dispatcher = new FakeDispatcher(store.calls);
  private final FakeEscalator escalator = new FakeEscalator();
  private final Guard guard = new Guard(store, IdempotencyCache.DISABLED, Map.of("order", MACHINE), time, OWNER, time);
  // lowest jitter: every backoff is exactly the initial 100 ms (the route's default)
  private final Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), new Random() {
    @Override
    public long nextLong(long bound) {
      return 0;
    }
  });

  record Told(long offset, Verdict verdict, boolean forwarded) {}

  private final List<Told> told = new CopyOnWriteArrayList<>();
  private final GuardedProcessor processor = new GuardedProcessor(ROUTE, MACHINE, guard, dispatcher, escalator, time, backoff,
      new DeliveryIds("run"), (r, v, f) -> told.add(new Told(r.offset(), v, f)));

  private final ConsumerRecord<byte[], byte[]> ship = record(41, "o-1", "ship");

  /** Records what the processor asks of its ordering slot. */
  static final class RecordingSlot implements OrderSlot {
    volatile Runnable nudge;
    volatile int parks;
    volatile int unparks;

    @Override
    public void park(Runnable nudge) {
      this.nudge = nudge;
      parks++;
    }

    @Override
    public void unpark() {
      unparks++;
    }
  }

  private CompletableFuture<Void> process(ConsumerRecord<byte[], byte[]> r) {
    return processor.process(r, new Cancellation()).toCompletableFuture();
  }

  private Told onlyVerdict() {
    assertThat(told).hasSize(1);
    return told.get(0);
  }

  /** A live PENDING row of this very record, held by us (an attempt given up locally). */
  private static LedgerRow ourLiveRow(ClaimCommand cmd) {
    return new LedgerRow("orders", cmd.extracted().dedupKey(), cmd.extracted().businessKey(), cmd.extracted().fingerprint(), "PENDING",
        cmd.owner(), cmd.nowMillis() + 1_000, cmd.source().topic(), cmd.source().partition(), cmd.source().offset(), "to_ship",
        "shipped", 1, 1_000L, 3_000L, cmd.nowMillis());
  }


  // ------------------------------------------------------------------------- a throwing step

  @Test
  void process_continuationThrows_completesTheRecordExceptionally_insteadOfHanging() {
    store.entity("o-1", "to_ship");
    // a broken dispatcher answering a result without a kind: the step reading it throws
    dispatcher.script.add(new DispatchResult(null, "broken", Duration.ZERO, false, false));

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompletedExceptionally();
    assertThat(told).as("no verdict for a record given back to the pipeline").isEmpty();
  }

  @Test
  void process_stepThrowsAfterTheClaimWasAccepted_retryOfTheRecordTakesItsOwnClaimOverAndIsForwarded() {
    store.entity("o-1", "to_ship");
    // attempt 1: accepted, dispatched, then the step reading the broken answer throws
    dispatcher.script.add(new DispatchResult(null, "broken", Duration.ZERO, false, false));

    CompletableFuture<Void> first = process(ship);

    assertThat(first).isCompletedExceptionally();
    assertThat(time.pendingDelays()).as("the failed attempt stopped renewing its lease").isZero();

    // the pipeline's retry: the ledger refuses the INSERT with our own live PENDING row
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.LedgerConflict(ourLiveRow(cmd))));
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> retry = process(ship);

    assertThat(retry).as("not held back as 'still in flight in this process'").isCompleted();
    assertThat(store.calls).containsExactly("claim", "dispatch ship", "claim", "takeOver force=true", "dispatch ship", "confirm");
    Told t = onlyVerdict();
    assertThat(t.verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(t.forwarded()).isTrue();
    assertThat(dispatcher.calls.get(1).getRedelivery()).as("the business may have seen attempt 1").isTrue();
    assertThat(store.entityRow("o-1").pendingKey).isNull();
    assertThat(escalator.escalations).isEmpty();
  }

  @Test
  void process_businessAsksToRetryIn30Days_waitsNoLongerThanTheRoutesMaxBackoff() {
    // one answer must not pin the entity and the partition's commits for a month
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.retry("come back next month", Duration.ofDays(30)));
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> f = process(ship);
    time.advance(Duration.ofMillis(9_999));
    assertThat(dispatcher.calls).hasSize(1);
    time.advance(Duration.ofMillis(1)); // retry.max-backoff: 10 s

    assertThat(dispatcher.calls).hasSize(2);
    assertThat(f).isCompleted();
    assertThat(onlyVerdict().verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
  }

  // ------------------------------------------------------------------------- (a) OK → confirm

  @Test
  void process_reportsEachStepThatGotAnAnswer_claimThenEveryBusinessCallThenConfirm() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.retry("busy"));
    dispatcher.script.add(DispatchResult.ok());
    List<String> steps = new CopyOnWriteArrayList<>();
    GuardedProcessor timed = new GuardedProcessor(ROUTE, MACHINE, guard, dispatcher, escalator, time, backoff, new DeliveryIds("run"),
        new VerdictListener() {
          @Override
          public void onVerdict(ConsumerRecord<byte[], byte[]> r, Verdict v, boolean forwarded) {
            steps.add("verdict " + v.getDisposition());
          }

          @Override
          public void onStep(String route, Step step, long nanos) {
            assertThat(nanos).isNotNegative();
            steps.add(route + " " + step);
          }
        });

    CompletableFuture<Void> f = timed.process(ship, new Cancellation()).toCompletableFuture();
    time.advance(Duration.ofMillis(100)); // the backoff before attempt 2

    assertThat(f).isCompleted();
    assertThat(steps).containsExactly("orders CLAIM", "orders HANDLE", "orders HANDLE", "orders CONFIRM", "verdict ACCEPTED");

    // a second ship of the shipped order is refused at the claim: one step, no call
    steps.clear();
    assertThat(timed.process(record(42, "o-1", "ship"), new Cancellation()).toCompletableFuture()).isCompleted();
    assertThat(steps).containsExactly("orders CLAIM", "verdict ILLEGAL_TRANSITION_ESCALATE");
  }

  @Test
  void orderingKey_thenProcess_usesTheExtractionMadeForOrdering_theValueIsParsedOnce() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.ok());
    assertThat(processor.orderingKey(ship)).isEqualTo("e:o-1");
    // were the value parsed again, this would be a MALFORMED escalation instead
    java.util.Arrays.fill(ship.value(), (byte) '#');

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "dispatch ship", "confirm");
    assertThat(onlyVerdict().verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
  }

  @Test
  void process_timelineOn_stampsEachStepOfTheRecordInOrder_off_followsNothing() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.ok());
    RecordTimeline.polled(ship.topic(), ship.partition(), ship.offset(), ship.timestamp()); // off: not followed
    RecordTimeline.start(10, false);
    try {
      assertThat(process(ship)).isCompleted();
    } finally {
      assertThat(RecordTimeline.stop()).as("the steps stamp records the poll thread took while on only").isEmpty();
    }

    ConsumerRecord<byte[], byte[]> next = record(42, "o-2", "ship");
    store.entity("o-2", "to_ship");
    dispatcher.script.add(DispatchResult.ok());
    RecordTimeline.start(10, false);
    try {
      RecordTimeline.polled(next.topic(), next.partition(), next.offset(), next.timestamp());
      assertThat(process(next)).isCompleted();
    } finally {
      List<RecordTimeline.Trace> got = RecordTimeline.stop();
      assertThat(got).hasSize(1);
      RecordTimeline.Trace t = got.get(0);
      long prev = 0;
      for (RecordTimeline.Mark m : List.of(RecordTimeline.Mark.POLLED, RecordTimeline.Mark.L1_START, RecordTimeline.Mark.L1_END,
          RecordTimeline.Mark.CLAIM_BACK, RecordTimeline.Mark.CALL_START, RecordTimeline.Mark.CALL_END, RecordTimeline.Mark.CALL_BACK,
          RecordTimeline.Mark.CONFIRM_BACK, RecordTimeline.Mark.VERDICT)) {
        assertThat(t.has(m)).as(m.name()).isTrue();
        assertThat(t.at(m)).as(m.name()).isGreaterThanOrEqualTo(prev);
        prev = t.at(m);
      }
      assertThat(t.has(RecordTimeline.Mark.CLAIM_SUBMIT)).as("the fake store has no groups").isFalse();
      assertThat(t.repeats()).isZero();
    }
  }

  @Test
  void process_businessOk_confirmsAndTellsAccepted() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "dispatch ship", "confirm");
    Told t = onlyVerdict();
    assertThat(t.verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(t.forwarded()).isTrue();
    Delivery d = dispatcher.calls.get(0);
    assertThat(d.getFromState()).isEqualTo("to_ship");
    assertThat(d.getToState()).isEqualTo("shipped");
    assertThat(d.getEntityId()).isEqualTo("o-1");
    assertThat(d.getAttempt()).isEqualTo(1);
    assertThat(d.getRedelivery()).isFalse();
    assertThat(d.getDedupKey()).isEqualTo(OrderRoute.extracted(ship).dedupKey());
    assertThat(store.entityRow("o-1").state).isEqualTo("shipped");
    assertThat(store.entityRow("o-1").pendingKey).isNull();
    assertThat(store.decisions).isEmpty();
    assertThat(escalator.escalations).isEmpty();
    assertThat(time.pendingDelays()).as("lease renewal stopped").isZero();
  }

  // ------------------------------------------------------------------------- (b) REJECT → abort, escalate

  @Test
  void process_businessRejects_abortsAsSeenAndEscalatesBusinessRejected() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.reject("no such warehouse"));

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "dispatch ship", "abort maySeen=true");
    assertThat(store.entityRow("o-1").state).isEqualTo("to_ship");
    assertThat(store.entityRow("o-1").pendingKey).isNull();
    assertThat(escalator.escalations).singleElement().satisfies(e -> {
      assertThat(e.topic()).isEqualTo(ROUTE.outputs().escalationTopic());
      assertThat(e.offset()).isEqualTo(41);
      assertThat(e.verdict().getDisposition()).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
      assertThat(e.verdict().getLayer()).isEqualTo(Layer.BUSINESS);
      assertThat(e.verdict().getReason()).isEqualTo(Reason.BUSINESS_REJECTED);
      assertThat(e.verdict().getCurrentState()).isEqualTo("to_ship");
      assertThat(e.verdict().getDetail()).contains("no such warehouse");
    });
    Told t = onlyVerdict();
    assertThat(t.verdict().getReason()).isEqualTo(Reason.BUSINESS_REJECTED);
    assertThat(t.forwarded()).isFalse();
    assertThat(store.decisions).extracting(Verdict::getReason).containsExactly(Reason.BUSINESS_REJECTED);
  }

  @Test
  void process_businessRejects_butTheClaimWasTakenOverMeanwhile_notEscalated_theNewOwnerDecides() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.reject("no such warehouse"));
    store.aborts.add(reply(false));

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(escalator.escalations).isEmpty();
    Told t = onlyVerdict();
    assertThat(t.verdict().getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(t.verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
  }

  // ------------------------------------------------------------------------- (c) lease lost while forwarding

  @Test
  void process_leaseLostWhileBusinessRetries_stopsWithoutConfirmingAsInFlight() {
    store.entity("o-1", "to_ship");
    store.renews.add(reply(false));

    CompletableFuture<Void> f = process(ship);
    time.advance(ROUTE.timings().lease().dividedBy(3));
    assertThat(store.count("renew")).isEqualTo(1);
    dispatcher.answer(DispatchResult.retry("deadline exceeded"));
    time.advance(Duration.ofMillis(100));

    assertThat(f).isCompleted();
    assertThat(dispatcher.calls).as("never forwarded on a lost lease").hasSize(1);
    assertThat(store.count("confirm")).isZero();
    assertThat(store.count("abort")).isZero();
    Told t = onlyVerdict();
    assertThat(t.verdict().getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(t.verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(t.forwarded()).isFalse();
    assertThat(time.pendingDelays()).isZero();
  }

  @Test
  void process_leaseLostThenBusinessOk_confirmRefusedCompletesAsInFlight() {
    store.entity("o-1", "to_ship");
    store.renews.add(reply(false));

    CompletableFuture<Void> f = process(ship);
    time.advance(ROUTE.timings().lease().dividedBy(3));
    dispatcher.answer(DispatchResult.ok());

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "dispatch ship", "renew", "confirm");
    assertThat(store.entityRow("o-1").pendingKey).as("not confirmed: the new owner finishes it").isNotNull();
    Told t = onlyVerdict();
    assertThat(t.verdict().getDisposition()).isEqualTo(Disposition.DUPLICATE_IGNORE);
    assertThat(t.verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
    assertThat(t.forwarded()).isFalse();
  }

  // ------------------------------------------------------------------------- (d) renewal failure → reclaim

  @Test
  void process_renewalBeforeCallFailsWithStoreOutage_claimsAgainAndTakesOwnClaimBack() {
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.Claimed("to_ship", cmd.nowMillis() + 1_000, 1, false)));
    store.renews.add(failure(outage()));
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.LedgerConflict(ourLiveRow(cmd))));
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isNotDone();
    assertThat(store.calls).containsExactly("claim", "renew");
    assertThat(processor.storeFailures()).isEqualTo(1);
    time.advance(Duration.ofMillis(100));

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "renew", "claim", "takeOver force=true", "dispatch ship", "confirm");
    assertThat(dispatcher.calls).hasSize(1);
    assertThat(onlyVerdict().verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
  }

  // ------------------------------------------------------------------------- (e) lease margin

  @Test
  void process_leaseWithinMargin_renewsBeforeCallingTheBusiness() {
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.Claimed("to_ship", cmd.nowMillis() + 1_500, 1, false)));
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "renew", "dispatch ship", "confirm");
    assertThat(onlyVerdict().verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
  }

  @Test
  void process_leaseBeyondMargin_callsTheBusinessWithoutRenewing() {
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.Claimed("to_ship", cmd.nowMillis() + 2_500, 1, false)));
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(store.calls).containsExactly("claim", "dispatch ship", "confirm");
  }

  @Test
  void process_leaseWithinMarginAndRenewalRefused_abandonsAsInFlightWithoutCalling() {
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.Claimed("to_ship", cmd.nowMillis() + 1_500, 1, false)));
    store.renews.add(reply(false));

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(dispatcher.calls).isEmpty();
    assertThat(store.calls).containsExactly("claim", "renew");
    assertThat(onlyVerdict().verdict().getReason()).isEqualTo(Reason.IN_FLIGHT);
  }

  // ------------------------------------------------------------------------- (f) cancellation before dispatch

  @Test
  void process_cancelledBetweenClaimAndDispatch_undoesClaimAsUnseen() {
    CompletableFuture<ClaimOutcome> claimed = new CompletableFuture<>();
    store.claims.add(hold(claimed));
    Cancellation cancel = new Cancellation();

    CompletableFuture<Void> f = processor.process(ship, cancel).toCompletableFuture();
    cancel.cancel();
    claimed.complete(new ClaimOutcome.Claimed("to_ship", T0 + 30_000, 1, false));

    assertThatThrownBy(f::join).hasCauseInstanceOf(CancelledException.class);
    assertThat(dispatcher.calls).isEmpty();
    assertThat(store.calls).containsExactly("claim", "abort maySeen=false");
    assertThat(told).isEmpty();
    assertThat(escalator.escalations).isEmpty();
  }

  @Test
  void process_takeoverCancelledBeforeDispatch_keepsTheRowAndOnlyEndsItsLease_soTheNextDeliveryIsFlagged() {
    // the claim is a takeover (an earlier owner may have sent the record to the business): undoing
    // it would delete the ledger row, and the next owner would deliver it as a first delivery
    CompletableFuture<ClaimOutcome> claimed = new CompletableFuture<>();
    store.claims.add(hold(claimed));
    Cancellation cancel = new Cancellation();

    CompletableFuture<Void> f = processor.process(ship, cancel).toCompletableFuture();
    cancel.cancel();
    claimed.complete(new ClaimOutcome.Claimed("to_ship", T0 + 30_000, 2, true));

    assertThatThrownBy(f::join).hasCauseInstanceOf(CancelledException.class);
    assertThat(dispatcher.calls).isEmpty();
    assertThat(store.calls).as("no abort: the row stays").containsExactly("claim", "renew");
    assertThat(store.lastRenewMillis).as("the lease ends now, for the next owner to take over at once").isZero();
  }

  @Test
  void process_cancelledWhileBusinessCallRuns_keepsClaimForRedelivery() {
    store.entity("o-1", "to_ship");
    Cancellation cancel = new Cancellation();

    CompletableFuture<Void> f = processor.process(ship, cancel).toCompletableFuture();
    cancel.cancel();

    assertThatThrownBy(f::join).hasCauseInstanceOf(CancelledException.class);
    assertThat(dispatcher.pending.get(0)).isCancelled();
    assertThat(store.count("abort")).as("the business may have seen it: the lease runs out instead").isZero();
    assertThat(store.count("confirm")).isZero();
    assertThat(told).isEmpty();
  }

  // ------------------------------------------------------------------------- (g) reorder window

  @Test
  void process_earlyArrivalParks_laterRecordThatKeepsItApplicableGoesFirst_thenParkedOneSucceeds() {
    store.entity("o-1", "to_ship");
    ConsumerRecord<byte[], byte[]> deliver = record(10, "o-1", "deliver");
    ConsumerRecord<byte[], byte[]> shipLater = record(11, "o-1", "ship");
    RecordingSlot deliverSlot = new RecordingSlot();
    RecordingSlot shipSlot = new RecordingSlot();
    dispatcher.script.add(DispatchResult.ok());
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> fDeliver = processor.process(deliver, new Cancellation(), deliverSlot).toCompletableFuture();

    assertThat(fDeliver).isNotDone();
    assertThat(deliverSlot.parks).isEqualTo(1);
    assertThat(dispatcher.calls).isEmpty();

    CompletableFuture<Void> fShip = processor.process(shipLater, new Cancellation(), shipSlot).toCompletableFuture();

    assertThat(fShip).isCompleted();
    assertThat(shipSlot.parks).isZero();
    assertThat(fDeliver).isNotDone();

    deliverSlot.nudge.run(); // what the pipeline does when a record of the entity finishes

    assertThat(fDeliver).isCompleted();
    assertThat(deliverSlot.unparks).isEqualTo(1);
    assertThat(dispatcher.calls).extracting(Delivery::getEvent).containsExactly("ship", "deliver");
    assertThat(store.entityRow("o-1").state).isEqualTo("delivered");
    assertThat(told).extracting(Told::offset).containsExactly(11L, 10L);
    assertThat(told).extracting(t -> t.verdict().getDisposition()).containsOnly(Disposition.ACCEPTED);
    assertThat(time.pendingDelays()).isZero();
  }

  /**
   * The pipeline's side of the reorder window as {@code RouteConsumer} plays it, on one serial
   * context standing for its poll thread: a {@link KeyOrderedScheduler} asking the processor's
   * {@link GuardedProcessor#mayOvertake}, slots that park and unpark in it, and nudges for the
   * parked records of a key when one of its records finishes.
   */
  private final class Window {
    final List<Throwable> failures = new CopyOnWriteArrayList<>();
    final SerialExecutor poll = new SerialExecutor(failures::add);
    final KeyOrderedScheduler<ConsumerRecord<byte[], byte[]>> scheduler =
        new KeyOrderedScheduler<>(ROUTE.intake().reorderWindow(), processor::mayOvertake);
    final Map<Long, Runnable> nudges = new HashMap<>();
    final Map<Long, CompletableFuture<Void>> stages = new HashMap<>();
    final List<Long> started = new CopyOnWriteArrayList<>();

    CompletableFuture<Void> submit(ConsumerRecord<byte[], byte[]> r) {
      CompletableFuture<Void> f = new CompletableFuture<>();
      poll.execute(() -> {
        stages.put(r.offset(), f);
        scheduler.submit(processor.orderingKey(r), r.offset(), r);
        startReady();
      });
      return f;
    }

    private void startReady() {
      while (scheduler.hasReady()) {
        ConsumerRecord<byte[], byte[]> r = scheduler.next();
        String key = processor.orderingKey(r);
        long offset = r.offset();
        started.add(offset);
        OrderSlot slot = new OrderSlot() {
          @Override
          public void park(Runnable nudge) {
            poll.execute(() -> {
              nudges.put(offset, nudge);
              scheduler.park(key, offset);
              startReady();
            });
          }

          @Override
          public void unpark() {
            poll.execute(() -> {
              nudges.remove(offset);
              scheduler.unpark(key, offset);
              startReady();
            });
          }
        };
        processor.process(r, new Cancellation(), slot).whenComplete((v, e) -> poll.execute(() -> {
          nudges.remove(offset);
          for (ConsumerRecord<byte[], byte[]> other : scheduler.finished(key, offset)) {
            Runnable nudge = nudges.get(other.offset());
            if (nudge != null) {
              nudge.run();
            }
          }
          startReady();
          if (e == null) {
            stages.get(offset).complete(null);
          } else {
            stages.get(offset).completeExceptionally(e);
          }
        }));
      }
    }
  }

  @Test
  void process_laterRecordThatWouldBreakTheParkedOne_isHeldBehindItUntilItTimesOut() {
    store.entity("o-1", "to_ship");
    Window window = new Window();
    dispatcher.script.add(DispatchResult.ok());

    CompletableFuture<Void> fDeliver = window.submit(record(10, "o-1", "deliver"));
    CompletableFuture<Void> fCancel = window.submit(record(11, "o-1", "cancel"));
    time.advance(Duration.ofSeconds(1));

    assertThat(window.started).as("cancelled would make the earlier deliver impossible").containsExactly(10L);
    assertThat(claimsOf("cancel")).isZero();
    assertThat(fCancel).isNotDone();

    time.advance(ROUTE.timings().earlyArrivalTimeout());

    assertThat(fDeliver).isCompleted();
    assertThat(escalator.escalations).singleElement()
        .satisfies(e -> assertThat(e.verdict().getReason()).isEqualTo(Reason.OUT_OF_ORDER));
    assertThat(fCancel).isCompleted();
    assertThat(dispatcher.calls).extracting(Delivery::getEvent).containsExactly("cancel");
    assertThat(store.entityRow("o-1").state).isEqualTo("cancelled");
    assertThat(window.failures).isEmpty();
  }

  @Test
  void mayOvertake_onlyARecordWhoseTargetStillLeadsToTheParkedRecordsFromState() {
    ConsumerRecord<byte[], byte[]> deliver = record(10, "o-1", "deliver");
    // ship's target is deliver's from-state; prepare's target leads to it; cancel's never does
    assertThat(processor.mayOvertake(deliver, record(11, "o-1", "ship"))).isTrue();
    assertThat(processor.mayOvertake(deliver, record(11, "o-1", "prepare"))).isTrue();
    assertThat(processor.mayOvertake(deliver, record(11, "o-1", "cancel"))).isFalse();
    assertThat(processor.mayOvertake(record(10, "o-1", "ship"), record(11, "o-1", "cancel"))).isFalse();
    // an unreadable record is escalated, never applied: no order to keep
    assertThat(processor.mayOvertake(deliver, record(11, "o-1", "no-such-event"))).isTrue();
    // the answer comes from the records alone: asking does not touch the store
    assertThat(store.calls).isEmpty();
  }

  /** A {@code deliver} that arrived before its {@code ship}, waiting; 1 s of it has passed. */
  private CompletableFuture<Void> earlyDeliverWaiting() {
    store.entity("o-1", "to_ship");
    CompletableFuture<Void> f = processor.process(record(10, "o-1", "deliver"), new Cancellation(), new RecordingSlot())
        .toCompletableFuture();
    time.advance(Duration.ofSeconds(1));
    assertThat(f).isNotDone();
    return f;
  }

  /** The store refuses every claim for {@code d}, then answers again for 11 s (this test's backoff retries every 100 ms). */
  private void claimOutage(Duration d) {
    synchronized (store) {
      store.claimsDown = true;
    }
    time.advance(d);
    synchronized (store) {
      store.claimsDown = false;
    }
    time.advance(Duration.ofSeconds(11));
  }

  @Test
  void process_earlyArrivalWaitsThroughAStoreOutageLongerThanItsTimeout_notEscalated_appliedOnceItsPredecessorIs() {
    CompletableFuture<Void> fDeliver = earlyDeliverWaiting();
    dispatcher.script.add(DispatchResult.ok());
    dispatcher.script.add(DispatchResult.ok());

    claimOutage(ROUTE.timings().earlyArrivalTimeout().plusSeconds(10));

    assertThat(processor.storeFailures()).as("the outage was met by the waiting record's claims").isPositive();
    assertThat(fDeliver).as("an outage does not count towards the early-arrival timeout").isNotDone();
    assertThat(escalator.escalations).isEmpty();

    CompletableFuture<Void> fShip = process(record(11, "o-1", "ship"));
    time.advance(Duration.ofMillis(200));

    assertThat(fShip).isCompleted();
    assertThat(fDeliver).isCompleted();
    assertThat(escalator.escalations).isEmpty();
    assertThat(dispatcher.calls).extracting(Delivery::getEvent).containsExactly("ship", "deliver");
    assertThat(store.entityRow("o-1").state).isEqualTo("delivered");
  }

  @Test
  void process_earlyArrivalAfterAStoreOutage_stillTimesOutOnceTheTimeTheStoreAnsweredReachesTheTimeout() {
    CompletableFuture<Void> fDeliver = earlyDeliverWaiting();
    claimOutage(Duration.ofSeconds(30)); // 1 s before it and 11 s after it: about 12 s of the 60 s counted

    time.advance(ROUTE.timings().earlyArrivalTimeout().minusSeconds(12 + 1));
    assertThat(fDeliver).as("1 s of answered waiting is left").isNotDone();

    time.advance(Duration.ofSeconds(2));
    assertThat(fDeliver).isCompleted();
    assertThat(escalator.escalations).singleElement()
        .satisfies(e -> assertThat(e.verdict().getReason()).isEqualTo(Reason.OUT_OF_ORDER));
    assertThat(dispatcher.calls).isEmpty();
  }

  @Test
  void process_recordWaitingBehindAParkedOne_throughAnOutageLongerThanTheTimeout_stillDoesNotGoFirst() {
    store.entity("o-1", "paid");
    Window window = new Window();
    // ship waits for prepare; cancel behind it would make ship impossible, so it is held behind ship
    CompletableFuture<Void> fShip = window.submit(record(10, "o-1", "ship"));
    CompletableFuture<Void> fCancel = window.submit(record(11, "o-1", "cancel"));
    time.advance(Duration.ofSeconds(1));
    dispatcher.script.add(DispatchResult.ok());
    dispatcher.script.add(DispatchResult.ok());

    claimOutage(ROUTE.timings().earlyArrivalTimeout().plusSeconds(10));

    assertThat(claimsOf("cancel")).as("cancel still waits behind ship: the outage did not count").isZero();
    assertThat(fShip).isNotDone();
    assertThat(fCancel).isNotDone();

    // prepare keeps both ship and cancel applicable: it overtakes them
    CompletableFuture<Void> fPrepare = window.submit(record(12, "o-1", "prepare"));
    time.advance(Duration.ofSeconds(1));

    assertThat(fPrepare).isCompleted();
    assertThat(fShip).isCompleted();
    assertThat(fCancel).isCompleted();
    assertThat(dispatcher.calls).extracting(Delivery::getEvent).containsExactly("prepare", "ship");
    assertThat(escalator.escalations).singleElement()
        .satisfies(e -> assertThat(e.verdict().getReason()).isEqualTo(Reason.ILLEGAL_TRANSITION));
    assertThat(store.entityRow("o-1").state).isEqualTo("shipped");
    assertThat(window.started).containsExactly(10L, 12L, 11L);
    assertThat(window.failures).isEmpty();
  }

  @Test
  void outageClock_countsFromTheFirstFailedClaimToTheNextAnsweredOne_neverBeforeAnAnswerSeenMeanwhile() {
    GuardedProcessor.OutageClock c = new GuardedProcessor.OutageClock();
    c.answered(100);
    assertThat(c.total(500)).isZero();

    c.failed(200);
    c.failed(300); // the same outage
    assertThat(c.total(1_200)).isEqualTo(1_000);
    c.answered(1_200);
    assertThat(c.total(5_000)).isEqualTo(1_000);

    // a claim sent at 4,000 that hung until it failed, while another was answered at 4,500
    c.answered(4_500);
    c.failed(4_000);
    c.answered(6_500);
    assertThat(c.total(9_000)).isEqualTo(1_000 + 2_000);
  }

  private long claimsOf(String event) {
    synchronized (store) {
      return store.claimCommands.stream().filter(c -> c.extracted().event().equals(event)).count();
    }
  }

  // ------------------------------------------------------------------------- (h) contention on confirm

  @Test
  void process_confirmLosesRacesBeyondTheGuardsRetries_retriedAtOnceWithoutCountingAStoreFailure() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.ok());
    for (int i = 0; i < Guard.MAX_CONTENTION_RETRIES; i++) {
      store.confirms.add(failure(contention()));
    }

    CompletableFuture<Void> f = process(ship);
    assertThat(f).isNotDone();
    time.advance(Duration.ofSeconds(1));

    assertThat(f).isCompleted();
    assertThat(store.count("confirm")).isEqualTo(Guard.MAX_CONTENTION_RETRIES + 1);
    assertThat(dispatcher.calls).as("only the confirm is retried").hasSize(1);
    assertThat(processor.storeFailures()).isZero();
    assertThat(guard.contentionRetries()).isEqualTo(Guard.MAX_CONTENTION_RETRIES);
    Told t = onlyVerdict();
    assertThat(t.verdict().getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(t.forwarded()).isTrue();
  }

  @Test
  void process_confirmFailsWithStoreOutage_retriedAfterBackoffAndCounted() {
    store.entity("o-1", "to_ship");
    dispatcher.script.add(DispatchResult.ok());
    store.confirms.add(failure(outage()));

    CompletableFuture<Void> f = process(ship);
    assertThat(f).isNotDone();
    assertThat(processor.storeFailures()).isEqualTo(1);
    time.advance(Duration.ofMillis(100));

    assertThat(f).isCompleted();
    assertThat(store.count("confirm")).isEqualTo(2);
    assertThat(dispatcher.calls).hasSize(1);
    assertThat(onlyVerdict().forwarded()).isTrue();
  }

  // ------------------------------------------------------------------------- other ends

  @Test
  void process_unreadableRecord_escalatedWithoutTouchingTheStore() {
    ConsumerRecord<byte[], byte[]> bad = new ConsumerRecord<>("orders", 0, 5, null, "{not json".getBytes(java.nio.charset.StandardCharsets.UTF_8));

    CompletableFuture<Void> f = process(bad);

    assertThat(f).isCompleted();
    assertThat(store.calls).isEmpty();
    assertThat(escalator.escalations).singleElement()
        .satisfies(e -> assertThat(e.verdict().getReason()).isEqualTo(Reason.MALFORMED));
  }

  @Test
  void process_illegalTransition_escalatedWithoutCallingTheBusiness() {
    store.entity("o-1", "cancelled");

    CompletableFuture<Void> f = process(ship);

    assertThat(f).isCompleted();
    assertThat(dispatcher.calls).isEmpty();
    assertThat(escalator.escalations).singleElement()
        .satisfies(e -> assertThat(e.verdict().getReason()).isEqualTo(Reason.ILLEGAL_TRANSITION));
    assertThat(store.decisions).extracting(Verdict::getReason).containsExactly(Reason.ILLEGAL_TRANSITION);
  }
}
