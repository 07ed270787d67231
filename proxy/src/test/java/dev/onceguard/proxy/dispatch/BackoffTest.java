package dev.onceguard.proxy.dispatch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.Test;

class BackoffTest {

  /** A random source that always answers the extreme asked for. */
  private static Random always(boolean max) {
    return new Random() {
      @Override
      public long nextLong(long bound) {
        return max ? bound - 1 : 0;
      }
    };
  }

  @Test
  void delay_lowestJitter_isTheInitialBackoffEveryTime() {
    Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), always(false));
    for (int n = 1; n < 40; n++) {
      assertThat(b.delay(n)).isEqualTo(Duration.ofMillis(100));
    }
  }

  @Test
  void delay_highestJitter_doublesUpToTheMax() {
    Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(1), always(true));
    assertThat(b.delay(1)).isEqualTo(Duration.ofMillis(200));
    assertThat(b.delay(2)).isEqualTo(Duration.ofMillis(400));
    assertThat(b.delay(3)).isEqualTo(Duration.ofMillis(800));
    assertThat(b.delay(4)).isEqualTo(Duration.ofSeconds(1));
    assertThat(b.delay(1_000_000)).isEqualTo(Duration.ofSeconds(1));
  }

  @Test
  void delay_realRandom_staysWithinInitialAndCeiling() {
    Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), new Random(7));
    for (int n = 1; n < 200; n++) {
      Duration d = b.delay(n);
      long ceiling = Math.min(10_000, 100L << Math.min(n, 20));
      assertThat(d).isBetween(Duration.ofMillis(100), Duration.ofMillis(ceiling));
    }
  }

  @Test
  void delay_spreadsRetriesOfRecordsThatFailedTogether() {
    Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), new Random(1));
    long distinct = java.util.stream.IntStream.range(0, 50).mapToObj(i -> b.delay(5)).distinct().count();
    assertThat(distinct).isGreaterThan(40);
  }

  @Test
  void delay_initialEqualsMax_isConstant() {
    Backoff b = new Backoff(Duration.ofMillis(250), Duration.ofMillis(250), new Random(3));
    assertThat(b.delay(1)).isEqualTo(Duration.ofMillis(250));
    assertThat(b.delay(30)).isEqualTo(Duration.ofMillis(250));
  }

  @Test
  void invalidArguments_areRejected() {
    assertThatThrownBy(() -> new Backoff(Duration.ZERO, Duration.ofSeconds(1), new Random()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Backoff(Duration.ofSeconds(2), Duration.ofSeconds(1), new Random()))
        .isInstanceOf(IllegalArgumentException.class);
    Backoff b = new Backoff(Duration.ofMillis(1), Duration.ofMillis(2), new Random());
    assertThatThrownBy(() -> b.delay(0)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void delayAsked_shorterThanTheBackoff_isTheBackoff() {
    Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), always(false));
    assertThat(b.delay(1, Duration.ZERO)).isEqualTo(Duration.ofMillis(100));
    assertThat(b.delay(1, Duration.ofMillis(50))).isEqualTo(Duration.ofMillis(100));
  }

  @Test
  void delayAsked_longerThanTheBackoffWithinTheMax_isWhatTheBusinessAsked() {
    Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), always(false));
    assertThat(b.delay(1, Duration.ofSeconds(3))).isEqualTo(Duration.ofSeconds(3));
    assertThat(b.delay(1, Duration.ofSeconds(10))).isEqualTo(Duration.ofSeconds(10));
  }

  @Test
  void delayAsked_beyondTheMax_isTheMax_loggedOnceNamingTheRoute() {
    ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(Backoff.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> logged = new ch.qos.logback.core.read.ListAppender<>();
    logged.start();
    // other tests of the run may have turned OnceGuard's loggers down
    ch.qos.logback.classic.Level level = logger.getLevel();
    logger.setLevel(ch.qos.logback.classic.Level.WARN);
    logger.addAppender(logged);
    try {
      Backoff b = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), always(true), "route orders");
      // 30 days, and the most the wire can say (uint32 milliseconds: 49.7 days)
      assertThat(b.delay(1, Duration.ofDays(30))).isEqualTo(Duration.ofSeconds(10));
      assertThat(b.delay(2, Duration.ofMillis(4_294_967_295L))).isEqualTo(Duration.ofSeconds(10));

      assertThat(logged.list).hasSize(1);
      assertThat(logged.list.get(0).getFormattedMessage()).isEqualTo("route orders: the business asked to wait 2592000000 ms before the"
          + " next attempt; waiting retry.max-backoff (10000 ms) instead (logged once)");
    } finally {
      logger.detachAppender(logged);
      logger.setLevel(level);
    }
  }
}
