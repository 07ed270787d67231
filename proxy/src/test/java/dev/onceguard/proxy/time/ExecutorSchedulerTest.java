package dev.onceguard.proxy.time;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class ExecutorSchedulerTest {

  @Test
  void delay_completesAfterTheDelay_onTheTimerThread() {
    try (ExecutorScheduler s = new ExecutorScheduler("test-timer")) {
      long t0 = System.nanoTime();
      CompletableFuture<Void> delay = s.delay(Duration.ofMillis(300)).toCompletableFuture();
      AtomicReference<String> ranOn = new AtomicReference<>();
      AtomicLong ranAfterNanos = new AtomicLong();
      delay.thenRun(() -> {
        ranAfterNanos.set(System.nanoTime() - t0);
        ranOn.set(Thread.currentThread().getName());
      });
      // non-null only if the delay was already over when the continuation was attached (a very
      // slow test thread): then it ran right here and says nothing about the timer thread.
      // Not delay.get(): a thread blocked in get() helps run dependents and may run it itself.
      String ranWhileAttaching = ranOn.get();
      await().atMost(Duration.ofSeconds(5)).until(() -> ranOn.get() != null);
      assertThat(ranAfterNanos.get()).isGreaterThanOrEqualTo(Duration.ofMillis(300).toNanos());
      if (ranWhileAttaching == null) {
        assertThat(ranOn.get()).isEqualTo("test-timer");
      }
    }
  }

  @Test
  void delay_zero_isAlreadyComplete() {
    try (ExecutorScheduler s = new ExecutorScheduler("test-timer")) {
      assertThat(s.delay(Duration.ZERO).toCompletableFuture()).isCompleted();
    }
  }

  @Test
  void cancel_releasesTheTimer_andCompletesDependentsExceptionally_withoutAStackTracePerCancel() {
    try (ExecutorScheduler s = new ExecutorScheduler("test-timer")) {
      CompletableFuture<Void> delay = s.delay(Duration.ofHours(1)).toCompletableFuture();
      AtomicReference<Throwable> seen = new AtomicReference<>();
      delay.whenComplete((v, e) -> seen.set(e));

      assertThat(delay.cancel(false)).isTrue();

      assertThat(delay).isCompletedExceptionally();
      assertThat(seen.get()).isInstanceOf(java.util.concurrent.CompletionException.class)
          .hasCauseInstanceOf(CancellationException.class);
      assertThat(seen.get().getStackTrace()).as("shared, without a stack trace").isEmpty();
      assertThat(delay.cancel(false)).as("only once").isFalse();
    }
  }

  @Test
  void close_failsPendingDelays_soNothingWaitsForever() {
    ExecutorScheduler s = new ExecutorScheduler("test-timer");
    CompletableFuture<Void> pending = s.delay(Duration.ofHours(1)).toCompletableFuture();
    s.close();
    // CompletableFuture.get rethrows a CancellationException cause as it is
    assertThatThrownBy(() -> pending.get(5, TimeUnit.SECONDS)).isInstanceOf(CancellationException.class);
    assertThat(s.delay(Duration.ofMillis(1)).toCompletableFuture()).isCompletedExceptionally();
  }
}
