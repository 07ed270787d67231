package dev.onceguard.proxy.guard;

import static dev.onceguard.proxy.guard.OrderRoute.MACHINE;
import static dev.onceguard.proxy.guard.OrderRoute.OWNER;
import static dev.onceguard.proxy.guard.OrderRoute.ROUTE;
import static dev.onceguard.proxy.guard.OrderRoute.record;
import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.OutputStreamAppender;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.GrpcDispatcher;
import dev.onceguard.proxy.ops.LogFormat;
import dev.onceguard.proxy.pipeline.Cancellation;
import dev.onceguard.proxy.pipeline.DeliveryIds;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.proxy.trace.Tracing;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.MessageHandlerGrpc;
import dev.onceguard.v1.HandleResult.Outcome;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * Spans and structured log fields of one record through the guarded processor: the real
 * {@link Guard} over a {@link FakeGuardStore}, the real {@link GrpcDispatcher} calling an
 * in-process business that records the call's {@code traceparent} metadata, spans collected by
 * the SDK's in-memory exporter. Everything runs on the test's thread (direct executors, fake time).
 */
class GuardedProcessorTracingTest {
  private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
  private static final String PARENT_SPAN = "00f067aa0ba902b7";
  private static final String TRACEPARENT = "00-" + TRACE_ID + "-" + PARENT_SPAN + "-01";
  private static final Metadata.Key<String> TRACEPARENT_KEY = Metadata.Key.of("traceparent", Metadata.ASCII_STRING_MARSHALLER);

  private final FakeTime time = new FakeTime(1_000_000L);
  private final FakeGuardStore store = new FakeGuardStore();
  private final FakeEscalator escalator = new FakeEscalator();
  private final Guard guard = new Guard(store, IdempotencyCache.DISABLED, Map.of("order", MACHINE), time, OWNER, time);
  private final InMemorySpanExporter spans = InMemorySpanExporter.create();
  private final SdkTracerProvider provider = SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(spans)).build();
  /** The traceparent metadata of each business call ("" when absent). */
  private final List<String> businessTraceparents = new CopyOnWriteArrayList<>();
  private Server business;
  private GrpcDispatcher dispatcher;
  private GuardedProcessor processor;

  @BeforeEach
  void startBusiness() throws Exception {
    String name = InProcessServerBuilder.generateName();
    ServerInterceptor recordTrace = new ServerInterceptor() {
      @Override
      public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
        String tp = headers.get(TRACEPARENT_KEY);
        businessTraceparents.add(tp == null ? "" : tp);
        return next.startCall(call, headers);
      }
    };
    business = InProcessServerBuilder.forName(name).directExecutor()
        .addService(ServerInterceptors.intercept(new MessageHandlerGrpc.MessageHandlerImplBase() {
          @Override
          public void handle(Delivery request, StreamObserver<HandleResult> out) {
            out.onNext(HandleResult.newBuilder().setOutcome(Outcome.OK).build());
            out.onCompleted();
          }
        }, recordTrace)).build().start();
    dispatcher = new GrpcDispatcher("in-process:" + name, InProcessChannelBuilder.forName(name).directExecutor().build());
    Backoff backoff = new Backoff(Duration.ofMillis(100), Duration.ofSeconds(10), new Random(1));
    processor = new GuardedProcessor(ROUTE, MACHINE, guard, dispatcher, escalator, time, backoff, new DeliveryIds("run"),
        (r, v, f) -> {}, Tracing.of(provider));
  }

  @AfterEach
  void stop() {
    dispatcher.close();
    business.shutdownNow();
    provider.close();
  }

  private void process(ConsumerRecord<byte[], byte[]> r) {
    CompletableFuture<Void> f = processor.process(r, new Cancellation()).toCompletableFuture();
    assertThat(f).isCompleted();
  }

  private static ConsumerRecord<byte[], byte[]> traced(ConsumerRecord<byte[], byte[]> r) {
    r.headers().add("traceparent", TRACEPARENT.getBytes(StandardCharsets.US_ASCII));
    return r;
  }

  private SpanData only(String name) {
    List<SpanData> found = spans.getFinishedSpanItems().stream().filter(s -> s.getName().equals(name)).toList();
    assertThat(found).as(name).hasSize(1);
    return found.get(0);
  }

  private static String attr(SpanData s, String key) {
    return s.getAttributes().get(AttributeKey.stringKey(key));
  }

  @Test
  void accepted_consumeContinuesTheIncomingTrace_stepsAreItsChildren_businessGetsTheHandleSpansTraceparent() {
    store.entity("o-1", "to_ship");

    process(traced(record(41, "o-1", "ship")));

    SpanData consume = only("onceguard.consume");
    assertThat(consume.getTraceId()).isEqualTo(TRACE_ID);
    assertThat(consume.getParentSpanId()).isEqualTo(PARENT_SPAN);
    assertThat(consume.getKind()).isEqualTo(SpanKind.CONSUMER);
    assertThat(attr(consume, "onceguard.route")).isEqualTo("orders");
    assertThat(attr(consume, "messaging.destination.name")).isEqualTo("orders");
    assertThat(attr(consume, "messaging.destination.partition.id")).isEqualTo("0");
    assertThat(consume.getAttributes().get(AttributeKey.longKey("messaging.kafka.offset"))).isEqualTo(41L);
    assertThat(attr(consume, "onceguard.entity_id")).isEqualTo("o-1");
    assertThat(attr(consume, "onceguard.dedup_key")).hasSize(64);
    assertThat(attr(consume, "onceguard.verdict")).isEqualTo("ACCEPTED");
    for (String step : List.of("onceguard.claim", "onceguard.handle", "onceguard.confirm")) {
      SpanData s = only(step);
      assertThat(s.getTraceId()).as(step).isEqualTo(TRACE_ID);
      assertThat(s.getParentSpanId()).as(step + " is a child of consume").isEqualTo(consume.getSpanId());
    }
    SpanData handle = only("onceguard.handle");
    assertThat(handle.getKind()).isEqualTo(SpanKind.CLIENT);
    assertThat(attr(handle, "onceguard.outcome")).isEqualTo("OK");
    assertThat(businessTraceparents).containsExactly("00-" + TRACE_ID + "-" + handle.getSpanId() + "-01");
  }

  @Test
  void withoutTraceparent_consumeIsTheRootOfANewTrace() {
    store.entity("o-1", "to_ship");

    process(record(41, "o-1", "ship"));

    SpanData consume = only("onceguard.consume");
    assertThat(consume.getParentSpanContext().isValid()).isFalse();
    assertThat(consume.getTraceId()).isNotEqualTo(TRACE_ID);
    assertThat(businessTraceparents).singleElement().asString().contains(consume.getTraceId());
  }

  @Test
  void duplicate_consumeAndClaimOnly_verdictOnTheConsumeSpan() {
    store.entity("o-1", "shipped");
    // the ledger already holds the fact, applied from offset 41
    store.claims.add(cmd -> CompletableFuture.completedFuture(new ClaimOutcome.LedgerConflict(new LedgerRow("orders",
        cmd.extracted().dedupKey(), cmd.extracted().businessKey(), cmd.extracted().fingerprint(), "DONE", "owner-other", null,
        "orders", 0, 41, "to_ship", "shipped", 1, null, null, cmd.nowMillis() - 1_000))));

    process(traced(record(42, "o-1", "ship")));

    SpanData consume = only("onceguard.consume");
    assertThat(attr(consume, "onceguard.verdict")).isEqualTo("DUPLICATE_IGNORE");
    assertThat(only("onceguard.claim").getParentSpanId()).isEqualTo(consume.getSpanId());
    assertThat(spans.getFinishedSpanItems()).extracting(SpanData::getName).containsExactlyInAnyOrder("onceguard.claim",
        "onceguard.consume");
    assertThat(businessTraceparents).as("the duplicate never reached the business").isEmpty();
  }

  @Test
  void escalation_escalateSpanIsAChildOfConsume_andTheEscalatedRecordCarriesItsTraceparent() {
    store.entity("o-1", "cancelled");

    process(traced(record(41, "o-1", "ship")));

    SpanData consume = only("onceguard.consume");
    SpanData escalate = only("onceguard.escalate");
    assertThat(escalate.getParentSpanId()).isEqualTo(consume.getSpanId());
    assertThat(attr(consume, "onceguard.verdict")).isEqualTo("ILLEGAL_TRANSITION_ESCALATE");
    assertThat(attr(consume, "onceguard.reason")).isEqualTo("ILLEGAL_TRANSITION");
    assertThat(escalator.traceparents).containsExactly("00-" + TRACE_ID + "-" + escalate.getSpanId() + "-01");
    assertThat(businessTraceparents).isEmpty();
  }

  @Test
  void tracingOff_noTraceMetadataToTheBusiness_noTraceparentForTheEscalation() {
    processor = new GuardedProcessor(ROUTE, MACHINE, guard, dispatcher, escalator, time, Backoff.of(ROUTE.delivery().retry()),
        new DeliveryIds("run"), (r, v, f) -> {});
    store.entity("o-1", "to_ship");
    store.entity("o-2", "cancelled");

    process(traced(record(41, "o-1", "ship")));
    process(traced(record(42, "o-2", "ship")));

    assertThat(spans.getFinishedSpanItems()).isEmpty();
    assertThat(businessTraceparents).containsExactly("");
    assertThat(escalator.traceparents).containsExactly("");
  }

  @Test
  void jsonLog_escalationLineCarriesTheRecordsFieldsAndTraceIds() throws Exception {
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    ch.qos.logback.classic.Logger logger = ctx.getLogger(GuardedProcessor.class);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    OutputStreamAppender<ILoggingEvent> json = new OutputStreamAppender<>();
    json.setContext(ctx);
    json.setEncoder(LogFormat.jsonEncoder(ctx));
    json.setOutputStream(out);
    json.start();
    Level level = logger.getLevel();
    logger.setLevel(Level.INFO);
    logger.addAppender(json);
    try {
      store.entity("o-1", "cancelled");
      process(traced(record(41, "o-1", "ship")));
    } finally {
      logger.detachAppender(json);
      logger.setLevel(level);
      json.stop();
    }

    List<JsonNode> lines = new ArrayList<>();
    ObjectMapper mapper = new ObjectMapper();
    for (String line : out.toString(StandardCharsets.UTF_8).split("\n")) {
      lines.add(mapper.readTree(line)); // every line is one JSON object
    }
    JsonNode escalated = lines.stream().filter(l -> l.path("message").asText().contains("escalated")).findFirst().orElseThrow();
    SpanData consume = only("onceguard.consume");
    assertThat(escalated.path("level").asText()).isEqualTo("INFO");
    assertThat(escalated.path("route").asText()).isEqualTo("orders");
    assertThat(escalated.path("topic").asText()).isEqualTo("orders");
    assertThat(escalated.path("partition").asInt()).isEqualTo(0);
    assertThat(escalated.path("offset").asLong()).isEqualTo(41);
    assertThat(escalated.path("entity").asText()).isEqualTo("o-1");
    assertThat(escalated.path("dedup_key").asText()).isEqualTo(attr(consume, "onceguard.dedup_key"));
    assertThat(escalated.path("verdict").asText()).isEqualTo("ILLEGAL_TRANSITION_ESCALATE");
    assertThat(escalated.path("reason").asText()).isEqualTo("ILLEGAL_TRANSITION");
    assertThat(escalated.path("trace_id").asText()).isEqualTo(TRACE_ID);
    assertThat(escalated.path("span_id").asText()).isEqualTo(consume.getSpanId());
  }
}
