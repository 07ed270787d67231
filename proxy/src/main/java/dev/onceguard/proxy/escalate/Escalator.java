package dev.onceguard.proxy.escalate;

import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Writes escalated records (and, optionally, every verdict) to Kafka through one idempotent
 * producer ({@code acks=all}, {@code enable.idempotence=true}). The stage completes only when
 * the broker acknowledged the write: the caller commits the source offset after that, never
 * before. Failed writes are counted per route ({@link #failedWrites}). Thread-safe; one per
 * sidecar; owns its producer.
 */
public final class Escalator implements EscalationSink, AutoCloseable {
  /** What a write carries. */
  public enum Kind {
    /** An escalated record, to the route's escalation topic. */
    ESCALATION,
    /** A verdict, to the route's verdict topic. */
    VERDICT
  }

  private record FailureKey(String route, Kind kind) {}

  /** The W3C trace context header. */
  private static final String TRACEPARENT = "traceparent";

  private final KafkaProducer<byte[], byte[]> producer;
  private final Map<FailureKey, LongAdder> failures = new ConcurrentHashMap<>();
  /**
   * {@code KafkaProducer.send} may block (metadata, full buffer) up to {@code max.block.ms}; it
   * runs here so that no poll thread, timer or I/O event loop ever waits on it.
   */
  private final java.util.concurrent.ExecutorService sender = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "onceguard-escalator");
    t.setDaemon(true);
    return t;
  });

  public Escalator(String bootstrapServers, Map<String, String> userProperties, String clientId) {
    this.producer = new KafkaProducer<>(producerProperties(bootstrapServers, userProperties, clientId), new ByteArraySerializer(),
        new ByteArraySerializer());
  }

  /** The producer's configuration: {@code kafka.properties}, then the settings the escalation path must own. */
  public static Properties producerProperties(String bootstrapServers, Map<String, String> userProperties, String clientId) {
    Properties p = new Properties();
    p.putAll(userProperties);
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
    p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    // One request in flight: with several, a first request that fails (NOT_LEADER_OR_FOLLOWER on a
    // partition that is moving or new) can be overtaken by a later one, and its retries then fail
    // OUT_OF_ORDER_SEQUENCE_NUMBER until the delivery timeout (KAFKA-14359); an escalation would
    // stall for that long. Escalations are rare, and one request carries every partition's batch.
    p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return p;
  }

  /**
   * Copies {@code source} (key, value, headers) to {@code topic} with the verdict's
   * {@code onceguard-*} headers appended. Completes exceptionally if the write failed; the caller
   * retries.
   */
  @Override
  public CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis) {
    return escalate(topic, source, v, nowMillis, null);
  }

  @Override
  public CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis,
      String traceparent) {
    List<Header> hs = new ArrayList<>();
    for (Header h : source.headers()) {
      // the source's traceparent is replaced by the escalation's, a child of it in the same trace
      // (a tracestate stays: the SDK hands it on to child spans unchanged)
      if (traceparent == null || !h.key().equals(TRACEPARENT)) {
        hs.add(h);
      }
    }
    if (traceparent != null) {
      add(hs, TRACEPARENT, traceparent);
    }
    add(hs, Headers.DISPOSITION, v.getDisposition().name());
    add(hs, Headers.REASON, v.getReason().name());
    add(hs, Headers.LAYER, v.getLayer().name());
    add(hs, Headers.DETAIL, v.getDetail());
    add(hs, Headers.ROUTE, v.getRoute());
    if (!v.getCurrentState().isEmpty()) {
      add(hs, Headers.CURRENT_STATE, v.getCurrentState());
      add(hs, Headers.CURRENT_VERSION, Long.toString(v.getCurrentVersion()));
    }
    if (v.getExpectedFromStatesCount() > 0) {
      add(hs, Headers.EXPECTED_FROM, String.join(",", v.getExpectedFromStatesList()));
    }
    if (!v.getEntityId().isEmpty()) {
      add(hs, Headers.ENTITY_ID, v.getEntityId());
    }
    if (!v.getEvent().isEmpty()) {
      add(hs, Headers.EVENT, v.getEvent());
    }
    if (!v.getDedupKey().isEmpty()) {
      add(hs, Headers.DEDUP_KEY, v.getDedupKey());
    }
    if (v.hasApplied()) {
      add(hs, Headers.APPLIED_BUSINESS_KEY, v.getApplied().getBusinessKey());
      add(hs, Headers.APPLIED_DEDUP_KEY, v.getApplied().getDedupKey());
      add(hs, Headers.APPLIED_TOPIC, v.getApplied().getSourceTopic());
      add(hs, Headers.APPLIED_PARTITION, Integer.toString(v.getApplied().getSourcePartition()));
      add(hs, Headers.APPLIED_OFFSET, Long.toString(v.getApplied().getSourceOffset()));
    }
    add(hs, Headers.ORIGINAL_TOPIC, source.topic());
    add(hs, Headers.ORIGINAL_PARTITION, Integer.toString(source.partition()));
    add(hs, Headers.ORIGINAL_OFFSET, Long.toString(source.offset()));
    add(hs, Headers.TIMESTAMP, Long.toString(nowMillis));
    return send(new ProducerRecord<>(topic, null, source.key(), source.value(), hs), failureCount(v.getRoute(), Kind.ESCALATION));
  }

  /** Publishes a verdict (protobuf-encoded {@link Verdict}, keyed by dedup key or entity). */
  @Override
  public CompletionStage<Void> publishVerdict(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v) {
    String key = !v.getDedupKey().isEmpty() ? v.getDedupKey() : source.topic() + "/" + source.partition() + "@" + source.offset();
    List<Header> hs = new ArrayList<>();
    add(hs, Headers.DISPOSITION, v.getDisposition().name());
    add(hs, Headers.REASON, v.getReason().name());
    add(hs, Headers.ORIGINAL_TOPIC, source.topic());
    add(hs, Headers.ORIGINAL_PARTITION, Integer.toString(source.partition()));
    add(hs, Headers.ORIGINAL_OFFSET, Long.toString(source.offset()));
    return send(new ProducerRecord<>(topic, null, key.getBytes(StandardCharsets.UTF_8), v.toByteArray(), hs),
        failureCount(v.getRoute(), Kind.VERDICT));
  }

  /**
   * Writes of {@code kind} for {@code route} that failed so far (each is retried by its caller;
   * a missing topic, a broker that is down or a refused authorization keep it failing).
   */
  public long failedWrites(String route, Kind kind) {
    return failureCount(route, kind).sum();
  }

  private LongAdder failureCount(String route, Kind kind) {
    return failures.computeIfAbsent(new FailureKey(route, kind), k -> new LongAdder());
  }

  private CompletionStage<Void> send(ProducerRecord<byte[], byte[]> rec, LongAdder failed) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    done.whenComplete((x, e) -> {
      if (e != null) {
        failed.increment();
      }
    });
    try {
      sender.execute(() -> {
        try {
          producer.send(rec, (md, e) -> {
            if (e != null) {
              done.completeExceptionally(e);
            } else {
              done.complete(null);
            }
          });
        } catch (RuntimeException e) {
          done.completeExceptionally(e);
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException e) {
      done.completeExceptionally(e); // closed
    }
    return done;
  }

  private static void add(List<Header> hs, String k, String v) {
    hs.add(new RecordHeader(k, v.getBytes(StandardCharsets.UTF_8)));
  }

  @Override
  public void close() {
    sender.shutdown();
    try {
      sender.awaitTermination(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    producer.close(java.time.Duration.ofSeconds(10));
  }
}
