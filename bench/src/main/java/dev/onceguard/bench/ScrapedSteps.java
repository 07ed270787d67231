package dev.onceguard.bench;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The step times of a sidecar that runs as its own process, read from its
 * {@code onceguard_step_seconds} histogram on the admin listener: the bucket counts at
 * {@link #arm} and at {@link #disarm} are subtracted, so the figures belong to the records of
 * the window between, as {@link StepTimes}' do in process. A histogram gives buckets, not
 * records: p50 and p99 are interpolated linearly inside the bucket that holds them (bounds 1, 2,
 * 5, 10, 25, 50, 100, 250 ms, 1 s and 5 s), so they tell which step the time is in, not its
 * tenth of a millisecond. Not thread-safe: the benchmark's main thread only.
 */
final class ScrapedSteps {
  private static final Pattern BUCKET =
      Pattern.compile("^onceguard_step_seconds_bucket\\{(.*)\\}\\s+(\\S+)\\s*$");
  private static final Pattern LABEL = Pattern.compile("(\\w+)=\"([^\"]*)\"");

  private final URI metrics;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private Map<String, TreeMap<Double, Double>> before;

  /** @param adminPort the sidecar's {@code sidecar.admin-listen} port on 127.0.0.1 */
  ScrapedSteps(int adminPort) {
    this.metrics = URI.create("http://127.0.0.1:" + adminPort + "/metrics");
  }

  /** The window begins. */
  void arm() throws IOException, InterruptedException {
    before = buckets(scrape());
  }

  /**
   * The window ends: per step in the order the sidecar reports them (claim, handle, confirm),
   * {p50, p99} in ms of the window's records; steps without a record in the window are left out.
   */
  Map<String, double[]> disarm() throws IOException, InterruptedException {
    Map<String, TreeMap<Double, Double>> after = buckets(scrape());
    Map<String, double[]> out = new LinkedHashMap<>();
    for (String step : StepTimes.NAMES) {
      TreeMap<Double, Double> a = after.get(step);
      if (a == null) {
        continue;
      }
      TreeMap<Double, Double> b = before == null ? new TreeMap<>() : before.getOrDefault(step, new TreeMap<>());
      TreeMap<Double, Double> delta = new TreeMap<>();
      a.forEach((le, n) -> delta.put(le, n - b.getOrDefault(le, 0.0)));
      double total = delta.lastEntry().getValue();
      if (total > 0) {
        out.put(step, new double[] {quantile(delta, 0.50) * 1000, quantile(delta, 0.99) * 1000});
      }
    }
    return out;
  }

  private String scrape() throws IOException, InterruptedException {
    HttpResponse<String> r = http.send(HttpRequest.newBuilder(metrics).timeout(Duration.ofSeconds(5)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != 200) {
      throw new IOException("GET " + metrics + " answered " + r.statusCode());
    }
    return r.body();
  }

  /** Per step, cumulative count by upper bound in seconds (+Inf as {@link Double#POSITIVE_INFINITY}), summed over routes. */
  static Map<String, TreeMap<Double, Double>> buckets(String prometheusText) {
    Map<String, TreeMap<Double, Double>> out = new LinkedHashMap<>();
    for (String line : prometheusText.split("\n")) {
      Matcher m = BUCKET.matcher(line);
      if (!m.matches()) {
        continue;
      }
      String step = null;
      String le = null;
      Matcher l = LABEL.matcher(m.group(1));
      while (l.find()) {
        if (l.group(1).equals("step")) {
          step = l.group(2);
        } else if (l.group(1).equals("le")) {
          le = l.group(2);
        }
      }
      if (step == null || le == null) {
        continue;
      }
      double bound = le.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(le);
      out.computeIfAbsent(step, s -> new TreeMap<>()).merge(bound, Double.parseDouble(m.group(2)), Double::sum);
    }
    return out;
  }

  /**
   * The {@code q} quantile of cumulative bucket counts, in seconds: linear inside its bucket (from
   * the bucket below's bound, 0 for the first); in the +Inf bucket, the largest finite bound.
   */
  static double quantile(TreeMap<Double, Double> cumulative, double q) {
    double total = cumulative.lastEntry().getValue();
    double rank = q * total;
    double lower = 0;
    double below = 0;
    for (Map.Entry<Double, Double> e : cumulative.entrySet()) {
      double upper = e.getKey();
      double n = e.getValue();
      if (n >= rank && n > below) {
        if (Double.isInfinite(upper)) {
          return lower;
        }
        return lower + (upper - lower) * (rank - below) / (n - below);
      }
      if (!Double.isInfinite(upper)) {
        lower = upper;
      }
      below = n;
    }
    return lower;
  }
}
