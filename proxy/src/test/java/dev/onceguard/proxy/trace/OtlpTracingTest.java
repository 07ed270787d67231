package dev.onceguard.proxy.trace;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import dev.onceguard.proxy.config.TracingConfig;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

/**
 * The configured exporter end to end: spans of a record posted as OTLP http/protobuf to a local
 * HTTP receiver at {@code <endpoint>/v1/traces}, with the instance id as {@code service.name};
 * and tracing off makes no span at all.
 */
class OtlpTracingTest {

  record Post(String path, String contentType, byte[] body) {}

  @Test
  void configuredEndpoint_spansArePostedAsOtlpProtobuf_onClose() throws Exception {
    List<Post> posts = new CopyOnWriteArrayList<>();
    HttpServer receiver = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    receiver.createContext("/", ex -> {
      posts.add(new Post(ex.getRequestURI().getPath(), ex.getRequestHeaders().getFirst("Content-Type"), ex.getRequestBody().readAllBytes()));
      ex.sendResponseHeaders(200, -1);
      ex.close();
    });
    receiver.start();
    try {
      Tracing tracing = Tracing.fromConfig(new TracingConfig("http://127.0.0.1:" + receiver.getAddress().getPort() + "/", 1.0),
          "sidecar-7");
      assertThat(tracing.enabled()).isTrue();
      RecordSpan span = tracing.consume("orders", new ConsumerRecord<>("orders-topic", 3, 17L, null, null));
      RecordSpan.end(span.step("onceguard.claim"), "Accepted", null);
      span.end(null);
      tracing.close(); // flushes the batch

      assertThat(posts).isNotEmpty();
      Post p = posts.get(0);
      assertThat(p.path()).isEqualTo("/v1/traces");
      assertThat(p.contentType()).isEqualTo("application/x-protobuf");
      String body = new String(p.body(), StandardCharsets.ISO_8859_1);
      assertThat(body).contains("onceguard.consume", "onceguard.claim", "sidecar-7", "orders-topic");
    } finally {
      receiver.stop(0);
    }
  }

  @Test
  void off_noSpanAndNoContext() {
    Tracing off = Tracing.fromConfig(TracingConfig.OFF, "sidecar-7");
    RecordSpan span = off.consume("orders", new ConsumerRecord<>("orders-topic", 3, 17L, null, null));

    assertThat(off.enabled()).isFalse();
    assertThat(span).isSameAs(RecordSpan.NONE);
    assertThat(span.spanContext().isValid()).isFalse();
    assertThat(RecordSpan.traceparent(span.step("onceguard.escalate"))).isNull();
  }
}
