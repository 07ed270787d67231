package dev.onceguard.proxy.time;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class ExecutorSchedulerTest {

  @Test
  void delay_completesAfterTheDelay_onTheTimerThread() throws Exception {
    try (ExecutorScheduler s = new ExecutorScheduler("test-timer")) {
      long t0 = System.nanoTime();
      CompletableFuture<Void> delay = s.delay(Duration.ofMillis(300)).toCompletableFuture();
      AtomicReference<String> ranOn = new AtomicReference<>();
      delay.thenRun(() -> ranOn.set(Thread.currentThread().getName()));
      // non-null only if the delay was already over when the continuation was attached (a very
      // slow test thread): then it ran right here and says nothing about the timer thread
      String ranWhileAttaching = ranOn.get();
      delay.get(5, TimeUnit.SECONDS);
      assertThat(System.nanoTime() - t0).isGreaterThanOrEqualTo(Duration.ofMillis(300).toNanos());
      if (ranWhileAttaching == null) {
        await().until(() -> ranOn.get() != null);
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
  void close_failsPendingDelays_soNothingWaitsForever() {
    ExecutorScheduler s = new ExecutorScheduler("test-timer");
    CompletableFuture<Void> pending = s.delay(Duration.ofHours(1)).toCompletableFuture();
    s.close();
    // CompletableFuture.get rethrows a CancellationException cause as it is
    assertThatThrownBy(() -> pending.get(5, TimeUnit.SECONDS)).isInstanceOf(CancellationException.class);
    assertThat(s.delay(Duration.ofMillis(1)).toCompletableFuture()).isCompletedExceptionally();
  }
}
