package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Verdict;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * One record's claim carried to its final verdict, as the pipeline does it: an acceptance is
 * confirmed (a business that said OK), a wait (busy entity, early arrival) is claimed again until
 * {@code maxWaitMillis} pass, then ends in its timeout verdict.
 */
final class ClaimLoop {
  private ClaimLoop() {}

  /**
   * @param onContention run for each {@link ContentionException} that got past the guard's own
   *     retries, after which the claim runs again at once (the pipeline's handling) until
   *     {@code maxWaitMillis} pass; null: such a failure is thrown
   */
  static Verdict decide(Guard g, RouteConfig route, ExtractedEvent e, Source s, long maxWaitMillis, Runnable onContention)
      throws InterruptedException {
    long deadline = System.currentTimeMillis() + maxWaitMillis;
    while (true) {
      ClaimResult r;
      try {
        r = g.claim(route, e, s).toCompletableFuture().join();
      } catch (CompletionException x) {
        // past the deadline contention fails the record like any error, instead of a loop
        // without end when something keeps every claim of an entity conflicting
        if (onContention != null && x.getCause() instanceof ContentionException && System.currentTimeMillis() <= deadline) {
          onContention.run();
          continue;
        }
        throw x;
      }
      if (r instanceof ClaimResult.Accepted a) {
        assertThat(g.confirm(route, a.claim()).toCompletableFuture().join()).as("confirm of %s", e.dedupKey()).isTrue();
        return a.verdict();
      }
      if (r instanceof ClaimResult.Rejected x) {
        return x.verdict();
      }
      ClaimResult.Wait w = (ClaimResult.Wait) r;
      if (System.currentTimeMillis() > deadline) {
        return w.ifTimedOut();
      }
      Thread.sleep(2);
    }
  }

  /** What the callers of one round got: how many were accepted, duplicates, and anything else. */
  record Round(int accepted, int duplicates, List<String> duplicateReasons, List<String> others) {}

  /**
   * Runs every caller on {@code pool} released at the same instant (incident 3: copies of one
   * record claimed at once) and sorts their verdicts.
   */
  static Round atOnce(ExecutorService pool, List<Callable<Verdict>> callers, long timeoutSeconds) throws Exception {
    CountDownLatch go = new CountDownLatch(1);
    List<Future<Verdict>> fs = new ArrayList<>();
    for (Callable<Verdict> c : callers) {
      fs.add(pool.submit(() -> {
        go.await();
        return c.call();
      }));
    }
    go.countDown();
    int accepted = 0;
    List<String> duplicateReasons = new ArrayList<>();
    List<String> others = new ArrayList<>();
    for (Future<Verdict> f : fs) {
      Verdict v = f.get(timeoutSeconds, TimeUnit.SECONDS);
      if (v.getDisposition() == Disposition.ACCEPTED) {
        accepted++;
      } else if (v.getDisposition() == Disposition.DUPLICATE_IGNORE) {
        duplicateReasons.add(v.getReason().name());
      } else {
        others.add(v.getDisposition() + "/" + v.getReason() + ": " + v.getDetail());
      }
    }
    return new Round(accepted, duplicateReasons.size(), duplicateReasons, others);
  }
}
