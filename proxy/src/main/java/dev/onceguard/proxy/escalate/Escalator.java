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
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes escalated records (and, optionally, every verdict) to Kafka through one idempotent
 * producer ({@code acks=all}, {@code enable.idempotence=true}). The stage completes only when
 * the broker acknowledged the write: the caller commits the source offset after that, never
 * before. Failed writes are counted per route ({@link #failedWrites}). Thread-safe; one per
 * sidecar; owns its producer.
 *
 * <p><b>A copy the topic cannot take.</b> A source record near the size limit fits its own topic,
 * but its copy, with the {@code onceguard-*} headers added, may not. Such a write fails with
 * {@link RecordTooLargeException} (over the producer's {@code max.request.size}, or the broker's
 * {@code MESSAGE_TOO_LARGE}) or {@link RecordBatchTooLargeException}, neither of which a retry can
 * change, so the caller's retries would hold the partition forever. The copy is then written
 * again without the source's value, then without its own headers, then without its key, then with
 * the detail cut to 1,000 characters, as far as needed, each part left out named in
 * {@link Headers#OMITTED} (the value's size in {@link Headers#ORIGINAL_VALUE_SIZE}); the
 * original's coordinates are on every copy. A verdict record falls back to its detail cut the
 * same way. Any other failure completes the stage exceptionally, for the caller to retry.
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
  /** The longest detail a copy that does not fit keeps, in characters ({@code og_decision.detail}'s size). */
  static final int CUT_DETAIL_CHARS = 1000;

  private static final Logger log = LoggerFactory.getLogger(Escalator.class);

  /** One form of a write: the record, and what it leaves out of the whole one ({@code ""}: nothing). */
  private record Form(ProducerRecord<byte[], byte[]> record, String omitted) {}

  private final Producer<byte[], byte[]> producer;
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
    this(new KafkaProducer<>(producerProperties(bootstrapServers, userProperties, clientId), new ByteArraySerializer(),
        new ByteArraySerializer()));
  }

  /** Over {@code producer}, which it then owns (tests pass a mock). */
  Escalator(Producer<byte[], byte[]> producer) {
    this.producer = producer;
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
    List<Header> own = new ArrayList<>();
    for (Header h : source.headers()) {
      // the source's traceparent is replaced by the escalation's, a child of it in the same trace
      // (a tracestate stays: the SDK hands it on to child spans unchanged)
      if (traceparent == null || !h.key().equals(TRACEPARENT)) {
        own.add(h);
      }
    }
    // the whole copy first; then, while the topic cannot take it, one more part left out
    List<String> parts = new ArrayList<>();
    if (source.value() != null) {
      parts.add(Headers.OMITTED_VALUE);
    }
    if (!own.isEmpty()) {
      parts.add(Headers.OMITTED_HEADERS);
    }
    if (source.key() != null) {
      parts.add(Headers.OMITTED_KEY);
    }
    if (v.getDetail().length() > CUT_DETAIL_CHARS) {
      parts.add(Headers.OMITTED_DETAIL);
    }
    List<Form> forms = new ArrayList<>();
    for (int n = 0; n <= parts.size(); n++) {
      List<String> omitted = parts.subList(0, n);
      List<Header> hs = new ArrayList<>();
      if (!omitted.contains(Headers.OMITTED_HEADERS)) {
        hs.addAll(own);
      }
      if (traceparent != null) {
        add(hs, TRACEPARENT, traceparent);
      }
      addVerdictHeaders(hs, source, v, nowMillis, omitted.contains(Headers.OMITTED_DETAIL));
      if (!omitted.isEmpty()) {
        add(hs, Headers.OMITTED, String.join(",", omitted));
      }
      if (omitted.contains(Headers.OMITTED_VALUE)) {
        add(hs, Headers.ORIGINAL_VALUE_SIZE, Integer.toString(source.value().length));
      }
      forms.add(new Form(new ProducerRecord<>(topic, null, omitted.contains(Headers.OMITTED_KEY) ? null : source.key(),
          omitted.contains(Headers.OMITTED_VALUE) ? null : source.value(), hs), String.join(",", omitted)));
    }
    return send(forms, failureCount(v.getRoute(), Kind.ESCALATION), "escalation of " + coordinates(source));
  }

  /** The verdict's {@code onceguard-*} headers, with the detail cut to {@link #CUT_DETAIL_CHARS} if {@code cutDetail}. */
  private static void addVerdictHeaders(List<Header> hs, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis,
      boolean cutDetail) {
    add(hs, Headers.DISPOSITION, v.getDisposition().name());
    add(hs, Headers.REASON, v.getReason().name());
    add(hs, Headers.LAYER, v.getLayer().name());
    add(hs, Headers.DETAIL, cutDetail ? cut(v.getDetail()) : v.getDetail());
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
    if (v.getDifferingFieldsCount() > 0) {
      add(hs, Headers.DIFFERING_FIELDS, differingFields(v));
      if (v.getDifferingFieldsTruncated()) {
        add(hs, Headers.DIFFERING_FIELDS_TRUNCATED, "true");
      }
    }
    add(hs, Headers.ORIGINAL_TOPIC, source.topic());
    add(hs, Headers.ORIGINAL_PARTITION, Integer.toString(source.partition()));
    add(hs, Headers.ORIGINAL_OFFSET, Long.toString(source.offset()));
    add(hs, Headers.TIMESTAMP, Long.toString(nowMillis));
  }

  /** Publishes a verdict (protobuf-encoded {@link Verdict}, keyed by dedup key or entity). */
  @Override
  public CompletionStage<Void> publishVerdict(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v) {
    String key = !v.getDedupKey().isEmpty() ? v.getDedupKey() : source.topic() + "/" + source.partition() + "@" + source.offset();
    List<Form> forms = new ArrayList<>(1);
    forms.add(new Form(verdictRecord(topic, key, source, v, false), ""));
    // the detail is the one part of a verdict without a bound (a business's rejection message)
    if (v.getDetail().length() > CUT_DETAIL_CHARS) {
      forms.add(new Form(verdictRecord(topic, key, source, v.toBuilder().setDetail(cut(v.getDetail())).build(), true),
          Headers.OMITTED_DETAIL));
    }
    return send(forms, failureCount(v.getRoute(), Kind.VERDICT), "verdict of " + coordinates(source));
  }

  private static ProducerRecord<byte[], byte[]> verdictRecord(String topic, String key, ConsumerRecord<byte[], byte[]> source,
      Verdict v, boolean detailCut) {
    List<Header> hs = new ArrayList<>();
    add(hs, Headers.DISPOSITION, v.getDisposition().name());
    add(hs, Headers.REASON, v.getReason().name());
    add(hs, Headers.ORIGINAL_TOPIC, source.topic());
    add(hs, Headers.ORIGINAL_PARTITION, Integer.toString(source.partition()));
    add(hs, Headers.ORIGINAL_OFFSET, Long.toString(source.offset()));
    if (v.getReplayed()) {
      add(hs, Headers.REPLAYED, "true");
    }
    if (detailCut) {
      add(hs, Headers.OMITTED, Headers.OMITTED_DETAIL);
    }
    return new ProducerRecord<>(topic, null, key.getBytes(StandardCharsets.UTF_8), v.toByteArray(), hs);
  }

  /** The first {@link #CUT_DETAIL_CHARS} characters of {@code detail}, the last one an ellipsis; never half a surrogate pair. */
  static String cut(String detail) {
    int end = CUT_DETAIL_CHARS - 1;
    if (Character.isHighSurrogate(detail.charAt(end - 1))) {
      end--;
    }
    return detail.substring(0, end) + "…";
  }

  private static String coordinates(ConsumerRecord<byte[], byte[]> source) {
    return source.topic() + "-" + source.partition() + "@" + source.offset();
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

  /**
   * Writes the first of {@code forms}; while the topic cannot take one because of its size, the
   * next. The stage completes once one is acknowledged, or exceptionally with the first failure
   * that a smaller form cannot help (then counted in {@code failed}).
   */
  private CompletionStage<Void> send(List<Form> forms, LongAdder failed, String what) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    done.whenComplete((x, e) -> {
      if (e != null) {
        failed.increment();
      }
    });
    write(forms, 0, done, what);
    return done;
  }

  private void write(List<Form> forms, int at, CompletableFuture<Void> done, String what) {
    ProducerRecord<byte[], byte[]> rec = forms.get(at).record();
    Callback sent = (md, e) -> {
      if (e == null) {
        done.complete(null);
      } else if (tooLarge(e) && at + 1 < forms.size()) {
        log.warn("{} to {}: the topic cannot take it ({}); writing it with {} left out ({} {})", what, rec.topic(),
            e.getMessage(), forms.get(at + 1).omitted().replace(",", ", "), Headers.OMITTED, forms.get(at + 1).omitted());
        // the callback runs on the producer's I/O thread, which must not wait on a send
        write(forms, at + 1, done, what);
      } else {
        done.completeExceptionally(e);
      }
    };
    try {
      sender.execute(() -> {
        try {
          producer.send(rec, sent);
        } catch (RuntimeException e) {
          sent.onCompletion(null, e);
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException e) {
      done.completeExceptionally(e); // closed
    }
  }

  /**
   * The write failed because of its size: the producer's {@code max.request.size}, the broker's
   * {@code MESSAGE_TOO_LARGE} (both {@link RecordTooLargeException}) or {@code RECORD_LIST_TOO_LARGE}
   * ({@link RecordBatchTooLargeException}). Not retriable: the same record fails the same way.
   */
  static boolean tooLarge(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof RecordTooLargeException || t instanceof RecordBatchTooLargeException) {
        return true;
      }
    }
    return false;
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

  /** The {@link Headers#DIFFERING_FIELDS} value: pointer to this record's (already cut) value, {@code null} if removed. */
  static String differingFields(Verdict v) {
    com.fasterxml.jackson.databind.node.ObjectNode o = DIFFERENCES.createObjectNode();
    for (dev.onceguard.v1.FieldDifference d : v.getDifferingFieldsList()) {
      if (d.getChange() == dev.onceguard.v1.FieldDifference.Change.REMOVED) {
        o.putNull(d.getPointer());
      } else {
        o.put(d.getPointer(), d.getValue());
      }
    }
    return o.toString();
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper DIFFERENCES = new com.fasterxml.jackson.databind.ObjectMapper();
}
