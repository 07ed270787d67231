package dev.onceguard.bench.contention;

import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.GuardStore.ClaimCommand;
import dev.onceguard.proxy.store.Source;
import java.util.PriorityQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * Transitions the way the sidecar makes them: the claim (BEGIN, ledger INSERT, the entity's CAS,
 * COMMIT: the entity is marked pending and no lock is held after the COMMIT), the business call,
 * the confirm (one UPDATE). A claim whose CAS is lost (another instance's transition is between
 * claim and confirm) is parked for the route's {@code early-arrival-retry} and claimed again, as
 * the pipeline parks a record whose entity is busy, while the instance goes on with new records.
 * One thread: one claim, business call or confirm at a time, like a one-record-at-a-time consumer.
 * Owns its {@link ClaimSide}.
 */
final class ClaimLoop implements Transitions {
  private final ClaimSide side;
  private final int instance;
  private final int cell;
  private final int entities;
  private final int holdMs;
  private final long retryNanos;

  ClaimLoop(ClaimSide side, int instance, int cell, int entities, int holdMs) {
    this.side = side;
    this.instance = instance;
    this.cell = cell;
    this.entities = entities;
    this.holdMs = holdMs;
    this.retryNanos = side.earlyArrivalRetry().toNanos();
  }

  /** A transition until its claim is accepted: when it began, when it may be tried again, how often its CAS was lost. */
  private static final class Attempt {
    final int seq;
    final int entity;
    final long startNanos;
    long dueNanos;
    int lost;

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
        if (side.contentionRetries() > 0) {
          System.err.printf("[contention] instance %d, cell %d: %d store steps run again after a lost race%n", instance, cell,
              side.contentionRetries());
        }
        return rec.samples();
      }
      ClaimCommand cmd = side.command(a.entity, "update", instance + "-" + cell + "-" + a.seq, new Source(ClaimSide.ROUTE, instance, a.seq));
      ClaimOutcome o = side.claim(cmd);
      if (o instanceof ClaimOutcome.Claimed c) {
        long claimed = System.nanoTime();
        ClaimSide.businessCall(holdMs);
        if (!side.confirm(side.claimOf(cmd, c))) {
          throw new IllegalStateException("claim of " + cmd.extracted().entityId() + " lost before its confirm");
        }
        rec.add(a.startNanos, System.nanoTime() - a.startNanos, claimed - a.startNanos, a.lost > 0);
      } else if (o instanceof ClaimOutcome.CasLost) {
        a.lost++;
        a.dueNanos = System.nanoTime() + retryNanos;
        parked.add(a);
      } else {
        throw new IllegalStateException("unexpected claim outcome for entity " + cmd.extracted().entityId() + ": " + o);
      }
    }
  }

  @Override
  public void close() {
    side.close();
  }
}
