package dev.onceguard.proxy.ops;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The admin HTTP listener ({@code sidecar.admin-listen}), for kubelet probes and Prometheus on the
 * pod IP:
 * <ul>
 *   <li>{@code GET /healthz}: 200 while {@link Probes#liveness()} passes, else 503;
 *   <li>{@code GET /readyz}: 200 while {@link Probes#readiness()} passes, else 503;
 *   <li>{@code GET /metrics}: the Prometheus text, as {@code sidecar.metrics-listen} serves it.
 * </ul>
 * Probe bodies are {@link Probes.Report#text()}: the verdict and every failed reason on the first
 * line, then one line per check, per route. Other methods answer 405, other paths 404.
 *
 * <p>Requests run on a small pool of their own, so a readiness check waiting for MySQL never
 * delays a liveness probe. Owns its server and pool; {@link #close()} stops both.
 */
public final class AdminServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(AdminServer.class);
  private static final int THREADS = 3;
  private static final String TEXT = "text/plain; charset=utf-8";
  private static final String PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";

  private final HttpServer server;
  private final ExecutorService pool;
  private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

  private AdminServer(HttpServer server, ExecutorService pool) {
    this.server = server;
    this.pool = pool;
  }

  /**
   * Binds {@code hostPort} (port 0 picks a free one) and starts serving.
   *
   * @param metrics the Prometheus text, rendered per request
   * @throws IOException if the address cannot be bound (the message names {@code sidecar.admin-listen})
   */
  public static AdminServer start(String hostPort, Probes probes, Supplier<String> metrics) throws IOException {
    int colon = hostPort.lastIndexOf(':');
    InetSocketAddress address = new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
    HttpServer server;
    try {
      server = HttpServer.create(address, 0);
    } catch (IOException e) {
      throw new IOException("cannot listen on sidecar.admin-listen " + hostPort + ": " + e.getMessage(), e);
    }
    ExecutorService pool = Executors.newFixedThreadPool(THREADS, r -> {
      Thread t = new Thread(r, "onceguard-admin");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(pool);
    server.createContext("/healthz", ex -> serve(ex, () -> report(probes.liveness())));
    server.createContext("/readyz", ex -> serve(ex, () -> report(probes.readiness())));
    server.createContext("/metrics", ex -> serve(ex, () -> new Response(200, PROMETHEUS_TEXT, metrics.get())));
    server.start();
    return new AdminServer(server, pool);
  }

  /** The bound port. */
  public int port() {
    return server.getAddress().getPort();
  }

  private record Response(int status, String contentType, String body) {}

  private static Response report(Probes.Report r) {
    return new Response(r.ok() ? 200 : 503, TEXT, r.text());
  }

  private static void serve(HttpExchange ex, Supplier<Response> handler) throws IOException {
    try (ex) {
      Response r;
      if (!ex.getRequestURI().getPath().equals(ex.getHttpContext().getPath())) {
        r = new Response(404, TEXT, "not found: " + ex.getRequestURI().getPath() + "\n");
      } else if (!ex.getRequestMethod().equals("GET") && !ex.getRequestMethod().equals("HEAD")) {
        ex.getResponseHeaders().add("Allow", "GET, HEAD");
        r = new Response(405, TEXT, "method not allowed: " + ex.getRequestMethod() + "\n");
      } else {
        try {
          r = handler.get();
        } catch (RuntimeException e) {
          log.warn("admin {} failed", ex.getRequestURI().getPath(), e);
          r = new Response(500, TEXT, "internal error: " + e + "\n");
        }
      }
      byte[] body = r.body().getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().add("Content-Type", r.contentType());
      boolean head = ex.getRequestMethod().equals("HEAD");
      ex.sendResponseHeaders(r.status(), head ? -1 : body.length);
      if (!head) {
        try (OutputStream out = ex.getResponseBody()) {
          out.write(body);
        }
      }
    }
  }

  /** Stops the server (open requests are cut off) and its pool. Idempotent. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    server.stop(0);
    pool.shutdownNow();
    try {
      pool.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
