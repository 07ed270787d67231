package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.scenario.SoakReport.Point;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The soak's judgement can fail: each kind of growth is reported, noise and start-up growth are not. */
class SoakReportTest {
  /** 60 samples over 600 s: RSS, heap and series as functions of the second. */
  private static List<Point> run(java.util.function.DoubleUnaryOperator rss, java.util.function.DoubleUnaryOperator heap,
      java.util.function.DoubleToIntFunction series) {
    List<Point> l = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      double t = i * 10.0;
      l.add(new Point(t, rss.applyAsDouble(t), heap.applyAsDouble(t), series.applyAsInt(t)));
    }
    return l;
  }

  @Test
  void flatRun_withNoiseAndStartupGrowth_passes() {
    // heap climbs from 20 to 30 MB in the first two minutes, then wobbles by ±1 MB
    List<Point> pts = run(t -> 300 + (t < 120 ? t / 2 : 60) + (t % 20 == 0 ? 5 : -5), t -> (t < 120 ? 20 + t / 12 : 30) + (t % 30 == 0 ? 1 : -1),
        t -> 400);

    assertThat(SoakReport.judge(pts, 600).problems()).isEmpty();
  }

  @Test
  void heapGrowingSteadily_isReported() {
    // 1 MB a minute: 4.8 MB from the first to the last sample of the second half, above the 4 MB floor at a 30 MB heap
    List<Point> pts = run(t -> 300, t -> 30 + t / 60, t -> 400);

    assertThat(SoakReport.judge(pts, 600).problems()).singleElement().asString().startsWith("heap after GC grew by 4.8 MB");
  }

  @Test
  void rssGrowing_isReported() {
    List<Point> pts = run(t -> 300 + t / 4, t -> 30, t -> 400);

    assertThat(SoakReport.judge(pts, 600).problems()).singleElement().asString().startsWith("RSS grew by");
  }

  @Test
  void metricSeriesGrowing_isReported() {
    List<Point> pts = run(t -> 300, t -> 30, t -> 400 + (int) t);

    assertThat(SoakReport.judge(pts, 600).problems()).singleElement().asString().contains("gained 290 series");
  }

  @Test
  void tooFewSamples_isAProblem_notAPass() {
    assertThat(SoakReport.judge(run(t -> 300, t -> 30, t -> 400).subList(0, 31), 600).problems()).isNotEmpty();
  }

  @Test
  void write_producesTheChartCsvAndSummary(@TempDir Path dir) throws Exception {
    SoakReport r = new SoakReport();
    run(t -> 300, t -> 30, t -> 400).forEach(r::add);
    r.redisRestartAt(100);

    r.write(dir, "soak: test\n", SoakReport.judge(r.points(), 600));

    assertThat(Files.size(dir.resolve("memory.png"))).isPositive();
    assertThat(Files.readAllLines(dir.resolve("samples.csv"))).hasSize(61);
    assertThat(Files.readString(dir.resolve("summary.txt"))).startsWith("soak: test\n").contains("Redis restarts: 1", "verdict: PASS");
  }
}
