package dev.onceguard.proxy.guard;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class SerialExecutorTest {
  private final List<Throwable> failures = new CopyOnWriteArrayList<>();
  private final SerialExecutor ctx = new SerialExecutor(failures::add);

  @Test
  void runsOnTheSubmittingThreadWhenIdle() {
    List<Thread> ran = new ArrayList<>();
    ctx.execute(() -> ran.add(Thread.currentThread()));
    assertThat(ran).containsExactly(Thread.currentThread());
    assertThat(ctx.inContext()).isFalse();
  }

  @Test
  void aTaskSubmittedFromATaskRunsAfterItNotInsideIt() {
    List<String> order = new ArrayList<>();
    ctx.execute(() -> {
      order.add("outer begins");
      assertThat(ctx.inContext()).isTrue();
      ctx.execute(() -> order.add("inner"));
      order.add("outer ends");
    });
    assertThat(order).containsExactly("outer begins", "outer ends", "inner");
  }

  @Test
  void aFailingTaskGoesToTheHandlerInsideTheContextAndLaterTasksStillRun() {
    List<String> order = new ArrayList<>();
    AtomicInteger handledInContext = new AtomicInteger();
    SerialExecutor[] self = new SerialExecutor[1];
    self[0] = new SerialExecutor(t -> {
      order.add("handler: " + t.getMessage());
      if (self[0].inContext()) {
        handledInContext.incrementAndGet();
      }
    });
    self[0].execute(() -> {
      self[0].execute(() -> order.add("after"));
      throw new IllegalStateException("boom");
    });
    assertThat(order).containsExactly("handler: boom", "after");
    assertThat(handledInContext).hasValue(1);
  }

  @Test
  void tasksFromManyThreadsNeverOverlapAndKeepEachThreadsOrder() throws Exception {
    int threads = 4;
    int perThread = 20_000;
    AtomicInteger active = new AtomicInteger();
    AtomicInteger overlaps = new AtomicInteger();
    // plain, unsynchronised state: only the context's tasks touch it
    int[] last = new int[threads];
    int[] outOfOrder = {0};
    long[] count = {0};
    CountDownLatch go = new CountDownLatch(1);
    List<Thread> ts = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int id = t;
      Thread th = new Thread(() -> {
        try {
          go.await();
        } catch (InterruptedException e) {
          return;
        }
        for (int i = 1; i <= perThread; i++) {
          int n = i;
          ctx.execute(() -> {
            if (active.incrementAndGet() != 1) {
              overlaps.incrementAndGet();
            }
            if (last[id] != n - 1) {
              outOfOrder[0]++;
            }
            last[id] = n;
            count[0]++;
            active.decrementAndGet();
          });
        }
      });
      ts.add(th);
      th.start();
    }
    go.countDown();
    for (Thread th : ts) {
      th.join(TimeUnit.SECONDS.toMillis(30));
    }
    CountDownLatch read = new CountDownLatch(1);
    long[] seen = new long[1];
    int[] disorder = new int[1];
    ctx.execute(() -> {
      seen[0] = count[0];
      disorder[0] = outOfOrder[0];
      read.countDown();
    });
    assertThat(read.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(seen[0]).isEqualTo((long) threads * perThread);
    assertThat(disorder[0]).isZero();
    assertThat(overlaps).hasValue(0);
    assertThat(failures).isEmpty();
  }
}
