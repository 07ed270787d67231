package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The TTL part of Q2 of docs/answers.md: the duplicate-age distribution of a seeded stream shaped
 * like a reference team's (re-sends within minutes, retries within a day, compensation re-runs up
 * to 28 days late, one of them 9 days late), {@code ttl-advice}'s report on it under a 7-day TTL
 * ({@link TtlAdvice}, the code of the command, fed the ages a 7-day TTL leaves to the ledger), and the
 * share of the duplicates an L1 TTL of 1, 7 and 30 days answers (a key lives its TTL from the
 * original's confirmation). In this package because {@link TtlAdvice} is the command's own.
 * With {@code answers.ttl-out} set, writes its markdown there (make answers).
 */
class TtlAnswerTest {
  static final long SEED = 20261202L;
  static final int DUPLICATES = 10_000;
  static final long MINUTE = 60_000L;
  static final long DAY = 24 * 60 * MINUTE;

  /** Ages in ms: 80% re-sends (exponential, mean 2 min), 15% retries (1 h to 1 day), 5% compensation re-runs (1 to 28 days). */
  static long[] ages(long seed, int n) {
    Random r = new Random(seed);
    long[] a = new long[n];
    for (int i = 0; i < n; i++) {
      double u = r.nextDouble();
      if (u < 0.80) {
        a[i] = (long) (-Math.log(1 - r.nextDouble()) * 2 * MINUTE);
      } else if (u < 0.95) {
        a[i] = (long) ((1 + r.nextDouble() * 23) * 60 * MINUTE);
      } else {
        a[i] = (long) ((1 + r.nextDouble() * 27) * DAY);
      }
    }
    a[0] = 9 * DAY; // the compensation that went through under a 7-day TTL
    return a;
  }

  static double hitRate(long[] ages, Duration ttl) {
    return (double) Arrays.stream(ages).filter(x -> x < ttl.toMillis()).count() / ages.length;
  }

  @Test
  void longerTtl_onlyMovesTheL1HitRate_andTtlAdviceNamesTheShareEachTtlAnswers() throws Exception {
    long[] ages = ages(SEED, DUPLICATES);
    double day = hitRate(ages, Duration.ofDays(1));
    double week = hitRate(ages, Duration.ofDays(7));
    double month = hitRate(ages, Duration.ofDays(30));
    assertThat(day).isLessThan(week);
    assertThat(week).isLessThan(month);
    assertThat(month).as("every age of the stream is under 28 days").isEqualTo(1.0);
    // under a 7-day TTL, the duplicates that reach the ledger (and its decision log) are the older ones
    long[] missed = Arrays.stream(ages).filter(x -> x >= Duration.ofDays(7).toMillis()).toArray();
    String advice = TtlAdvice.report("orders", missed, 0, 0, Duration.ofDays(7), Duration.ofDays(30));
    assertThat(advice).contains(missed.length + " duplicates missed L1").contains("covering 99% is 30 d");

    String out = System.getProperty("answers.ttl-out");
    if (out != null) {
      long[] sorted = ages.clone();
      Arrays.sort(sorted);
      StringBuilder md = new StringBuilder();
      md.append(String.format(Locale.ROOT, "Seeded stream (seed %d): %,d duplicates; 80%% re-sends (age exponential, mean 2 min), 15%% retries"
          + " (1 h to 1 day), 5%% compensation re-runs (1 to 28 days late), one of them 9 days late.%n%n", SEED, DUPLICATES));
      md.append("| Age percentile | p50 | p90 | p95 | p99 | p99.7 | max |\n|---|---:|---:|---:|---:|---:|---:|\n| age |");
      for (double p : new double[] {50, 90, 95, 99, 99.7, 100}) {
        md.append(' ').append(human(sorted[(int) Math.min(sorted.length - 1, Math.ceil(p / 100 * sorted.length) - 1)])).append(" |");
      }
      md.append("\n\n| L1 TTL | duplicates answered by L1 | reaching the ledger (MySQL) |\n|---|---:|---:|\n");
      for (Duration ttl : List.of(Duration.ofDays(1), Duration.ofDays(7), Duration.ofDays(30))) {
        double h = hitRate(ages, ttl);
        md.append(String.format(Locale.ROOT, "| %d d | %.2f%% | %.2f%% |%n", ttl.toDays(), 100 * h, 100 * (1 - h)));
      }
      md.append("\n`ttl-advice` under a 7-day TTL (the command's report on the duplicates that TTL leaves to the ledger, as its"
          + " decision log records them):\n\n```\n").append(advice).append("```\n");
      Files.createDirectories(Path.of(out).toAbsolutePath().getParent());
      Files.writeString(Path.of(out), md.toString());
    }
  }

  private static String human(long ms) {
    if (ms >= DAY) {
      return String.format(Locale.ROOT, "%.1f d", (double) ms / DAY);
    }
    if (ms >= 60 * MINUTE) {
      return String.format(Locale.ROOT, "%.1f h", (double) ms / (60 * MINUTE));
    }
    return String.format(Locale.ROOT, "%.1f min", (double) ms / MINUTE);
  }
}
