package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class LogThrottleTest {
  private final AtomicLong now = new AtomicLong(-5_000_000_000L); // negative: nanoTime may be
  private final LogThrottle throttle = new LogThrottle(Duration.ofSeconds(5), now::get);

  @Test
  void tryAcquire_firstEvent_passesWithNothingHeldBack() {
    assertThat(throttle.tryAcquire()).isZero();
  }

  @Test
  void tryAcquire_burstWithinInterval_holdsBackAndCountsTheRest() {
    assertThat(throttle.tryAcquire()).isZero();
    for (int i = 0; i < 300; i++) {
      assertThat(throttle.tryAcquire()).isEqualTo(-1);
    }
    now.addAndGet(Duration.ofSeconds(5).toNanos());
    assertThat(throttle.tryAcquire()).isEqualTo(300);
    assertThat(throttle.tryAcquire()).isEqualTo(-1);
  }

  @Test
  void tryAcquire_afterQuietPeriod_passesAgainWithZero() {
    throttle.tryAcquire();
    now.addAndGet(Duration.ofMinutes(1).toNanos());
    assertThat(throttle.tryAcquire()).isZero();
  }
}
