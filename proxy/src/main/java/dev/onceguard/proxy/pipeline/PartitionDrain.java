package dev.onceguard.proxy.pipeline;

import java.time.Duration;
import java.util.Collection;
import java.util.function.LongSupplier;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lets go of partitions of a route within a bound: on revocation, at shutdown, when partitions are
 * lost, and after the consumer failed. The steps are always the same — stop taking records (those
 * not started are dropped and left for redelivery), finish or cancel what runs within a bound,
 * commit the finished prefix, forget the partitions — and differ only in the bounds and whether a
 * commit is still allowed:
 *
 * <ul>
 *   <li>{@link #revoke}: let running records finish for a short grace (a fifth of the bound, at most
 *       {@link #REVOKE_GRACE_MAX}: the group's rebalance waits for us), then cancel the rest and wait
 *       up to the bound, commit, forget;
 *   <li>{@link #shutdown}: let running records finish up to the shutdown timeout, then cancel and
 *       wait a grace period, commit, forget;
 *   <li>{@link #lose}: the group already moved on — cancel and forget, commit nothing;
 *   <li>{@link #abandon}: the consumer failed — cancel, commit what finished if it still can, forget.
 * </ul>
 *
 * Whatever has not reported back when the bound is up is abandoned: it stays uncommitted, and its
 * late completion is ignored ({@link Work#forget}).
 *
 * <p>Threading: confined to the route's poll thread; blocks it for at most the bounds given plus
 * one synchronous commit. Completions of other partitions that arrive meanwhile are applied too.
 */
final class PartitionDrain {
  private static final Logger log = LoggerFactory.getLogger(PartitionDrain.class);

  /** The route's work on its partitions, as the drain sees it. Called on the poll thread only. */
  interface Work {
    /** Forgets the records of {@code tps} that have not started; returns how many. */
    int dropWaiting(Collection<TopicPartition> tps);

    /** Started records of {@code tps} whose current attempt has not reported back. */
    int running(Collection<TopicPartition> tps);

    /** Cancels every started record of {@code tps}; records waiting for a retry are dropped. */
    void cancel(Collection<TopicPartition> tps);

    /** Waits up to {@code nanos} for the next completion and applies it; false if none came. */
    boolean applyNextCompletion(long nanos) throws InterruptedException;

    /** Forgets the partitions' state; their later completions are ignored. */
    void forget(Collection<TopicPartition> tps);
  }

  private final String route;
  private final Work work;
  private final PartitionCommits commits;
  private final LongSupplier nanoTime;

  PartitionDrain(String route, Work work, PartitionCommits commits, LongSupplier nanoTime) {
    this.route = route;
    this.work = work;
    this.commits = commits;
    this.nanoTime = nanoTime;
  }

  /** Longest a revocation lets running records finish before it cancels them. */
  static final Duration REVOKE_GRACE_MAX = Duration.ofSeconds(1);

  /**
   * Revocation: let running records finish for a grace, cancel the rest, wait up to {@code bound},
   * commit the finished prefix, forget. Why not cancel at once: a record cancelled during its
   * business call keeps its claim, under this live owner, until the claim's lease ends (the
   * business may have it, so nobody may deliver it again sooner), and the partition's next owner
   * waits that long for it; a call usually ends within milliseconds, and then it is confirmed.
   */
  void revoke(Collection<TopicPartition> tps, Duration bound) {
    int dropped = work.dropWaiting(tps);
    int running = work.running(tps);
    Duration grace = bound.dividedBy(5).compareTo(REVOKE_GRACE_MAX) < 0 ? bound.dividedBy(5) : REVOKE_GRACE_MAX;
    int cancelled = 0;
    if (!awaitRunning(tps, grace)) {
      cancelled = work.running(tps);
      work.cancel(tps);
      awaitRunning(tps, bound.minus(grace));
    }
    int abandoned = work.running(tps);
    commits.commitSync(tps, "revoked");
    work.forget(tps);
    log.info("route {}: revoked {}: {} in flight, {} finished within {}, {} cancelled ({} abandoned after {}), left {} not started"
        + " for the next owner", route, tps, running, running - cancelled, grace, cancelled, abandoned, bound, dropped);
  }

  /** Shutdown: wait up to {@code timeout}, then cancel and wait up to {@code grace}; commit, forget. */
  void shutdown(Collection<TopicPartition> tps, Duration timeout, Duration grace) {
    int dropped = work.dropWaiting(tps);
    log.info("route {}: stopping; waiting up to {} for {} records in flight ({} not started are left for redelivery)",
        route, timeout, work.running(tps), dropped);
    if (!awaitRunning(tps, timeout)) {
      log.warn("route {}: {} records still in flight after {}; cancelling them (they will be delivered again)",
          route, work.running(tps), timeout);
      work.cancel(tps);
      if (!awaitRunning(tps, grace)) {
        log.warn("route {}: abandoning {} records that did not stop within {}", route, work.running(tps), grace);
      }
    }
    // records waiting for a retry have no attempt to wait for: they are left for redelivery
    work.cancel(tps);
    commits.commitSync(tps, "shutdown");
    work.forget(tps);
  }

  /** Partitions lost: the group moved on without us, so nothing may be committed. */
  void lose(Collection<TopicPartition> tps) {
    int cancelled = work.running(tps);
    work.cancel(tps);
    work.forget(tps);
    log.warn("route {}: lost {} (the group moved on without us): cancelled {} in flight, committed nothing", route, tps, cancelled);
  }

  /** After a consumer failure: cancel, apply what already reported back, commit if still possible, forget. */
  void abandon(Collection<TopicPartition> tps) {
    try {
      work.cancel(tps);
      while (work.applyNextCompletion(0)) {
        // the finished prefix is still right to commit, if the consumer still can
      }
      commits.commitSync(tps, "after failure");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      log.warn("route {}: could not commit after the failure: {}", route, e.toString());
    }
    work.forget(tps);
  }

  /** Applies completions until no record of {@code tps} runs or {@code bound} is up; true if none runs. */
  private boolean awaitRunning(Collection<TopicPartition> tps, Duration bound) {
    long deadline = nanoTime.getAsLong() + bound.toNanos();
    while (work.running(tps) > 0) {
      long left = deadline - nanoTime.getAsLong();
      if (left <= 0) {
        return false;
      }
      try {
        work.applyNextCompletion(left);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }
}
