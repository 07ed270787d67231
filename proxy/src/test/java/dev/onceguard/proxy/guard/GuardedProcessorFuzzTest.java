package dev.onceguard.proxy.guard;

import static dev.onceguard.proxy.guard.OrderRoute.MACHINE;
import static dev.onceguard.proxy.guard.OrderRoute.OWNER;
import static dev.onceguard.proxy.guard.OrderRoute.ROUTE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.extract.NastyInput;
import dev.onceguard.proxy.extract.NastyInput.Nasty;
import dev.onceguard.proxy.pipeline.Cancellation;
import dev.onceguard.proxy.pipeline.DeliveryIds;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Assertions;

/**
 * Fuzzed input through the whole {@link GuardedProcessor} (extract → guard → forward → escalate)
 * over the in-memory store, a business that accepts everything and a recording escalator, as the
 * pipeline drives it ({@code orderingKey} on the poll thread, then {@code process}). Fixed seeds
 * and bounded tries: a few seconds in {@code make test}; every try has a wall-clock bound.
 *
 * <p>Properties: every record ends in exactly one verdict, and one that is not accepted carries a
 * reason and a detail and reached the escalation topic; nothing escapes as an exception; a record
 * the route cannot read creates no entity and is not forwarded; a valid record among garbage in
 * the same partition is still accepted and forwarded once.
 */
class GuardedProcessorFuzzTest {
  private static final Duration PER_TRY = Duration.ofSeconds(20);

  /** One processor over fresh fakes; records go to partition 0 at increasing offsets. */
  private static final class Harness {
    final FakeTime time = new FakeTime(1_000_000L);
    final FakeGuardStore store = new FakeGuardStore();
    final FakeDispatcher dispatcher = new FakeDispatcher(store.calls);
    final FakeEscalator escalator = new FakeEscalator();
    final List<Verdict> verdicts = new CopyOnWriteArrayList<>();
    final List<Long> forwardedOffsets = new CopyOnWriteArrayList<>();
    final GuardedProcessor processor;
    long nextOffset;

    Harness() {
      for (int i = 0; i < 100; i++) {
        dispatcher.script.add(DispatchResult.ok()); // the business takes whatever reaches it
      }
      Guard guard = new Guard(store, IdempotencyCache.DISABLED, Map.of("order", MACHINE), time, OWNER, time);
      Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), new Random(1));
      processor = new GuardedProcessor(ROUTE, MACHINE, guard, dispatcher, escalator, time, backoff, new DeliveryIds("fuzz"),
          (r, v, forwarded) -> {
            verdicts.add(v);
            if (forwarded) {
              forwardedOffsets.add(r.offset());
            }
          });
    }

    /** Runs one record to its end, advancing fake time past any wait; the verdict it got. */
    Verdict run(Nasty n) {
      ConsumerRecord<byte[], byte[]> r = new ConsumerRecord<>("orders", 0, nextOffset++, -1L, TimestampType.CREATE_TIME,
          n.key() == null ? -1 : n.key().length, n.value() == null ? -1 : n.value().length, n.key(), n.value(), n.headers(),
          Optional.empty());
      int before = verdicts.size();
      CompletableFuture<Void> done = Assertions.assertTimeoutPreemptively(PER_TRY, () -> {
        processor.orderingKey(r);
        CompletableFuture<Void> f = processor.process(r, new Cancellation()).toCompletableFuture();
        // an early arrival waits up to the route's early-arrival-timeout (60 s) of fake time
        for (int i = 0; i < 200 && !f.isDone(); i++) {
          time.advance(Duration.ofSeconds(1));
        }
        return f;
      }, () -> "no end within " + PER_TRY + " for " + n);
      assertThat(done).as("%s completes normally", n).isCompletedWithValue(null);
      assertThat(verdicts).as("exactly one verdict for %s", n).hasSize(before + 1);
      return verdicts.get(before);
    }
  }

  @Provide
  Arbitrary<Nasty> bad() {
    return NastyInput.badRecords();
  }

  @Provide
  Arbitrary<Nasty> any() {
    return NastyInput.anyRecords();
  }

  @Provide
  Arbitrary<List<Nasty>> garbage() {
    return Arbitraries.randomValue(r -> {
      List<Nasty> l = new ArrayList<>();
      for (int i = r.nextInt(8); i > 0; i--) {
        l.add(NastyInput.bad(r));
      }
      return l;
    });
  }

  /** A record the route cannot read is escalated with its reason; no entity, no business call. */
  @Property(tries = 300, seed = "20261201", shrinking = ShrinkingMode.OFF)
  void unreadableRecord_isEscalatedWithAReason_andCreatesNothing(@ForAll("bad") Nasty n) {
    Harness h = new Harness();

    Verdict v = h.run(n);

    assertEscalated(h, v, n);
    assertThat(v.getReason()).as("%s", n).isIn(Reason.MALFORMED, Reason.MISSING_FIELD, Reason.UNKNOWN_EVENT);
    assertThat(h.store.entities).as("no entity from %s", n).isEmpty();
    assertThat(h.store.calls).as("no claim and no business call for %s", n).isEmpty();
    assertThat(h.dispatcher.calls).isEmpty();
  }

  /** Whatever comes, it ends in one verdict; only an accepted record reached the business. */
  @Property(tries = 300, seed = "20261202", shrinking = ShrinkingMode.OFF)
  void anyRecord_endsInOneVerdict_andOnlyAnAcceptedOneIsForwarded(@ForAll("any") Nasty n) {
    Harness h = new Harness();

    Verdict v = h.run(n);

    if (v.getDisposition() == Disposition.ACCEPTED) {
      assertThat(h.forwardedOffsets).as("%s", n).containsExactly(0L);
      assertThat(h.store.entities).as("%s", n).containsOnlyKeys(v.getEntityId());
      assertThat(h.escalator.escalations).isEmpty();
    } else {
      assertEscalated(h, v, n);
      assertThat(h.store.entities).as("no entity from %s", n).isEmpty();
      assertThat(h.dispatcher.calls).as("%s", n).isEmpty();
    }
  }

  /** Garbage before and after a valid record in its partition does not keep it from being applied. */
  @Property(tries = 60, seed = "20261203", shrinking = ShrinkingMode.OFF)
  void validRecordAmongGarbage_isAccepted_andEveryBadOneEscalated(@ForAll("garbage") List<Nasty> before,
      @ForAll("garbage") List<Nasty> after) {
    Harness h = new Harness();
    before.forEach(h::run);
    long validOffset = h.nextOffset;
    Verdict valid = h.run(new Nasty("valid", "o-ok".getBytes(), NastyInput.order("o-ok", "create"), List.of()));
    after.forEach(h::run);

    assertThat(valid.getDisposition()).isEqualTo(Disposition.ACCEPTED);
    assertThat(h.forwardedOffsets).containsExactly(validOffset);
    assertThat(h.store.entities).containsOnlyKeys("o-ok");
    assertThat(h.escalator.escalations).hasSize(before.size() + after.size());
    assertThat(h.escalator.escalations).allSatisfy(e -> assertThat(e.verdict().getReason()).isNotEqualTo(Reason.NONE));
  }

  /** Each kind of bad record at least once, whatever the random draw above picked. */
  @Example
  void everyKindOfBadRecord_isEscalated() {
    Random r = new Random(7);
    for (int i = 0; i < NastyInput.badKinds(); i++) {
      Nasty n = NastyInput.bad(i, r);
      Harness h = new Harness();
      Verdict v = h.run(n);
      assertEscalated(h, v, n);
      assertThat(h.store.entities).as("no entity from %s", n).isEmpty();
    }
  }

  private static void assertEscalated(Harness h, Verdict v, Nasty n) {
    assertThat(v.getDisposition()).as("%s", n).isEqualTo(Disposition.ILLEGAL_TRANSITION_ESCALATE);
    assertThat(v.getReason()).as("%s", n).isNotEqualTo(Reason.NONE);
    assertThat(v.getDetail()).as("%s", n).isNotBlank();
    assertThat(h.escalator.escalations).as("%s reached the escalation topic", n).hasSize(1);
    assertThat(h.escalator.escalations.get(0).verdict()).isEqualTo(v);
    assertThat(h.escalator.escalations.get(0).topic()).isEqualTo(ROUTE.outputs().escalationTopic());
    assertThat(h.forwardedOffsets).as("%s", n).isEmpty();
  }
}
