package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.escalate.EscalationSink;
import dev.onceguard.v1.Verdict;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/** Records escalations and published verdicts, each acknowledged at once. Thread-safe. */
final class FakeEscalator implements EscalationSink {
  record Escalation(String topic, long offset, Verdict verdict) {}

  final List<Escalation> escalations = new CopyOnWriteArrayList<>();
  final List<Verdict> published = new CopyOnWriteArrayList<>();
  /** The traceparent each escalation was given, in order ("" for none). */
  final List<String> traceparents = new CopyOnWriteArrayList<>();

  @Override
  public CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis) {
    return escalate(topic, source, v, nowMillis, null);
  }

  @Override
  public CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis,
      String traceparent) {
    escalations.add(new Escalation(topic, source.offset(), v));
    traceparents.add(traceparent == null ? "" : traceparent);
    return CompletableFuture.completedFuture(null);
  }

  @Override
  public CompletionStage<Void> publishVerdict(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v) {
    published.add(v);
    return CompletableFuture.completedFuture(null);
  }
}
