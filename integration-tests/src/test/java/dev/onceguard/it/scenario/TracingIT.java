package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.OutputStreamAppender;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.proxy.ops.LogFormat;
import dev.onceguard.proxy.trace.Tracing;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.HandleResult.Outcome;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.StreamSupport;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Tracing and JSON logs on the real stack (Kafka, MariaDB, Redis, a real gRPC business over
 * netty): three records, each with its own {@code traceparent} — one accepted, a duplicate of it,
 * one the business rejects (escalated). Spans go to the SDK's in-memory exporter; the business
 * records the {@code traceparent} metadata of each call; the escalation topic and the JSON log
 * lines are read back.
 */
class TracingIT {
  private static final String TRACE_ACCEPTED = "0af7651916cd43dd8448eb211c80319c";
  private static final String TRACE_DUPLICATE = "1af7651916cd43dd8448eb211c80319c";
  private static final String TRACE_REJECTED = "2af7651916cd43dd8448eb211c80319c";
  private static final String PARENT_SPAN = "b7ad6b7169203331";
  private static final Metadata.Key<String> TRACEPARENT = Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);

  @Test
  void spansChainPerRecord_businessAndEscalationCarryTheTrace_jsonLogLinesCarryTheFields() throws Exception {
    InMemorySpanExporter spans = InMemorySpanExporter.create();
    // business call metadata by line id
    Map<String, String> businessTraceparents = new ConcurrentHashMap<>();
    ByteArrayOutputStream jsonLog = new ByteArrayOutputStream();
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    ch.qos.logback.classic.Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    OutputStreamAppender<ILoggingEvent> json = new OutputStreamAppender<>();
    json.setContext(ctx);
    json.setEncoder(LogFormat.jsonEncoder(ctx));
    json.setOutputStream(jsonLog);
    json.start();
    root.addAppender(json);
    Server business = startBusiness(businessTraceparents);
    try (OneRouteEnv env = new OneRouteEnv("trace", 1);
        SdkTracerProvider provider = SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(spans)).build();
        InProcessSidecar sidecar = InProcessSidecar.start(env.config("127.0.0.1:" + business.getPort()), Tracing.of(provider))) {

      env.kafka.produce(List.of(
          traced(env.record("l-ok", "create", "m-1"), TRACE_ACCEPTED),
          traced(env.record("l-ok", "create", "m-2"), TRACE_DUPLICATE),
          traced(env.record("l-rej", "create", "m-3"), TRACE_REJECTED)));

      await().atMost(Duration.ofSeconds(30)).until(() -> env.kafka.readAll(env.verdicts).size() == 3);

      // accepted: consume continues the incoming trace; claim, handle, confirm are its children;
      // the business got the handle span's context
      SpanData consume = consumeOf(spans, TRACE_ACCEPTED);
      assertThat(consume.getParentSpanId()).isEqualTo(PARENT_SPAN);
      assertThat(str(consume, "onceguard.verdict")).isEqualTo("ACCEPTED");
      assertThat(str(consume, "onceguard.entity_id")).isEqualTo("l-ok");
      assertThat(str(consume, "messaging.destination.name")).isEqualTo(env.topic);
      SpanData handle = childOf(spans, consume, "onceguard.handle");
      childOf(spans, consume, "onceguard.claim");
      childOf(spans, consume, "onceguard.confirm");
      assertThat(businessTraceparents.get("l-ok")).isEqualTo("00-" + TRACE_ACCEPTED + "-" + handle.getSpanId() + "-01");

      // duplicate: its own trace, claim only, never at the business
      SpanData dup = consumeOf(spans, TRACE_DUPLICATE);
      assertThat(str(dup, "onceguard.verdict")).isEqualTo("DUPLICATE_IGNORE");
      childOf(spans, dup, "onceguard.claim");
      assertThat(spans.getFinishedSpanItems()).filteredOn(s -> s.getTraceId().equals(TRACE_DUPLICATE))
          .extracting(SpanData::getName).doesNotContain("onceguard.handle");

      // rejected: handle, abort, escalate; the escalated record carries the escalate span's context
      SpanData rejected = consumeOf(spans, TRACE_REJECTED);
      assertThat(str(rejected, "onceguard.reason")).isEqualTo("BUSINESS_REJECTED");
      childOf(spans, rejected, "onceguard.abort");
      SpanData escalate = childOf(spans, rejected, "onceguard.escalate");
      ConsumerRecord<byte[], byte[]> escalated = env.kafka.readAll(env.escalations).get(0);
      List<Header> tps = StreamSupport.stream(escalated.headers().headers("traceparent").spliterator(), false).toList();
      assertThat(tps).as("one traceparent: the source's is replaced").hasSize(1);
      assertThat(new String(tps.get(0).value(), StandardCharsets.US_ASCII))
          .isEqualTo("00-" + TRACE_REJECTED + "-" + escalate.getSpanId() + "-01");
    } finally {
      business.shutdownNow();
      root.detachAppender(json);
      json.stop();
    }

    // the escalation's log line, as the JSON format writes it
    ObjectMapper mapper = new ObjectMapper();
    List<JsonNode> lines = new ArrayList<>();
    for (String line : jsonLog.toString(StandardCharsets.UTF_8).split("\n")) {
      lines.add(mapper.readTree(line));
    }
    JsonNode line = lines.stream().filter(l -> l.path("message").asText().contains("escalated BUSINESS_REJECTED")).findFirst()
        .orElseThrow(() -> new AssertionError("no escalation line in " + lines));
    assertThat(line.path("route").asText()).isEqualTo("lines");
    assertThat(line.path("partition").asInt()).isZero();
    assertThat(line.path("offset").asLong()).isEqualTo(2);
    assertThat(line.path("entity").asText()).isEqualTo("l-rej");
    assertThat(line.path("dedup_key").asText()).hasSize(64);
    assertThat(line.path("verdict").asText()).isEqualTo("ILLEGAL_TRANSITION_ESCALATE");
    assertThat(line.path("reason").asText()).isEqualTo("BUSINESS_REJECTED");
    assertThat(line.path("trace_id").asText()).isEqualTo(TRACE_REJECTED);
  }

  private static ProducerRecord<byte[], byte[]> traced(ProducerRecord<byte[], byte[]> r, String traceId) {
    r.headers().add("traceparent", ("00-" + traceId + "-" + PARENT_SPAN + "-01").getBytes(StandardCharsets.US_ASCII));
    return r;
  }

  /** A business over netty: OK for every line but {@code l-rej}, which it rejects; records each call's traceparent. */
  private static Server startBusiness(Map<String, String> traceparents) throws Exception {
    io.grpc.Context.Key<String> tpKey = io.grpc.Context.key("traceparent");
    ServerInterceptor recordTrace = new ServerInterceptor() {
      @Override
      public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
        String tp = headers.get(TRACEPARENT);
        return io.grpc.Contexts.interceptCall(io.grpc.Context.current().withValue(tpKey, tp == null ? "" : tp), call, headers, next);
      }
    };
    MessageHandlerGrpc.MessageHandlerImplBase handler = new MessageHandlerGrpc.MessageHandlerImplBase() {
      @Override
      public void handle(Delivery d, StreamObserver<HandleResult> out) {
        String line = d.getEntityId();
        traceparents.put(line, tpKey.get());
        out.onNext(HandleResult.newBuilder().setOutcome(line.equals("l-rej") ? Outcome.REJECT : Outcome.OK)
            .setMessage(line.equals("l-rej") ? "no such warehouse" : "").build());
        out.onCompleted();
      }
    };
    return NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", RecordingBusiness.freePort()),
            InsecureServerCredentials.create())
        .addService(ServerInterceptors.intercept(handler, recordTrace)).build().start();
  }

  private static SpanData consumeOf(InMemorySpanExporter spans, String traceId) {
    return spans.getFinishedSpanItems().stream()
        .filter(s -> s.getName().equals("onceguard.consume") && s.getTraceId().equals(traceId))
        .findFirst().orElseThrow(() -> new AssertionError("no consume span in trace " + traceId + ": " + spans.getFinishedSpanItems()));
  }

  private static SpanData childOf(InMemorySpanExporter spans, SpanData parent, String name) {
    return spans.getFinishedSpanItems().stream()
        .filter(s -> s.getName().equals(name) && s.getParentSpanId().equals(parent.getSpanId()))
        .findFirst().orElseThrow(() -> new AssertionError("no " + name + " under " + parent.getSpanId()));
  }

  private static String str(SpanData s, String key) {
    return s.getAttributes().get(AttributeKey.stringKey(key));
  }
}
