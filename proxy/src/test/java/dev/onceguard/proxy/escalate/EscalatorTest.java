package dev.onceguard.proxy.escalate;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.escalate.Escalator.Kind;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class EscalatorTest {

  /**
   * A producer whose topics take records up to {@code limit} bytes (key, value, header names and
   * values), failing larger ones as Kafka does: through the callback, with {@code tooLarge}'s
   * exception. Writes are acknowledged at once.
   */
  static final class LimitedProducer extends MockProducer<byte[], byte[]> {
    final int limit;
    final Function<Integer, RuntimeException> tooLarge;

    LimitedProducer(int limit, Function<Integer, RuntimeException> tooLarge) {
      super(true, null, new ByteArraySerializer(), new ByteArraySerializer());
      this.limit = limit;
      this.tooLarge = tooLarge;
    }

    @Override
    public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r, Callback callback) {
      int size = size(r);
      if (size > limit) {
        RuntimeException e = tooLarge.apply(size);
        callback.onCompletion(null, e);
        return CompletableFuture.failedFuture(e);
      }
      return super.send(r, callback);
    }
  }

  static int size(ProducerRecord<byte[], byte[]> r) {
    int n = (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
    for (Header h : r.headers()) {
      n += h.key().length() + (h.value() == null ? 0 : h.value().length);
    }
    return n;
  }

  private static RuntimeException clientTooLarge(int size) {
    return new RecordTooLargeException("The message is " + size + " bytes when serialized which is larger than the limit");
  }

  private static final Verdict MALFORMED = Verdict.newBuilder()
      .setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE).setLayer(Layer.EXTRACT).setReason(Reason.MALFORMED)
      .setDetail("record value is not valid JSON (error at line 1, column 2)").setRoute("orders").build();

  private Escalator escalator;

  @AfterEach
  void close() {
    if (escalator != null) {
      escalator.close();
    }
  }

  private static ConsumerRecord<byte[], byte[]> source(byte[] key, byte[] value, Header... headers) {
    return new ConsumerRecord<>("orders", 3, 77, 0L, org.apache.kafka.common.record.TimestampType.CREATE_TIME, -1, -1, key, value,
        new RecordHeaders(headers), java.util.Optional.empty());
  }

  private static String header(ProducerRecord<byte[], byte[]> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null ? null : new String(h.value(), UTF_8);
  }

  private static byte[] filled(int n) {
    byte[] b = new byte[n];
    java.util.Arrays.fill(b, (byte) 'x');
    return b;
  }

  private static void await(java.util.concurrent.CompletionStage<Void> s) throws Exception {
    s.toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  @Test
  void escalate_keyCollision_carriesTheDifferingFieldsAsJson_andTheAppliedFact() throws Exception {
    LimitedProducer p = new LimitedProducer(100_000, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);
    Verdict collision = MALFORMED.toBuilder().setReason(Reason.KEY_COLLISION).setLayer(Layer.LEDGER)
        .setApplied(dev.onceguard.v1.AppliedFact.newBuilder().setRoute("lines").setDedupKey("ab").setBusinessKey("order_id=o-1")
            .setSourceTopic("lines").setSourcePartition(2).setSourceOffset(41))
        .addDifferingFields(dev.onceguard.v1.FieldDifference.newBuilder().setPointer("/note")
            .setChange(dev.onceguard.v1.FieldDifference.Change.REMOVED))
        .addDifferingFields(dev.onceguard.v1.FieldDifference.newBuilder().setPointer("/warehouse_id")
            .setChange(dev.onceguard.v1.FieldDifference.Change.CHANGED).setValue("\"W2\""))
        .setDifferingFieldsTruncated(true).build();

    await(escalator.escalate("lines.escalate", source(b("k"), b("{}")), collision, 5));

    ProducerRecord<byte[], byte[]> r = p.history().get(0);
    assertThat(header(r, Headers.DIFFERING_FIELDS)).isEqualTo("{\"/note\":null,\"/warehouse_id\":\"\\\"W2\\\"\"}");
    assertThat(header(r, Headers.DIFFERING_FIELDS_TRUNCATED)).isEqualTo("true");
    assertThat(header(r, Headers.APPLIED_OFFSET)).isEqualTo("41");
    assertThat(header(r, Headers.APPLIED_BUSINESS_KEY)).isEqualTo("order_id=o-1");
  }

  @Test
  void escalate_withoutDifferences_hasNoDifferingFieldsHeader() throws Exception {
    LimitedProducer p = new LimitedProducer(100_000, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);

    await(escalator.escalate("orders.escalate", source(b("k"), b("{")), MALFORMED, 5));

    assertThat(header(p.history().get(0), Headers.DIFFERING_FIELDS)).isNull();
    assertThat(header(p.history().get(0), Headers.DIFFERING_FIELDS_TRUNCATED)).isNull();
  }

  @Test
  void escalate_fits_isTheWholeCopyWithoutAnOmittedHeader() throws Exception {
    LimitedProducer p = new LimitedProducer(100_000, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);

    await(escalator.escalate("orders.escalate", source(b("k"), b("{"), new RecordHeader("trace", b("t-1"))), MALFORMED, 5));

    ProducerRecord<byte[], byte[]> r = p.history().get(0);
    assertThat(p.history()).hasSize(1);
    assertThat(r.value()).isEqualTo(b("{"));
    assertThat(r.key()).isEqualTo(b("k"));
    assertThat(header(r, "trace")).isEqualTo("t-1");
    assertThat(header(r, Headers.OMITTED)).isNull();
    assertThat(header(r, Headers.ORIGINAL_VALUE_SIZE)).isNull();
  }

  @Test
  void escalate_copyTooLargeForTheTopic_isWrittenWithoutItsValue_namingWhatWasLeftOutAndWhereTheOriginalIs() throws Exception {
    // a source that fits a 1 MiB topic, whose copy with the onceguard-* headers does not
    int limit = 1_048_576;
    LimitedProducer p = new LimitedProducer(limit, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);
    byte[] value = filled(limit - 200);

    await(escalator.escalate("orders.escalate", source(b("o-1"), value, new RecordHeader("trace", b("t-1"))), MALFORMED, 5));

    assertThat(p.history()).as("only what was acknowledged").hasSize(1);
    ProducerRecord<byte[], byte[]> r = p.history().get(0);
    assertThat(r.value()).isNull();
    assertThat(r.key()).isEqualTo(b("o-1"));
    assertThat(header(r, "trace")).as("the record's own headers stay").isEqualTo("t-1");
    assertThat(header(r, Headers.OMITTED)).isEqualTo("value");
    assertThat(header(r, Headers.ORIGINAL_VALUE_SIZE)).isEqualTo(Integer.toString(value.length));
    assertThat(header(r, Headers.ORIGINAL_TOPIC)).isEqualTo("orders");
    assertThat(header(r, Headers.ORIGINAL_PARTITION)).isEqualTo("3");
    assertThat(header(r, Headers.ORIGINAL_OFFSET)).isEqualTo("77");
    assertThat(header(r, Headers.REASON)).isEqualTo("MALFORMED");
    assertThat(header(r, Headers.DETAIL)).isEqualTo(MALFORMED.getDetail());
    assertThat(escalator.failedWrites("orders", Kind.ESCALATION)).as("a copy was written: not a failed write").isZero();
  }

  @Test
  void escalate_stillTooLargeWithoutTheValue_leavesOutTheRecordsHeadersThenItsKey_keepingTheOnceguardHeaders() throws Exception {
    LimitedProducer p = new LimitedProducer(10_000, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);
    Header big = new RecordHeader("blob", filled(20_000));

    await(escalator.escalate("orders.escalate", source(b("o-1"), b("{}"), big), MALFORMED, 5, "00-trace-span-01"));

    ProducerRecord<byte[], byte[]> r = p.history().get(0);
    assertThat(r.value()).isNull();
    assertThat(r.key()).isEqualTo(b("o-1"));
    assertThat(r.headers().lastHeader("blob")).isNull();
    assertThat(header(r, "traceparent")).as("the escalation's own trace context is not the record's").isEqualTo("00-trace-span-01");
    assertThat(header(r, Headers.OMITTED)).isEqualTo("value,headers");
    assertThat(header(r, Headers.ORIGINAL_VALUE_SIZE)).isEqualTo("2");
    assertThat(header(r, Headers.ORIGINAL_OFFSET)).isEqualTo("77");

    LimitedProducer q = new LimitedProducer(10_000, EscalatorTest::clientTooLarge);
    escalator.close();
    escalator = new Escalator(q);
    await(escalator.escalate("orders.escalate", source(filled(20_000), null, big), MALFORMED, 5));

    ProducerRecord<byte[], byte[]> s = q.history().get(0);
    assertThat(s.key()).isNull();
    assertThat(s.value()).isNull();
    assertThat(header(s, Headers.OMITTED)).as("a null value is not left out").isEqualTo("headers,key");
    assertThat(header(s, Headers.ORIGINAL_VALUE_SIZE)).isNull();
    assertThat(header(s, Headers.ORIGINAL_TOPIC)).isEqualTo("orders");
  }

  @Test
  void escalate_hugeDetail_isCutTo1000CharactersAsTheLastResort() throws Exception {
    LimitedProducer p = new LimitedProducer(10_000, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);
    Verdict rejected = MALFORMED.toBuilder().setLayer(Layer.BUSINESS).setReason(Reason.BUSINESS_REJECTED)
        .setDetail("business rejected it at attempt 1: " + "y".repeat(50_000)).build();

    await(escalator.escalate("orders.escalate", source(b("o-1"), b("{}")), rejected, 5));

    ProducerRecord<byte[], byte[]> r = p.history().get(0);
    assertThat(header(r, Headers.OMITTED)).isEqualTo("value,key,detail");
    assertThat(header(r, Headers.DETAIL)).hasSize(1000).startsWith("business rejected it at attempt 1: yyy").endsWith("…");
  }

  @Test
  void escalate_brokersMessageTooLargeOrBatchTooLarge_wrapped_fallBackToo() throws Exception {
    for (Function<Integer, RuntimeException> e : List.<Function<Integer, RuntimeException>>of(
        n -> new RecordTooLargeException("MESSAGE_TOO_LARGE"),
        n -> new RecordBatchTooLargeException("RECORD_LIST_TOO_LARGE"),
        n -> new KafkaException("send failed", new RecordTooLargeException("nested")))) {
      LimitedProducer p = new LimitedProducer(1_000, e);
      try (Escalator x = new Escalator(p)) {
        await(x.escalate("orders.escalate", source(b("o-1"), filled(5_000)), MALFORMED, 5));
        assertThat(p.history()).hasSize(1);
        assertThat(header(p.history().get(0), Headers.OMITTED)).isEqualTo("value");
      }
    }
  }

  @Test
  void escalate_tooLargeThrownBySendItself_fallsBack() throws Exception {
    MockProducer<byte[], byte[]> p = new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer()) {
      @Override
      public synchronized Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r, Callback callback) {
        if (r.value() != null) {
          throw new RecordTooLargeException("too large");
        }
        return super.send(r, callback);
      }
    };
    escalator = new Escalator(p);

    await(escalator.escalate("orders.escalate", source(b("o-1"), filled(10)), MALFORMED, 5));

    assertThat(header(p.history().get(0), Headers.OMITTED)).isEqualTo("value");
  }

  @Test
  void escalate_otherFailure_isNotShrunk_andFailsTheStageForTheCallerToRetry() {
    MockProducer<byte[], byte[]> p = new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer());
    escalator = new Escalator(p);

    CompletableFuture<Void> f = escalator.escalate("orders.escalate", source(b("o-1"), b("{")), MALFORMED, 5).toCompletableFuture();
    org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(5)).until(() -> p.history().size() == 1);
    p.errorNext(new TopicAuthorizationException("not allowed"));

    assertThatThrownBy(() -> f.get(5, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
        .hasCauseInstanceOf(TopicAuthorizationException.class);
    assertThat(p.history()).as("no smaller copy tried").hasSize(1);
    assertThat(p.history().get(0).value()).isEqualTo(b("{"));
    assertThat(escalator.failedWrites("orders", Kind.ESCALATION)).isEqualTo(1);
  }

  @Test
  void escalate_evenTheSmallestCopyTooLarge_failsTheStage() {
    LimitedProducer p = new LimitedProducer(10, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);

    CompletableFuture<Void> f = escalator.escalate("orders.escalate", source(b("o-1"), b("{")), MALFORMED, 5).toCompletableFuture();

    assertThatThrownBy(() -> f.get(5, TimeUnit.SECONDS)).hasCauseInstanceOf(RecordTooLargeException.class);
    assertThat(escalator.failedWrites("orders", Kind.ESCALATION)).isEqualTo(1);
  }

  @Test
  void publishVerdict_tooLargeBecauseOfTheDetail_isWrittenWithTheDetailCut() throws Exception {
    LimitedProducer p = new LimitedProducer(5_000, EscalatorTest::clientTooLarge);
    escalator = new Escalator(p);
    Verdict rejected = MALFORMED.toBuilder().setLayer(Layer.BUSINESS).setReason(Reason.BUSINESS_REJECTED)
        .setDedupKey("ab".repeat(32)).setDetail("business rejected it at attempt 1: " + "y".repeat(50_000)).build();

    await(escalator.publishVerdict("orders.verdicts", source(b("o-1"), b("{}")), rejected));

    ProducerRecord<byte[], byte[]> r = p.history().get(0);
    Verdict written = Verdict.parseFrom(r.value());
    assertThat(written.getDetail()).hasSize(1000).endsWith("…");
    assertThat(written.getReason()).isEqualTo(Reason.BUSINESS_REJECTED);
    assertThat(written.getDedupKey()).isEqualTo(rejected.getDedupKey());
    assertThat(header(r, Headers.OMITTED)).isEqualTo("detail");
    assertThat(header(r, Headers.ORIGINAL_OFFSET)).isEqualTo("77");
    assertThat(escalator.failedWrites("orders", Kind.VERDICT)).isZero();
  }

  @Test
  void cut_neverSplitsASurrogatePair() {
    // the pair would straddle the cut at 999 characters: it goes whole
    assertThat(Escalator.cut("a".repeat(998) + "😀" + "b".repeat(10))).isEqualTo("a".repeat(998) + "…");
    assertThat(Escalator.cut("a".repeat(997) + "😀" + "b".repeat(10))).isEqualTo("a".repeat(997) + "😀…");
  }

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }
}
