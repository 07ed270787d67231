package dev.onceguard.proxy.ops;

import com.sun.net.httpserver.HttpServer;
import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.v1.Verdict;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Prometheus metrics on {@code GET /metrics} (text format), served by the JDK's HTTP server on
 * {@code sidecar.metrics-listen}. Counts every final verdict as
 * {@code onceguard_verdicts_total{route,disposition,layer,reason}}, plus any gauges registered
 * with {@link #gauge}, and the JVM's memory and threads. Owns its server thread; close it.
 */
public final class MetricsServer implements VerdictListener, AutoCloseable {
  private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final Map<String, Counter> counters = new ConcurrentHashMap<>();
  private final HttpServer server;

  /** Binds {@code host:port} (port 0 picks a free one) and starts serving. */
  public MetricsServer(String hostPort) throws IOException {
    int colon = hostPort.lastIndexOf(':');
    server = HttpServer.create(new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1))), 0);
    server.createContext("/metrics", ex -> {
      byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().add("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
      ex.sendResponseHeaders(200, body.length);
      try (OutputStream out = ex.getResponseBody()) {
        out.write(body);
      }
    });
    new JvmMemoryMetrics().bindTo(registry);
    new JvmThreadMetrics().bindTo(registry);
    server.start();
  }

  public int port() {
    return server.getAddress().getPort();
  }

  /** Registers a gauge read at scrape time, e.g. L1 failures. */
  public void gauge(String name, String description, Supplier<Number> value) {
    io.micrometer.core.instrument.Gauge.builder(name, value).description(description).register(registry);
  }

  @Override
  public void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict v, boolean forwarded) {
    String k = v.getRoute() + "|" + v.getDisposition() + "|" + v.getLayer() + "|" + v.getReason();
    counters.computeIfAbsent(k, x -> Counter.builder("onceguard.verdicts")
            .description("final verdicts on consumed records")
            .tag("route", v.getRoute())
            .tag("disposition", v.getDisposition().name())
            .tag("layer", v.getLayer().name())
            .tag("reason", v.getReason().name())
            .register(registry))
        .increment();
  }

  /** The scrape text, as served (for tests and logs). */
  public String scrape() {
    return registry.scrape();
  }

  @Override
  public void close() {
    server.stop(0);
    registry.close();
  }
}
