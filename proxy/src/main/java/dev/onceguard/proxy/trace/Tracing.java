package dev.onceguard.proxy.trace;

import dev.onceguard.proxy.config.TracingConfig;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.TracerProvider;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * The sidecar's spans, through the OpenTelemetry API: one {@code onceguard.consume} span per record
 * ({@link #consume}), continuing the record's W3C {@code traceparent} header when it has one, with
 * the protocol's steps as its children ({@link RecordSpan}).
 *
 * <p>Off ({@link #off()}, the default) it does nothing at all: no header is read, no span or
 * attribute is made, and no SDK class is loaded; the SDK and the exporter live in
 * {@link OtlpTracing}, which only a configured endpoint reaches.
 *
 * <p>Thread-safe; one per sidecar. {@link #close()} flushes and stops the exporter, if any.
 */
public final class Tracing implements AutoCloseable {
  /** Instrumentation scope of the spans. */
  static final String SCOPE = "dev.onceguard.sidecar";
  private static final Tracing OFF = new Tracing(null, () -> {});

  /** Reads the W3C trace context from a record's headers (the last value of a repeated header wins). */
  private static final TextMapGetter<Headers> KAFKA_HEADERS = new TextMapGetter<>() {
    @Override
    public Iterable<String> keys(Headers carrier) {
      List<String> keys = new ArrayList<>();
      for (Header h : carrier) {
        keys.add(h.key());
      }
      return keys;
    }

    @Override
    public String get(Headers carrier, String key) {
      if (carrier == null) {
        return null;
      }
      Header h = carrier.lastHeader(key);
      return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }
  };

  /** {@code null}: off. */
  private final Tracer tracer;
  private final Runnable shutdown;

  Tracing(Tracer tracer, Runnable shutdown) {
    this.tracer = tracer;
    this.shutdown = shutdown;
  }

  /** No spans. */
  public static Tracing off() {
    return OFF;
  }

  /**
   * Spans through {@code provider} (tests pass an SDK provider with an in-memory exporter). The
   * provider stays the caller's: {@link #close()} does not shut it down.
   */
  public static Tracing of(TracerProvider provider) {
    return new Tracing(provider.get(SCOPE), () -> {});
  }

  /** Off without an endpoint; otherwise an OTLP/HTTP exporter, service name {@code serviceName}. */
  public static Tracing fromConfig(TracingConfig config, String serviceName) {
    return config.enabled() ? OtlpTracing.start(config, serviceName) : OFF;
  }

  public boolean enabled() {
    return tracer != null;
  }

  /**
   * Starts the record's {@code onceguard.consume} span: a child of the record's
   * {@code traceparent} when it carries a valid one, the root of a new trace otherwise. Returns
   * {@link RecordSpan#NONE} when off. The caller ends it ({@link RecordSpan#end}).
   */
  public RecordSpan consume(String route, ConsumerRecord<byte[], byte[]> record) {
    if (tracer == null) {
      return RecordSpan.NONE;
    }
    Context parent = W3CTraceContextPropagator.getInstance().extract(Context.root(), record.headers(), KAFKA_HEADERS);
    Span span = tracer.spanBuilder("onceguard.consume")
        .setParent(parent)
        .setSpanKind(SpanKind.CONSUMER)
        .startSpan();
    RecordSpan rs = new RecordSpan(tracer, span);
    rs.record(route, record);
    return rs;
  }

  @Override
  public void close() {
    shutdown.run();
  }
}
