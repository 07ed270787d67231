package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.ops.ProbeFacts.RouteFacts;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class AdminServerTest {
  private final FakeProbeFacts facts = new FakeProbeFacts();
  private final HttpClient http = HttpClient.newHttpClient();
  private AdminServer server;

  @BeforeEach
  void start() throws IOException {
    facts.route("orders", new RouteFacts(true, 1, System.currentTimeMillis(), null));
    facts.route("payments", new RouteFacts(true, 1, System.currentTimeMillis(), null));
    Probes probes = new Probes(ProbesTest.CONFIG, facts, System::currentTimeMillis, Duration.ofSeconds(60), Duration.ofSeconds(5));
    server = AdminServer.start("127.0.0.1:0", probes, () -> "# TYPE test_metric gauge\ntest_metric 1.0\n");
  }

  @AfterEach
  void stop() {
    server.close();
  }

  private HttpResponse<String> get(String path) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void readyz_allGood_200_plainTextReport() throws Exception {
    HttpResponse<String> r = get("/readyz");

    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("text/plain; charset=utf-8");
    assertThat(r.body()).startsWith("ready\n").contains("route orders:").contains("escalation topic 'orders.escalate' exists");
  }

  @Test
  void readyz_escalationTopicMissing_503_reasonNamesTheTopic() throws Exception {
    facts.missing.add("orders.escalate");

    HttpResponse<String> r = get("/readyz");

    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).startsWith("not ready: route orders: escalation topic 'orders.escalate' does not exist");
  }

  @Test
  void healthz_liveWhileNotReady_andNotLiveWhenALoopFailed() throws Exception {
    facts.ping = CompletableFuture.failedFuture(new IllegalStateException("Connection refused"));
    assertThat(get("/readyz").statusCode()).isEqualTo(503);
    assertThat(get("/healthz").statusCode()).isEqualTo(200);

    facts.route("orders", new RouteFacts(false, 0, System.currentTimeMillis(), new IllegalStateException("boom")));
    HttpResponse<String> r = get("/healthz");
    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.body()).startsWith("not live: route orders: consumer stopped after a failure");
  }

  @Test
  void healthz_answersAtOnce_whileAReadinessCheckWaitsForMysql() throws Exception {
    facts.ping = new CompletableFuture<>();
    CompletableFuture<HttpResponse<String>> ready = http.sendAsync(
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/readyz")).build(), HttpResponse.BodyHandlers.ofString());

    long start = System.nanoTime();
    assertThat(get("/healthz").statusCode()).isEqualTo(200);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(3));
    facts.ping.complete(null);
    assertThat(ready.get().statusCode()).isEqualTo(200);
  }

  @Test
  void metrics_servesTheSuppliedPrometheusText() throws Exception {
    HttpResponse<String> r = get("/metrics");

    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("text/plain; version=0.0.4; charset=utf-8");
    assertThat(r.body()).isEqualTo("# TYPE test_metric gauge\ntest_metric 1.0\n");
  }

  @Test
  void otherPathsAndMethods_404And405() throws Exception {
    assertThat(get("/readyz/extra").statusCode()).isEqualTo(404);
    HttpResponse<String> post = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/readyz"))
        .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
    assertThat(post.statusCode()).isEqualTo(405);
    assertThat(post.headers().firstValue("Allow")).hasValue("GET, HEAD");
  }

  @Test
  void start_portTaken_errorNamesTheSetting() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      String addr = "127.0.0.1:" + taken.getLocalPort();
      assertThatThrownBy(() -> AdminServer.start(addr, null, () -> ""))
          .isInstanceOf(IOException.class)
          .hasMessageStartingWith("cannot listen on sidecar.admin-listen " + addr + ": ");
    }
  }
}
