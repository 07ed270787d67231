package dev.onceguard.it.scenario;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.ToDoubleFunction;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.BitmapEncoder.BitmapFormat;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The memory samples of a soak run, the judgement on them, and their files: {@code samples.csv},
 * {@code summary.txt} and {@code memory.png}.
 *
 * <p><b>Bounds.</b> A leak in a map that gains an entry per key or per record grows the heap that
 * survives a full collection steadily, whatever the load does; start-up (class loading, JIT,
 * pools filling) grows it only at first. So the judgement looks at the <em>second half</em> of the
 * run: the least-squares trend of heap-after-GC there, projected over that half, must stay within
 * {@link #HEAP_GROWTH_MIN_MB} or {@link #HEAP_GROWTH_FRACTION} of its median, whichever is larger;
 * the median RSS of the last quarter may exceed that of the second quarter by at most
 * {@link #RSS_GROWTH_MIN_MB} or {@link #RSS_GROWTH_FRACTION} (RSS also moves with heap sizing and
 * the JIT, so its bound is looser); and the number of exported metric series may grow by at most
 * {@link #SERIES_GROWTH} over the second half (a label per key or record would add thousands).
 */
final class SoakReport {
  static final double HEAP_GROWTH_MIN_MB = 4;
  static final double HEAP_GROWTH_FRACTION = 0.10;
  static final double RSS_GROWTH_MIN_MB = 48;
  static final double RSS_GROWTH_FRACTION = 0.20;
  static final int SERIES_GROWTH = 50;

  /** A sample at {@code seconds} since the load began. */
  record Point(double seconds, double rssMb, double heapAfterGcMb, int metricSeries) {}

  /** What the judgement found: {@code problems} is empty when every bound held. */
  record Judgement(double heapTrendMb, double heapBoundMb, double rssGrowthMb, double rssBoundMb, int seriesGrowth,
      List<String> problems) {}

  private final List<Point> points = new ArrayList<>();
  private final List<Double> redisRestarts = new ArrayList<>();

  void add(Point p) {
    points.add(p);
  }

  void redisRestartAt(double seconds) {
    redisRestarts.add(seconds);
  }

  List<Point> points() {
    return List.copyOf(points);
  }

  int redisRestarts() {
    return redisRestarts.size();
  }

  /** Judges the samples of a run that lasted {@code seconds}. */
  static Judgement judge(List<Point> all, double seconds) {
    List<Point> pts = all.stream().filter(p -> p.heapAfterGcMb() >= 0 && p.rssMb() >= 0).toList();
    List<String> problems = new ArrayList<>();
    List<Point> secondHalf = pts.stream().filter(p -> p.seconds() >= seconds / 2).toList();
    if (secondHalf.size() < 4) {
      problems.add("too few samples in the second half (" + secondHalf.size() + ") to judge growth");
      return new Judgement(Double.NaN, Double.NaN, Double.NaN, Double.NaN, 0, problems);
    }
    double spanMin = (secondHalf.get(secondHalf.size() - 1).seconds() - secondHalf.get(0).seconds()) / 60;
    double heapTrend = slopePerMinute(secondHalf, Point::heapAfterGcMb) * spanMin;
    double heapBound = Math.max(HEAP_GROWTH_MIN_MB, HEAP_GROWTH_FRACTION * median(secondHalf, Point::heapAfterGcMb));
    if (heapTrend > heapBound) {
      problems.add(String.format(Locale.ROOT, "heap after GC grew by %.1f MB (trend) over the second half; bound %.1f MB", heapTrend,
          heapBound));
    }
    List<Point> q2 = pts.stream().filter(p -> p.seconds() >= seconds / 4 && p.seconds() < seconds / 2).toList();
    List<Point> q4 = pts.stream().filter(p -> p.seconds() >= seconds * 3 / 4).toList();
    double rssGrowth = q2.isEmpty() || q4.isEmpty() ? 0 : median(q4, Point::rssMb) - median(q2, Point::rssMb);
    double rssBound = q2.isEmpty() ? RSS_GROWTH_MIN_MB : Math.max(RSS_GROWTH_MIN_MB, RSS_GROWTH_FRACTION * median(q2, Point::rssMb));
    if (rssGrowth > rssBound) {
      problems.add(String.format(Locale.ROOT, "RSS grew by %.1f MB (median of the last quarter against the second); bound %.1f MB",
          rssGrowth, rssBound));
    }
    List<Point> withSeries = secondHalf.stream().filter(p -> p.metricSeries() >= 0).toList();
    int seriesGrowth = withSeries.isEmpty() ? 0
        : withSeries.get(withSeries.size() - 1).metricSeries() - withSeries.get(0).metricSeries();
    if (seriesGrowth > SERIES_GROWTH) {
      problems.add("the /metrics endpoint gained " + seriesGrowth + " series over the second half; bound " + SERIES_GROWTH);
    }
    return new Judgement(heapTrend, heapBound, rssGrowth, rssBound, seriesGrowth, problems);
  }

  private static double slopePerMinute(List<Point> pts, ToDoubleFunction<Point> y) {
    double n = pts.size();
    double sx = 0;
    double sy = 0;
    double sxx = 0;
    double sxy = 0;
    for (Point p : pts) {
      double x = p.seconds() / 60;
      double v = y.applyAsDouble(p);
      sx += x;
      sy += v;
      sxx += x * x;
      sxy += x * v;
    }
    double d = n * sxx - sx * sx;
    return d == 0 ? 0 : (n * sxy - sx * sy) / d;
  }

  private static double median(List<Point> pts, ToDoubleFunction<Point> y) {
    double[] v = pts.stream().mapToDouble(y).sorted().toArray();
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  /** Writes {@code samples.csv}, {@code memory.png} and {@code summary.txt} (which starts with {@code header}) to {@code dir}. */
  void write(Path dir, String header, Judgement j) throws IOException {
    Files.createDirectories(dir);
    StringBuilder csv = new StringBuilder("seconds,rss_mb,heap_after_gc_mb,metric_series\n");
    for (Point p : points) {
      csv.append(String.format(Locale.ROOT, "%.1f,%.1f,%.2f,%d%n", p.seconds(), p.rssMb(), p.heapAfterGcMb(), p.metricSeries()));
    }
    Files.writeString(dir.resolve("samples.csv"), csv);
    chart(dir.resolve("memory.png"));
    List<Point> pts = points.stream().filter(p -> p.rssMb() >= 0 && p.heapAfterGcMb() >= 0).toList();
    String summary = header + String.format(Locale.ROOT, """
        samples: %d, Redis restarts: %d
        RSS MB: first %.0f, max %.0f, last %.0f; growth last quarter vs second: %.1f (bound %.1f)
        heap after GC MB: first %.1f, max %.1f, last %.1f; trend over the second half: %+.2f (bound %.1f)
        /metrics series: first %d, last %d; growth over the second half: %d (bound %d)
        verdict: %s
        """, points.size(), redisRestarts.size(),
        pts.isEmpty() ? 0 : pts.get(0).rssMb(), pts.stream().mapToDouble(Point::rssMb).max().orElse(0),
        pts.isEmpty() ? 0 : pts.get(pts.size() - 1).rssMb(), j.rssGrowthMb(), j.rssBoundMb(),
        pts.isEmpty() ? 0 : pts.get(0).heapAfterGcMb(), pts.stream().mapToDouble(Point::heapAfterGcMb).max().orElse(0),
        pts.isEmpty() ? 0 : pts.get(pts.size() - 1).heapAfterGcMb(), j.heapTrendMb(), j.heapBoundMb(),
        pts.isEmpty() ? 0 : pts.get(0).metricSeries(), pts.isEmpty() ? 0 : pts.get(pts.size() - 1).metricSeries(), j.seriesGrowth(),
        SERIES_GROWTH, j.problems().isEmpty() ? "PASS" : "FAIL: " + String.join("; ", j.problems()));
    Files.writeString(dir.resolve("summary.txt"), summary);
  }

  private void chart(Path png) throws IOException {
    System.setProperty("java.awt.headless", "true");
    List<Point> pts = points.stream().filter(p -> p.rssMb() >= 0 && p.heapAfterGcMb() >= 0).toList();
    if (pts.isEmpty()) {
      return;
    }
    XYChart c = new XYChartBuilder().width(900).height(450).title("Sidecar memory during the soak")
        .xAxisTitle("minutes since the load began").yAxisTitle("MB").build();
    c.getStyler().setChartBackgroundColor(java.awt.Color.WHITE);
    c.getStyler().setMarkerSize(4);
    List<Double> xs = pts.stream().map(p -> p.seconds() / 60).toList();
    c.addSeries("RSS", xs, pts.stream().map(Point::rssMb).toList()).setMarker(SeriesMarkers.NONE);
    c.addSeries("heap after full GC", xs, pts.stream().map(Point::heapAfterGcMb).toList()).setMarker(SeriesMarkers.NONE);
    if (!redisRestarts.isEmpty()) {
      XYSeries r = c.addSeries("Redis restart", redisRestarts.stream().map(s -> s / 60).toList(),
          redisRestarts.stream().map(s -> 0.0).toList());
      r.setXYSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Scatter);
      r.setMarker(SeriesMarkers.DIAMOND);
    }
    BitmapEncoder.saveBitmap(c, png.toString(), BitmapFormat.PNG);
  }
}
