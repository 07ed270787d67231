package dev.onceguard.proxy.trace;

import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.v1.Verdict;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * One record's {@code onceguard.consume} span and the steps under it ({@code onceguard.claim},
 * {@code onceguard.handle}, {@code onceguard.confirm}, {@code onceguard.abort},
 * {@code onceguard.escalate}). Attributes are only set on spans that record (sampled), so an
 * unsampled record allocates none. {@link #NONE} (tracing off) does nothing and returns the
 * invalid span everywhere.
 *
 * <p>Thread-safe as the spans are: a record's steps run one at a time, on whatever thread.
 */
public final class RecordSpan {
  /** Tracing off. */
  public static final RecordSpan NONE = new RecordSpan(null, Span.getInvalid());

  static final AttributeKey<String> ROUTE = AttributeKey.stringKey("onceguard.route");
  static final AttributeKey<String> SYSTEM = AttributeKey.stringKey("messaging.system");
  static final AttributeKey<String> TOPIC = AttributeKey.stringKey("messaging.destination.name");
  static final AttributeKey<String> PARTITION = AttributeKey.stringKey("messaging.destination.partition.id");
  static final AttributeKey<Long> OFFSET = AttributeKey.longKey("messaging.kafka.offset");
  static final AttributeKey<String> DEDUP_KEY = AttributeKey.stringKey("onceguard.dedup_key");
  static final AttributeKey<String> ENTITY = AttributeKey.stringKey("onceguard.entity_id");
  static final AttributeKey<String> EVENT = AttributeKey.stringKey("onceguard.event");
  static final AttributeKey<String> DISPOSITION = AttributeKey.stringKey("onceguard.verdict");
  static final AttributeKey<String> REASON = AttributeKey.stringKey("onceguard.reason");
  static final AttributeKey<String> LAYER = AttributeKey.stringKey("onceguard.layer");
  static final AttributeKey<Long> ATTEMPT = AttributeKey.longKey("onceguard.attempt");
  static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("onceguard.outcome");

  /** {@code null}: off. */
  private final Tracer tracer;
  private final Span span;
  private final Context context;

  RecordSpan(Tracer tracer, Span span) {
    this.tracer = tracer;
    this.span = span;
    this.context = tracer == null ? Context.root() : Context.root().with(span);
  }

  void record(String route, ConsumerRecord<byte[], byte[]> r) {
    if (span.isRecording()) {
      span.setAttribute(ROUTE, route);
      span.setAttribute(SYSTEM, "kafka");
      span.setAttribute(TOPIC, r.topic());
      span.setAttribute(PARTITION, Integer.toString(r.partition()));
      span.setAttribute(OFFSET, r.offset());
    }
  }

  /** What the extractor read: entity, event and the dedup key (the business key's SHA-256). */
  public void event(ExtractedEvent e) {
    if (span.isRecording()) {
      span.setAttribute(DEDUP_KEY, e.dedupKey());
      if (e.entityId() != null) {
        span.setAttribute(ENTITY, e.entityId());
      }
      if (e.event() != null) {
        span.setAttribute(EVENT, e.event());
      }
    }
  }

  /** The record's verdict: disposition, reason and layer on the consume span. */
  public void verdict(Verdict v) {
    if (span.isRecording()) {
      span.setAttribute(DISPOSITION, v.getDisposition().name());
      span.setAttribute(REASON, v.getReason().name());
      span.setAttribute(LAYER, v.getLayer().name());
    }
  }

  /** Starts a step under the consume span. */
  public Span step(String name) {
    return tracer == null ? Span.getInvalid() : tracer.spanBuilder(name).setParent(context).startSpan();
  }

  /** Starts the business call's span (kind CLIENT) for attempt {@code attempt}. */
  public Span handle(int attempt) {
    if (tracer == null) {
      return Span.getInvalid();
    }
    Span s = tracer.spanBuilder("onceguard.handle").setParent(context).setSpanKind(SpanKind.CLIENT).startSpan();
    if (s.isRecording()) {
      s.setAttribute(ATTEMPT, attempt);
    }
    return s;
  }

  /** Ends a step with its outcome ({@code null}: none to tell); a failure marks it an error. */
  public static void end(Span step, String outcome, Throwable failure) {
    if (step.isRecording()) {
      if (outcome != null) {
        step.setAttribute(OUTCOME, outcome);
      }
      if (failure != null) {
        step.setStatus(StatusCode.ERROR, String.valueOf(failure.getMessage()));
      }
    }
    step.end();
  }

  /** The consume span's context, for logs. Invalid when off. */
  public SpanContext spanContext() {
    return span.getSpanContext();
  }

  /** The context a step's work runs in (its span as the current one). */
  public static Context contextOf(Span step) {
    return step.getSpanContext().isValid() ? Context.root().with(step) : Context.root();
  }

  /** The W3C {@code traceparent} of {@code step}; {@code null} when it has no valid context (tracing off). */
  public static String traceparent(Span step) {
    if (!step.getSpanContext().isValid()) {
      return null;
    }
    String[] out = new String[1];
    W3CTraceContextPropagator.getInstance().inject(Context.root().with(step), out, (carrier, key, value) -> {
      if ("traceparent".equals(key)) {
        carrier[0] = value;
      }
    });
    return out[0];
  }

  /** Ends the consume span; {@code failure} (a cancellation) marks it an error. */
  public void end(Throwable failure) {
    end(span, null, failure);
  }
}
