package dev.onceguard.it.faults;

import dev.onceguard.it.faults.Fault.Call;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * One run of the fault model: virtual time shared by every sidecar instance of the run, the
 * numbering of calls, the schedule of faults, and what the outside world saw (the business's
 * deliveries, the escalation and verdict topics).
 *
 * <p><b>Determinism.</b> A run processes one record at a time, and a record's steps follow each
 * other, so exactly one chain of calls is in progress whatever thread it continues on. Timers fire
 * only when nothing is in progress ({@link #runUntil}), earliest first, so the numbering of calls
 * and the order of events depend on the schedule alone, not on thread timing.
 *
 * <p><b>Time.</b> Leases and owner liveness are judged by the database's clock in the store's
 * statements. When virtual time moves by Δ, every lease, pending and heartbeat deadline in the
 * run's tables moves back by Δ, so the database sees the same time pass as the sidecar.
 */
final class World implements Clock {
  /** Beyond this, a run whose work never goes quiet counts as hung (a real-time bound). */
  private static final long QUIET_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);

  final Db db;
  final String prefix;
  final Map<Integer, Fault> plan;
  final Business business;
  private final AtomicLong now;
  private final AtomicInteger outstanding = new AtomicInteger();
  private final PriorityQueue<Timer> timers = new PriorityQueue<>();
  private long timerSeq;
  /** Every numbered call, in order: "#n CALL instance detail". */
  final List<String> trace = Collections.synchronizedList(new ArrayList<>());
  final List<Call> calls = Collections.synchronizedList(new ArrayList<>());
  /** The order of events seen from outside (business answers, topic writes, verdicts). */
  private final AtomicLong events = new AtomicLong();
  /** Records written to the escalation topic (acknowledged or not). */
  final List<Written> escalations = Collections.synchronizedList(new ArrayList<>());
  /** Verdicts written to the verdict topic (acknowledged or not). */
  final List<Written> verdicts = Collections.synchronizedList(new ArrayList<>());
  final List<Instance> instances = new ArrayList<>();

  /** One record on a topic: which source record it is about, what it says, and when it was written. */
  record Written(long offset, dev.onceguard.v1.Verdict verdict, long seq, String instance) {}

  World(Db db, String prefix, Map<Integer, Fault> plan, Business business, long startMillis) {
    this.db = db;
    this.prefix = prefix;
    this.plan = plan;
    this.business = business;
    this.now = new AtomicLong(startMillis);
  }

  @Override
  public long nowMillis() {
    return now.get();
  }

  long nextEvent() {
    return events.incrementAndGet();
  }

  /** A timer of {@code owner}'s; it never fires once that instance died. */
  CompletableFuture<Void> timer(Instance owner, Duration d) {
    CompletableFuture<Void> f = new CompletableFuture<>();
    synchronized (timers) {
      timers.add(new Timer(now.get() + Math.max(0, d.toMillis()), timerSeq++, owner, f));
    }
    return f;
  }

  private record Timer(long at, long seq, Instance owner, CompletableFuture<Void> f) implements Comparable<Timer> {
    @Override
    public int compareTo(Timer o) {
      return at != o.at ? Long.compare(at, o.at) : Long.compare(seq, o.seq);
    }
  }

  /** Thrown by {@link #runUntil} when the run's work neither finishes nor goes quiet. */
  static final class Hung extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Hung(String what) {
      super(what);
    }
  }

  /**
   * Lets the run go on until {@code done} holds: whenever nothing is in progress, the earliest
   * timer of a live instance fires. False if nothing is left to happen before {@code done} holds,
   * or virtual time passed {@code untilMillis}.
   */
  boolean runUntil(BooleanSupplier done, long untilMillis) {
    while (true) {
      awaitQuiet();
      if (done.getAsBoolean()) {
        return true;
      }
      Timer t;
      synchronized (timers) {
        do {
          t = timers.poll();
        } while (t != null && (t.owner.dead || t.f.isDone()));
      }
      if (t == null || t.at > untilMillis) {
        return false;
      }
      if (t.at > now.get()) {
        advance(t.at - now.get());
      }
      t.f.complete(null);
    }
  }

  /** Waits until no call is in progress. */
  void awaitQuiet() {
    long deadline = System.nanoTime() + QUIET_TIMEOUT_NANOS;
    while (outstanding.get() > 0) {
      if (System.nanoTime() - deadline > 0) {
        throw new Hung(outstanding.get() + " calls still in progress after 30 s of real time");
      }
      java.util.concurrent.locks.LockSupport.parkNanos(50_000);
    }
  }

  /** Moves time on by {@code ms}, for the database too; live instances heartbeat as they would have. */
  void advance(long ms) {
    if (ms <= 0) {
      return;
    }
    now.addAndGet(ms);
    db.execute("UPDATE " + prefix + "ledger SET lease_until = lease_until - ? WHERE lease_until IS NOT NULL", ms);
    db.execute("UPDATE " + prefix + "entity SET pending_until = pending_until - ? WHERE pending_until IS NOT NULL", ms);
    db.execute("UPDATE " + prefix + "owner SET alive_until = alive_until - ?", ms);
    for (Instance i : List.copyOf(instances)) {
      if (!i.dead && now.get() - i.lastHeartbeat >= 1000) {
        i.heartbeat();
      }
    }
    awaitQuiet();
  }

  // ------------------------------------------------------------------------------ calls

  /** What a faulted call answers instead of its result. */
  interface Failures {
    Throwable failedBefore(String what);

    Throwable lostAnswer(String what);

    Throwable timedOut(String what);
  }

  /**
   * One numbered call of {@code inst}: runs {@code effect} (the real store step, the business, the
   * topic write) or not, and answers, as the schedule says for this call's number.
   *
   * @param deadline how long a hung call keeps its caller waiting
   * @param onLost for a call that is not a store step (the business): the answer given when the
   *     answer is lost or the call hangs, instead of a failure; null: fail with {@code failures}
   */
  <T> CompletionStage<T> call(Instance inst, Call kind, String detail, Supplier<CompletionStage<T>> effect, Failures failures,
      Duration deadline, Function<Fault, T> onLost) {
    if (inst.dead) {
      return new CompletableFuture<>(); // a dead process makes no calls and hears no answers
    }
    int n;
    synchronized (trace) {
      n = calls.size();
      calls.add(kind);
      trace.add("#" + n + " " + kind + " " + inst.name + " " + detail);
    }
    Fault f = plan.get(n);
    if (f != null && !kind.faults().contains(f)) {
      f = null;
    }
    if (f != null) {
      trace.set(n, trace.get(n) + "  <-- " + f);
    }
    CompletableFuture<T> out = new CompletableFuture<>();
    outstanding.incrementAndGet();
    String what = kind + " " + detail;
    if (f == null || f == Fault.REVOKE) {
      Fault fault = f;
      effect.get().whenComplete((v, e) -> {
        if (fault == Fault.REVOKE && !inst.dead) {
          inst.revoke();
        }
        answer(inst, out, v, e);
      });
      return out;
    }
    switch (f) {
      case FAIL_BEFORE -> {
        if (onLost != null) {
          answer(inst, out, onLost.apply(f), null);
        } else {
          answer(inst, out, null, failures.failedBefore(what));
        }
      }
      case CRASH_BEFORE -> {
        inst.crash();
        outstanding.decrementAndGet();
      }
      case LOSE_ANSWER -> effect.get().whenComplete((v, e) -> {
        if (onLost != null) {
          answer(inst, out, onLost.apply(Fault.LOSE_ANSWER), null);
        } else {
          answer(inst, out, null, failures.lostAnswer(what));
        }
      });
      case HANG -> effect.get().whenComplete((v, e) -> {
        timer(inst, deadline).thenRun(() -> {
          outstanding.incrementAndGet();
          if (onLost != null) {
            answer(inst, out, onLost.apply(Fault.HANG), null);
          } else {
            answer(inst, out, null, failures.timedOut(what));
          }
        });
        outstanding.decrementAndGet();
      });
      case CRASH_AFTER -> effect.get().whenComplete((v, e) -> {
        inst.crash();
        outstanding.decrementAndGet();
      });
      default -> throw new IllegalStateException(f.name());
    }
    return out;
  }

  /** A call not in the schedule (the decision log): it runs, counted as work in progress. */
  <T> CompletionStage<T> passThrough(Instance inst, Supplier<CompletionStage<T>> effect) {
    if (inst.dead) {
      return new CompletableFuture<>();
    }
    CompletableFuture<T> out = new CompletableFuture<>();
    outstanding.incrementAndGet();
    effect.get().whenComplete((v, e) -> answer(inst, out, v, e));
    return out;
  }

  /** Hands the answer to the caller (whose continuation runs now, on this thread), unless it died. */
  private <T> void answer(Instance inst, CompletableFuture<T> out, T v, Throwable e) {
    try {
      if (!inst.dead) {
        if (e != null) {
          out.completeExceptionally(e instanceof java.util.concurrent.CompletionException && e.getCause() != null ? e.getCause() : e);
        } else {
          out.complete(v);
        }
      }
    } finally {
      outstanding.decrementAndGet();
    }
  }
}
