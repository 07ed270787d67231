package dev.onceguard.bench.contention;

import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.store.Source;
import java.util.PriorityQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Transitions the way the sidecar makes them: {@code Guard.claimInStore} (BEGIN, ledger INSERT,
 * CAS on the entity, COMMIT: the entity is marked pending, no lock is held after the COMMIT), the
 * business call, {@code Guard.confirm} (one UPDATE). A claim that finds the entity busy (another
 * instance's transition between claim and confirm) is answered {@code Wait(ENTITY_BUSY)}; as in
 * the sidecar's pipeline the record is parked until the wait's retry time (the route's
 * {@code early-arrival-retry}) and claimed again, while the instance goes on with new records.
 * One thread: one claim, business call or confirm at a time, like a one-record-at-a-time consumer.
 */
final class ClaimLoop implements Transitions {
  private static final long STEP_TIMEOUT_SECONDS = 60;

  private final ClaimSide side;
  private final int instance;
  private final int cell;
  private final int entities;
  private final int holdMs;

  ClaimLoop(ClaimSide side, int instance, int cell, int entities, int holdMs) {
    this.side = side;
    this.instance = instance;
    this.cell = cell;
    this.entities = entities;
    this.holdMs = holdMs;
  }

  /** A transition until its claim is accepted: when it began, when it may be tried again, how often it met a busy entity. */
  private static final class Attempt {
    final int seq;
    final int entity;
    final long startNanos;
    long dueNanos;
    int busy;

    Attempt(int seq, int entity, long startNanos) {
      this.seq = seq;
      this.entity = entity;
      this.startNanos = startNanos;
    }
  }

  @Override
  public Samples run(Recorder rec) throws Exception {
    PriorityQueue<Attempt> parked = new PriorityQueue<>((a, b) -> Long.compare(a.dueNanos, b.dueNanos));
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    int seq = 0;
    while (true) {
      long now = System.nanoTime();
      Attempt head = parked.peek();
      Attempt a;
      if (head != null && head.dueNanos <= now) {
        a = parked.poll();
      } else if (rec.open(now)) {
        a = new Attempt(seq++, rnd.nextInt(entities), now);
      } else if (head != null) { // the window is over: finish the parked ones, start nothing new
        TimeUnit.NANOSECONDS.sleep(head.dueNanos - now);
        continue;
      } else {
        return rec.samples();
      }
      String fact = instance + "-" + cell + "-" + a.seq;
      ClaimResult r = side.guard().claimInStore(side.route(), side.event(a.entity, "update", fact), new Source(ClaimSide.ROUTE, instance, a.seq))
          .toCompletableFuture().get(STEP_TIMEOUT_SECONDS, TimeUnit.SECONDS);
      if (r instanceof ClaimResult.Accepted acc) {
        long claimed = System.nanoTime();
        ClaimSide.businessCall(holdMs);
        if (!side.guard().confirm(side.route(), acc.claim(), false).toCompletableFuture().get(STEP_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
          throw new IllegalStateException("claim lost before its confirm: " + acc.claim());
        }
        rec.add(a.startNanos, System.nanoTime() - a.startNanos, claimed - a.startNanos, a.busy > 0);
      } else if (r instanceof ClaimResult.Wait w && w.kind() == ClaimResult.Wait.Kind.ENTITY_BUSY) {
        a.busy++;
        long waitMs = Math.max(0, w.retryAtMillis() - side.guard().clock().nowMillis());
        a.dueNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(waitMs);
        parked.add(a);
      } else {
        throw new IllegalStateException("unexpected claim result for entity " + ClaimSide.entityId(a.entity) + ": " + r);
      }
    }
  }

  @Override
  public void close() {
    side.close();
  }
}
