package dev.onceguard.it.ops;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.it.RecordingBusiness;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code prometheus} server process for one test: it scrapes the given targets every second
 * and evaluates the given rule file every second. Its output goes to
 * {@code target/scenario-logs/<name>-prometheus.log}, its data to a temporary folder that
 * {@link #close()} deletes after stopping the process (SIGTERM, then SIGKILL). Not thread-safe.
 */
public final class PrometheusServer implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Process process;
  private final Path data;
  private final Path log;
  private final String base;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  private PrometheusServer(Process process, Path data, Path log, int port) {
    this.process = process;
    this.data = data;
    this.log = log;
    this.base = "http://127.0.0.1:" + port;
  }

  /**
   * Starts the server and waits until it is ready.
   *
   * @param rules the rule file to evaluate
   * @param targets {@code host:port} of each {@code /metrics} endpoint, job {@code onceguard}
   */
  public static PrometheusServer start(String name, Path logs, Path rules, String... targets) throws InterruptedException {
    Path binary = PrometheusTools.executable("prometheus");
    int port = RecordingBusiness.freePort();
    try {
      Files.createDirectories(logs);
      Path data = Files.createTempDirectory("onceguard-prometheus-");
      Path config = logs.resolve(name + "-prometheus.yml");
      StringBuilder t = new StringBuilder();
      for (String target : targets) {
        t.append(t.length() == 0 ? "" : ", ").append('\'').append(target).append('\'');
      }
      Files.writeString(config, """
          global:
            scrape_interval: 1s
            scrape_timeout: 1s
            evaluation_interval: 1s
          rule_files: ['%s']
          scrape_configs:
            - job_name: onceguard
              static_configs:
                - targets: [%s]
          """.formatted(rules.toAbsolutePath(), t));
      Path log = logs.resolve(name + "-prometheus.log");
      Process p = new ProcessBuilder(binary.toString(), "--config.file=" + config.toAbsolutePath(),
          "--storage.tsdb.path=" + data, "--web.listen-address=127.0.0.1:" + port)
          .redirectErrorStream(true).redirectOutput(log.toFile()).start();
      PrometheusServer s = new PrometheusServer(p, data, log, port);
      s.awaitReady(Duration.ofSeconds(60));
      return s;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start prometheus", e);
    }
  }

  private void awaitReady(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new AssertionError("prometheus exited with " + process.exitValue() + "; its log:\n" + log());
      }
      try {
        if (http.send(HttpRequest.newBuilder(URI.create(base + "/-/ready")).build(), HttpResponse.BodyHandlers.discarding())
            .statusCode() == 200) {
          return;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    close();
    throw new AssertionError("prometheus not ready within " + timeout + "; its log:\n" + log());
  }

  /** {@code GET /api/v1/<path>}: its {@code data}, after checking {@code status} is {@code success}. */
  public JsonNode api(String pathAndQuery) throws InterruptedException {
    try {
      HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base + "/api/v1/" + pathAndQuery))
          .timeout(Duration.ofSeconds(10)).build(), HttpResponse.BodyHandlers.ofString());
      JsonNode body = JSON.readTree(r.body());
      if (r.statusCode() != 200 || !"success".equals(body.path("status").asText())) {
        throw new AssertionError("GET /api/v1/" + pathAndQuery + ": " + r.statusCode() + " " + r.body());
      }
      return body.path("data");
    } catch (IOException e) {
      throw new UncheckedIOException("GET /api/v1/" + pathAndQuery, e);
    }
  }

  /** An instant query: the result vector's samples (each with {@code metric} and {@code value}). */
  public List<JsonNode> query(String promql) throws InterruptedException {
    JsonNode data = api("query?query=" + URLEncoder.encode(promql, StandardCharsets.UTF_8));
    List<JsonNode> out = new ArrayList<>();
    data.path("result").forEach(out::add);
    return out;
  }

  /** The active alerts (pending and firing), each with {@code labels}, {@code annotations} and {@code state}. */
  public List<JsonNode> alerts() throws InterruptedException {
    List<JsonNode> out = new ArrayList<>();
    api("alerts").path("alerts").forEach(out::add);
    return out;
  }

  public String log() {
    try {
      return Files.readString(log);
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(20, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> files = Files.walk(data)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      System.err.println("could not delete " + data + ": " + e);
    }
  }
}
