package dev.onceguard.proxy.trace;

import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.v1.Verdict;
import io.opentelemetry.api.trace.SpanContext;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * The structured fields of a log line about one record, as SLF4J key-value pairs: {@code route},
 * {@code topic}, {@code partition}, {@code offset}, {@code dedup_key}, {@code entity},
 * {@code event}, {@code verdict}, {@code reason}, and {@code trace_id}/{@code span_id} when the
 * record is traced. The JSON log format writes them as fields of the line; the text format leaves
 * them out (the message says the same in words). On a disabled level the builder is a no-op, so a
 * line that is not logged costs nothing. Stateless.
 */
public final class RecordLog {
  private RecordLog() {}

  /**
   * Adds the record's fields to {@code line}.
   *
   * @param event {@code null} before extraction (or when it failed)
   * @param verdict {@code null} when the line is not about the record's verdict
   * @param trace the record's span ({@link RecordSpan#NONE} when tracing is off)
   */
  public static LoggingEventBuilder fields(LoggingEventBuilder line, String route, ConsumerRecord<?, ?> record, ExtractedEvent event,
      Verdict verdict, RecordSpan trace) {
    line.addKeyValue("route", route)
        .addKeyValue("topic", record.topic())
        .addKeyValue("partition", record.partition())
        .addKeyValue("offset", record.offset());
    if (event != null) {
      line.addKeyValue("dedup_key", event.dedupKey());
      if (event.entityId() != null) {
        line.addKeyValue("entity", event.entityId());
      }
      if (event.event() != null) {
        line.addKeyValue("event", event.event());
      }
    }
    if (verdict != null) {
      line.addKeyValue("verdict", verdict.getDisposition().name())
          .addKeyValue("reason", verdict.getReason().name());
    }
    SpanContext sc = trace.spanContext();
    if (sc.isValid()) {
      line.addKeyValue("trace_id", sc.getTraceId())
          .addKeyValue("span_id", sc.getSpanId());
    }
    return line;
  }
}
