package dev.onceguard.client;

import static dev.onceguard.client.TestDeliveries.ROUTE;
import static dev.onceguard.client.TestDeliveries.TOPIC;
import static dev.onceguard.client.TestDeliveries.delivery;
import static dev.onceguard.client.TestDeliveries.header;
import static dev.onceguard.client.TestDeliveries.utf8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.v1.Ack;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.wire.Headers;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.ConcurrentModificationException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class OnceGuardConsumerTest {
  private static final Duration POLL = Duration.ofSeconds(2);
  private static final TopicPartition P0 = new TopicPartition(TOPIC, 0);
  private static final TopicPartition P1 = new TopicPartition(TOPIC, 1);

  private FakeDeliveries sidecar;
  private InProcess grpc;
  private final List<OnceGuardConsumer<?, ?>> consumers = new ArrayList<>();
  private final ExecutorService otherThread = Executors.newSingleThreadExecutor();

  @BeforeEach
  void start() {
    sidecar = new FakeDeliveries();
    grpc = new InProcess(sidecar);
  }

  @AfterEach
  void stop() throws Exception {
    otherThread.shutdownNow();
    for (OnceGuardConsumer<?, ?> c : consumers) {
      c.close(CloseOptions.timeout(Duration.ofSeconds(1)));
    }
    grpc.close();
  }

  private Map<String, Object> config(boolean autoCommit, int window) {
    Map<String, Object> config = new HashMap<>();
    config.put(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE);
    config.put(OnceGuardConsumerConfig.WINDOW_CONFIG, window);
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, autoCommit);
    config.put(ConsumerConfig.RECONNECT_BACKOFF_MS_CONFIG, 10L);
    config.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 20L);
    return config;
  }

  private OnceGuardConsumer<String, String> consumer(Map<String, Object> config) {
    OnceGuardConsumer<String, String> c =
        new OnceGuardConsumer<>(grpc.channel, config, new StringDeserializer(), new StringDeserializer());
    consumers.add(c);
    return c;
  }

  private OnceGuardConsumer<String, String> manualCommitConsumer(int window) {
    return consumer(config(false, window));
  }

  /** Polls until {@code n} records arrived in total (the fake sends synchronously, so mostly one poll). */
  private static List<ConsumerRecord<String, String>> pollExactly(OnceGuardConsumer<String, String> c, int n) {
    List<ConsumerRecord<String, String>> all = new ArrayList<>();
    long deadline = System.nanoTime() + POLL.toNanos();
    while (all.size() < n && System.nanoTime() < deadline) {
      c.poll(Duration.ofMillis(100)).forEach(all::add);
    }
    assertThat(all).hasSize(n);
    return all;
  }

  /**
   * Starts a 30 s poll on {@link #otherThread} and returns once that thread waits inside it, so
   * it holds the consumer. Not a fixed sleep: on a loaded machine the thread may not even have
   * entered poll after one.
   */
  private Future<?> pollOnOtherThreadUntilBlocked(OnceGuardConsumer<String, String> c) throws Exception {
    CompletableFuture<Thread> poller = new CompletableFuture<>();
    Future<?> poll = otherThread.submit(() -> {
      poller.complete(Thread.currentThread());
      return c.poll(Duration.ofSeconds(30));
    });
    Thread t = poller.get(10, TimeUnit.SECONDS);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    // the only timed wait on that thread is poll's wait for stream events, which holds the consumer
    while (t.getState() != Thread.State.TIMED_WAITING) {
      assertThat(poll).as("the poll on the other thread ended early").isNotDone();
      assertThat(System.nanoTime()).as("the other thread did not block in poll within 10 s").isLessThan(deadline);
      Thread.sleep(1);
    }
    return poll;
  }

  private static Map<String, HandleResult.Outcome> outcomes(List<Ack> acks) {
    Map<String, HandleResult.Outcome> m = new HashMap<>();
    acks.forEach(a -> m.put(a.getDeliveryId(), a.getResult().getOutcome()));
    return m;
  }

  private static String headerValue(ConsumerRecord<?, ?> record, String key) {
    Header h = record.headers().lastHeader(key);
    return h == null ? null : utf8(h.value());
  }

  // -------------------------------------------------------------------------------------------
  // subscribe and poll
  // -------------------------------------------------------------------------------------------

  @Test
  void subscribe_opensStreamWithRouteWindowAndSubscriber() {
    Map<String, Object> config = config(false, 7);
    config.put(ConsumerConfig.CLIENT_ID_CONFIG, "shipping-1");
    OnceGuardConsumer<String, String> c = consumer(config);

    c.subscribe(List.of(TOPIC));

    assertThat(sidecar.subscriptions()).singleElement().satisfies(s -> {
      assertThat(s.getRoute()).isEqualTo(ROUTE);
      assertThat(s.getWindow()).isEqualTo(7);
      assertThat(s.getSubscriber()).isEqualTo("shipping-1");
    });
    assertThat(c.subscription()).containsExactly(TOPIC);
  }

  @Test
  void poll_returnsDeliveriesAsRecordsWithDeserializedKeyValueAndHeaders() {
    Delivery withHeaders = delivery("d1", 3, 42, "o-1", "{\"order\":1}").toBuilder()
        .setRecord(delivery("d1", 3, 42, "o-1", "{\"order\":1}").getRecord().toBuilder()
            .addHeaders(header("trace", "abc"))
            .addHeaders(header("nullable", null))
            .addHeaders(header("trace", "def")))
        .setRedelivery(true)
        .setAttempt(2)
        .build();
    Delivery tombstone = delivery("d2", 3, 43, null, null);
    sidecar.enqueue(withHeaders, tombstone);
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    ConsumerRecords<String, String> records = c.poll(POLL);

    TopicPartition p3 = new TopicPartition(TOPIC, 3);
    assertThat(records.partitions()).containsExactly(p3);
    assertThat(records.nextOffsets()).isEqualTo(Map.of(p3, new OffsetAndMetadata(44)));
    List<ConsumerRecord<String, String>> list = records.records(p3);
    assertThat(list).hasSize(2);

    ConsumerRecord<String, String> r = list.get(0);
    assertThat(r.topic()).isEqualTo(TOPIC);
    assertThat(r.partition()).isEqualTo(3);
    assertThat(r.offset()).isEqualTo(42);
    assertThat(r.timestamp()).isEqualTo(1_700_000_000_042L);
    assertThat(r.key()).isEqualTo("o-1");
    assertThat(r.value()).isEqualTo("{\"order\":1}");
    assertThat(r.serializedKeySize()).isEqualTo(3);
    List<String> kafkaHeaderKeys = new ArrayList<>();
    r.headers().forEach(h -> kafkaHeaderKeys.add(h.key()));
    assertThat(kafkaHeaderKeys.subList(0, 3)).containsExactly("trace", "nullable", "trace");
    assertThat(r.headers().lastHeader("nullable").value()).isNull();
    assertThat(headerValue(r, "trace")).isEqualTo("def");
    assertThat(headerValue(r, Headers.REDELIVERY)).isEqualTo("true");
    assertThat(headerValue(r, Headers.ATTEMPT)).isEqualTo("2");
    assertThat(headerValue(r, Headers.DEDUP_KEY)).isEqualTo("dk-d1");
    assertThat(headerValue(r, Headers.ROUTE)).isEqualTo(ROUTE);
    assertThat(headerValue(r, Headers.ENTITY_ID)).isEqualTo("order-o-1");
    assertThat(headerValue(r, Headers.FROM_STATE)).isEqualTo("packed");
    assertThat(headerValue(r, Headers.TO_STATE)).isEqualTo("shipped");

    ConsumerRecord<String, String> t = list.get(1);
    assertThat(t.key()).isNull();
    assertThat(t.value()).isNull();
    assertThat(t.serializedValueSize()).isEqualTo(ConsumerRecord.NULL_SIZE);
    assertThat(headerValue(t, Headers.REDELIVERY)).isEqualTo("false");
  }

  @Test
  void poll_sortsEachPartitionsRecordsByOffset() {
    // the sidecar runs different entities of a partition concurrently: arrival order != offset order
    sidecar.enqueue(delivery("a", 0, 7, "x", "7"), delivery("b", 1, 3, "y", "3"), delivery("c", 0, 5, "z", "5"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    ConsumerRecords<String, String> records = c.poll(POLL);

    assertThat(records.records(P0)).extracting(ConsumerRecord::offset).containsExactly(5L, 7L);
    assertThat(records.records(P1)).extracting(ConsumerRecord::offset).containsExactly(3L);
    assertThat(records.nextOffsets()).containsEntry(P0, new OffsetAndMetadata(8)).containsEntry(P1, new OffsetAndMetadata(4));
  }

  @Test
  void poll_returnsAtMostMaxPollRecords() {
    sidecar.enqueue(delivery("a", 0, 1, "k", "1"), delivery("b", 0, 2, "k", "2"), delivery("c", 0, 3, "k", "3"));
    Map<String, Object> config = config(false, 10);
    config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 2);
    OnceGuardConsumer<String, String> c = consumer(config);
    c.subscribe(List.of(TOPIC));

    assertThat(c.poll(POLL).count()).isEqualTo(2);
    assertThat(c.poll(POLL).count()).isEqualTo(1);
  }

  @Test
  void poll_withoutCommit_returnsNoMoreThanTheWindow() {
    for (int i = 0; i < 5; i++) {
      sidecar.enqueue(delivery("d" + i, 0, i, "k" + i, "v" + i));
    }
    OnceGuardConsumer<String, String> c = manualCommitConsumer(2);
    c.subscribe(List.of(TOPIC));

    int first = c.poll(POLL).count();
    int more = c.poll(Duration.ofMillis(200)).count();

    assertThat(first).isEqualTo(2);
    assertThat(more).isZero();
    assertThat(sidecar.unacknowledged()).isEqualTo(2);
  }

  @Test
  void poll_beforeSubscribe_throwsIllegalState() {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(2);

    assertThatThrownBy(() -> c.poll(Duration.ZERO))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("not subscribed");
  }

  @Test
  void poll_recordOfTopicOutsideSubscription_throwsAndEndsStreamUnacknowledged() {
    sidecar.enqueue(delivery("r1", "returns", 0, 1, "k", "v"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    assertThatThrownBy(() -> c.poll(POLL))
        .isInstanceOf(KafkaException.class)
        .hasMessageContaining("'returns'")
        .hasMessageContaining("subscribe to all of its topics");
    assertThat(sidecar.acks()).isEmpty();
    assertThat(sidecar.halfCloses()).isEqualTo(1);
    assertThat(sidecar.streamOpen()).isFalse();
  }

  @Test
  void subscribePattern_acceptsMatchingTopicsAndReportsThemAsSubscription() {
    sidecar.enqueue(delivery("a", "orders", 0, 1, "k", "v"), delivery("b", "orders-eu", 0, 1, "k", "v"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(Pattern.compile("orders.*"));

    assertThat(c.poll(POLL).count()).isEqualTo(2);
    assertThat(c.subscription()).containsExactlyInAnyOrder("orders", "orders-eu");
  }

  @Test
  void poll_undeserializableValue_isRejectedAndNotReturned() {
    sidecar.enqueue(delivery("bad", 0, 1, "k", "boom"), delivery("good", 0, 2, "k", "fine"));
    Deserializer<String> failing = (topic, data) -> {
      String s = new String(data);
      if (s.equals("boom")) {
        throw new SerializationException("not JSON");
      }
      return s;
    };
    OnceGuardConsumer<String, String> c =
        new OnceGuardConsumer<>(grpc.channel, config(false, 10), new StringDeserializer(), failing);
    consumers.add(c);
    c.subscribe(List.of(TOPIC));

    ConsumerRecords<String, String> records = c.poll(POLL);

    assertThat(records).extracting(ConsumerRecord::value).containsExactly("fine");
    assertThat(sidecar.acks()).singleElement().satisfies(a -> {
      assertThat(a.getDeliveryId()).isEqualTo("bad");
      assertThat(a.getResult().getOutcome()).isEqualTo(HandleResult.Outcome.REJECT);
      assertThat(a.getResult().getMessage()).contains("not JSON");
    });
  }

  @Test
  void poll_whenAWholeBatchIsUndeserializable_returnsTheNextReadyRecordsInTheSamePoll() {
    sidecar.enqueue(delivery("bad", 0, 1, "k", "boom"), delivery("good", 0, 2, "k", "fine"));
    Deserializer<String> failing = (topic, data) -> {
      if (new String(data).equals("boom")) {
        throw new SerializationException("not JSON");
      }
      return new String(data);
    };
    Map<String, Object> config = config(false, 10);
    config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 1);
    OnceGuardConsumer<String, String> c =
        new OnceGuardConsumer<>(grpc.channel, config, new StringDeserializer(), failing);
    consumers.add(c);
    c.subscribe(List.of(TOPIC));

    assertThat(c.poll(Duration.ofMillis(500))).extracting(ConsumerRecord::value).containsExactly("fine");
  }

  // -------------------------------------------------------------------------------------------
  // commits
  // -------------------------------------------------------------------------------------------

  @Test
  void commitSync_acksOnlyPolledDeliveries() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"), delivery("d2", 0, 2, "b", "2"), delivery("d3", 0, 3, "c", "3"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(2);
    c.subscribe(List.of(TOPIC));
    assertThat(c.poll(POLL).count()).isEqualTo(2);

    c.commitSync();

    assertThat(sidecar.ackedIds()).containsExactly("d1", "d2");
    assertThat(outcomes(sidecar.acks()))
        .isEqualTo(Map.of("d1", HandleResult.Outcome.OK, "d2", HandleResult.Outcome.OK));
    // the window opened: d3 arrives but, not yet polled, is not acknowledged by another commit
    c.commitSync();
    assertThat(sidecar.ackedIds()).containsExactly("d1", "d2");
    assertThat(c.poll(POLL)).extracting(ConsumerRecord::value).containsExactly("3");
    assertThat(sidecar.ackedIds()).containsExactly("d1", "d2");
  }

  @Test
  void commitSync_withOffsets_acksPolledRecordsBelowThem() {
    sidecar.enqueue(
        delivery("p0-1", 0, 1, "a", "1"), delivery("p0-2", 0, 2, "b", "2"), delivery("p0-3", 0, 3, "c", "3"),
        delivery("p1-9", 1, 9, "d", "9"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    assertThat(c.poll(POLL).count()).isEqualTo(4);

    c.commitSync(Map.of(P0, new OffsetAndMetadata(3)));

    assertThat(sidecar.ackedIds()).containsExactlyInAnyOrder("p0-1", "p0-2");
    c.commitSync();
    assertThat(sidecar.ackedIds()).containsExactlyInAnyOrder("p0-1", "p0-2", "p0-3", "p1-9");
  }

  @Test
  void commitSync_perRecordOffsetPlusOne_acksOneRecordAtATime() {
    sidecar.enqueue(delivery("x", 0, 7, "a", "7"), delivery("y", 0, 5, "b", "5"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    List<String> ackedAfterEach = new ArrayList<>();
    for (ConsumerRecord<String, String> r : c.poll(POLL)) {
      c.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1)));
      ackedAfterEach.add(String.join(",", sidecar.ackedIds()));
    }

    assertThat(ackedAfterEach).containsExactly("y", "y,x");
  }

  @Test
  void commitAsync_acksPolledAndRunsCallbackOnNextPoll() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    c.poll(POLL);
    List<Map<TopicPartition, OffsetAndMetadata>> committed = new ArrayList<>();
    List<Exception> errors = new ArrayList<>();

    c.commitAsync((offsets, error) -> {
      committed.add(offsets);
      errors.add(error);
    });
    boolean ranBeforePoll = !committed.isEmpty();
    c.poll(Duration.ZERO);

    assertThat(sidecar.ackedIds()).containsExactly("d1");
    assertThat(ranBeforePoll).isFalse();
    assertThat(committed).containsExactly(Map.of(P0, new OffsetAndMetadata(2)));
    assertThat(errors).containsExactly((Exception) null);
  }

  @Test
  void autoCommit_nextPollAcksWhatThePreviousPollReturned() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"), delivery("d2", 0, 2, "b", "2"));
    OnceGuardConsumer<String, String> c = consumer(config(true, 1));
    c.subscribe(List.of(TOPIC));

    assertThat(c.poll(POLL)).extracting(ConsumerRecord::value).containsExactly("1");
    assertThat(sidecar.acks()).isEmpty();
    assertThat(c.poll(POLL)).extracting(ConsumerRecord::value).containsExactly("2");
    assertThat(sidecar.ackedIds()).containsExactly("d1");
  }

  @Test
  void reject_answersRejectWithReasonAndCommitSkipsTheRecord() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"), delivery("d2", 0, 2, "b", "2"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    List<ConsumerRecord<String, String>> records = pollExactly(c, 2);

    c.reject(records.get(0), "warehouse closed for good");
    c.commitSync();

    assertThat(sidecar.acks()).extracting(Ack::getDeliveryId).containsExactly("d1", "d2");
    assertThat(sidecar.acks().get(0).getResult().getOutcome()).isEqualTo(HandleResult.Outcome.REJECT);
    assertThat(sidecar.acks().get(0).getResult().getMessage()).isEqualTo("warehouse closed for good");
    assertThat(sidecar.acks().get(1).getResult().getOutcome()).isEqualTo(HandleResult.Outcome.OK);
  }

  @Test
  void retry_answersRetryWithDelay() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    ConsumerRecord<String, String> r = pollExactly(c, 1).get(0);

    c.retry(r, Duration.ofSeconds(3));

    assertThat(sidecar.acks()).singleElement().satisfies(a -> {
      assertThat(a.getResult().getOutcome()).isEqualTo(HandleResult.Outcome.RETRY);
      assertThat(a.getResult().getRetryAfterMs()).isEqualTo(3000);
    });
  }

  @Test
  void reject_recordAlreadyCommitted_throwsIllegalState() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    ConsumerRecord<String, String> r = pollExactly(c, 1).get(0);
    c.commitSync();

    assertThatThrownBy(() -> c.reject(r, "too late"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("not outstanding");
    assertThat(sidecar.acks()).hasSize(1);
  }

  // -------------------------------------------------------------------------------------------
  // stream end, close, reconnect
  // -------------------------------------------------------------------------------------------

  @Test
  void close_withoutAutoCommit_endsStreamAndLeavesPolledRecordsForRedelivery() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    pollExactly(c, 1);

    c.close();

    assertThat(sidecar.halfCloses()).isEqualTo(1);
    assertThat(sidecar.streamOpen()).isFalse();
    assertThat(sidecar.acks()).isEmpty();
    assertThatThrownBy(() -> c.poll(Duration.ZERO))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed");
  }

  @Test
  void close_withAutoCommit_acksPolledRecordsBeforeEndingTheStream() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    OnceGuardConsumer<String, String> c = consumer(config(true, 10));
    c.subscribe(List.of(TOPIC));
    pollExactly(c, 1);

    c.close();

    assertThat(sidecar.ackedIds()).containsExactly("d1");
    assertThat(sidecar.halfCloses()).isEqualTo(1);
  }

  @Test
  void close_doesNotShutDownACallersChannel() {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    c.close();

    assertThat(grpc.channel.isShutdown()).isFalse();
  }

  @Test
  void streamFailure_commitOfLostRecordsFails_andPollResubscribesAndGetsRedeliveries() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    List<String> lost = new ArrayList<>();
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC), listener(new ArrayList<>(), new ArrayList<>(), lost));
    pollExactly(c, 1);

    sidecar.failCurrentStream(Status.UNAVAILABLE.withDescription("sidecar restarting"));

    assertThatThrownBy(c::commitSync).isInstanceOf(CommitFailedException.class);
    ConsumerRecord<String, String> again = pollExactly(c, 1).get(0);
    assertThat(again.value()).isEqualTo("1");
    assertThat(headerValue(again, Headers.REDELIVERY)).isEqualTo("true");
    assertThat(lost).containsExactly(P0.toString());
    assertThat(sidecar.subscriptions()).hasSize(2);
    c.commitSync();
    assertThat(sidecar.ackedIds()).containsExactly("d1-r1");
  }

  @Test
  void poll_subscriptionRefused_throwsKafkaExceptionWithTheSidecarsDescription() {
    sidecar.refuseSubscriptions(Status.INVALID_ARGUMENT.withDescription("unknown route 'nope'"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    assertThatThrownBy(() -> c.poll(POLL))
        .isInstanceOf(KafkaException.class)
        .hasMessageContaining("INVALID_ARGUMENT")
        .hasMessageContaining("unknown route 'nope'");
  }

  @Test
  void listener_hearsAssignedOnFirstRecordOfAPartitionAndRevokedOnClose() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"), delivery("d2", 1, 1, "b", "1"), delivery("d3", 0, 2, "c", "2"));
    List<String> assigned = new ArrayList<>();
    List<String> revoked = new ArrayList<>();
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC), listener(assigned, revoked, new ArrayList<>()));
    pollExactly(c, 3);

    assertThat(assigned).containsExactly(P0.toString(), P1.toString());
    assertThat(c.assignment()).containsExactlyInAnyOrder(P0, P1);
    c.close();
    assertThat(revoked).containsExactlyInAnyOrder(P0.toString(), P1.toString());
  }

  @Test
  void listener_mayCommitOnRevoke() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "1"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC), new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        c.commitSync();
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
    });
    pollExactly(c, 1);

    c.unsubscribe();

    assertThat(sidecar.ackedIds()).containsExactly("d1");
    assertThat(c.subscription()).isEmpty();
    assertThat(c.assignment()).isEmpty();
  }

  // -------------------------------------------------------------------------------------------
  // wakeup, threading, pause
  // -------------------------------------------------------------------------------------------

  @Test
  void wakeup_makesABlockedPollThrowWakeupException() throws Exception {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    Future<?> poll = pollOnOtherThreadUntilBlocked(c);
    long start = System.nanoTime();
    c.wakeup();

    assertThatThrownBy(() -> poll.get(5, TimeUnit.SECONDS)).hasCauseInstanceOf(WakeupException.class);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
  }

  @Test
  void wakeup_beforePoll_makesTheNextPollThrowOnce() {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));

    c.wakeup();

    assertThatThrownBy(() -> c.poll(Duration.ofSeconds(5))).isInstanceOf(WakeupException.class);
    assertThat(c.poll(Duration.ZERO).isEmpty()).isTrue();
  }

  @Test
  void concurrentUseFromTwoThreads_throwsConcurrentModification() throws Exception {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    Future<?> poll = pollOnOtherThreadUntilBlocked(c);

    assertThatThrownBy(c::commitSync).isInstanceOf(ConcurrentModificationException.class);

    c.wakeup();
    assertThatThrownBy(() -> poll.get(5, TimeUnit.SECONDS)).hasCauseInstanceOf(WakeupException.class);
  }

  @Test
  void pause_holdsRecordsOfPausedPartitionsUntilResume() {
    sidecar.enqueue(delivery("d1", 0, 1, "a", "p0"), delivery("d2", 1, 1, "b", "p1"));
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    c.subscribe(List.of(TOPIC));
    c.pause(List.of(P0));

    ConsumerRecords<String, String> whilePaused = c.poll(POLL);
    c.resume(List.of(P0));
    ConsumerRecords<String, String> afterResume = c.poll(POLL);

    assertThat(whilePaused).extracting(ConsumerRecord::value).containsExactly("p1");
    assertThat(afterResume).extracting(ConsumerRecord::value).containsExactly("p0");
    assertThat(c.paused()).isEmpty();
  }

  // -------------------------------------------------------------------------------------------
  // unsupported and local answers
  // -------------------------------------------------------------------------------------------

  @Test
  void seek_throwsUnsupportedOperationExplainingTheSidecarOwnsOffsets() {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    assertThatThrownBy(() -> c.seek(P0, 0L)).as("not assigned").isInstanceOf(IllegalStateException.class);
    c.subscribe(List.of(TOPIC));
    sidecar.enqueue(delivery("d1", 0, 5, "k", "v"));
    pollExactly(c, 1);
    c.commitSync();

    assertThatThrownBy(() -> c.seek(P0, 0L))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("sidecar owns the offsets")
        .hasMessageContaining("escalation topic");
  }

  @Test
  void offsetAndBrokerMethods_throwUnsupportedOperationWithAReason() {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);
    List<Runnable> calls = List.of(
        () -> c.seekToBeginning(List.of(P0)),
        () -> c.seekToEnd(List.of(P0)),
        () -> c.assign(List.of(P0)),
        () -> c.partitionsFor(TOPIC),
        () -> c.partitionsFor(TOPIC, POLL),
        () -> c.listTopics(),
        () -> c.listTopics(POLL),
        () -> c.offsetsForTimes(Map.of(P0, 1L)),
        () -> c.offsetsForTimes(Map.of(P0, 1L), POLL),
        () -> c.beginningOffsets(List.of(P0)),
        () -> c.beginningOffsets(List.of(P0), POLL),
        () -> c.endOffsets(List.of(P0)),
        () -> c.endOffsets(List.of(P0), POLL),
        () -> c.groupMetadata(),
        () -> c.clientInstanceId(POLL),
        () -> c.subscribe(new SubscriptionPattern("orders.*")));

    for (Runnable call : calls) {
      assertThatThrownBy(call::run)
          .isInstanceOf(UnsupportedOperationException.class)
          .hasMessageContaining("is not supported by OnceGuardConsumer: ");
    }
  }

  @Test
  void localAnswers_areEmptyOrNoOps() {
    OnceGuardConsumer<String, String> c = manualCommitConsumer(10);

    c.enforceRebalance();
    c.assign(List.of()); // empty: unsubscribe, as in Kafka

    assertThat(c.metrics()).as("the client's own counters").isNotEmpty();
    assertThat(c.currentLag(P0)).isEmpty();
    assertThat(c.subscription()).isEmpty();
  }

  // -------------------------------------------------------------------------------------------
  // configuration
  // -------------------------------------------------------------------------------------------

  @Test
  void constructor_withoutRoute_throwsConfigExceptionNamingTheKey() {
    Map<String, Object> config = new HashMap<>();
    config.put(OnceGuardConsumerConfig.TARGET_CONFIG, "localhost:1");

    assertThatThrownBy(() -> new OnceGuardConsumer<>(config, new StringDeserializer(), new StringDeserializer()))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(OnceGuardConsumerConfig.ROUTE_CONFIG);
  }

  @Test
  void constructor_withoutTargetOrChannel_throwsConfigExceptionNamingTheKey() {
    Properties props = new Properties();
    props.put(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE);

    assertThatThrownBy(() -> new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer()))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(OnceGuardConsumerConfig.TARGET_CONFIG);
  }

  @Test
  void constructor_negativeWindow_throwsConfigExceptionNamingTheKey() {
    assertThatThrownBy(() -> manualCommitConsumer(-1))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining(OnceGuardConsumerConfig.WINDOW_CONFIG);
  }

  @Test
  void constructor_deserializersFromConfig_areCreatedAndUsed() {
    Map<String, Object> config = config(false, 10);
    config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
    sidecar.enqueue(delivery("d1", 0, 1, "k", "v"));
    OnceGuardConsumer<String, String> c = consumer(config);

    OnceGuardConsumer<String, String> fromConfig = new OnceGuardConsumer<>(grpc.channel, config, null, null);
    consumers.add(fromConfig);
    fromConfig.subscribe(List.of(TOPIC));

    assertThat(fromConfig.poll(POLL)).extracting(ConsumerRecord::key, ConsumerRecord::value)
        .containsExactly(org.assertj.core.api.Assertions.tuple("k", "v"));
    c.close();
  }

  @Test
  void constructor_withTarget_consumesOverItsOwnChannelAndEndsTheStreamOnClose() throws Exception {
    FakeDeliveries networked = new FakeDeliveries();
    networked.enqueue(delivery("d1", 0, 1, "k", "v"));
    Server server = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(networked)
        .build()
        .start();
    try {
      Properties props = new Properties();
      props.put(OnceGuardConsumerConfig.TARGET_CONFIG, "localhost:" + server.getPort());
      props.put(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE);
      props.put("bootstrap.servers", "kafka:9092"); // ignored: the same Properties can serve KafkaConsumer
      props.put("group.id", "shipping");
      props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
      props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

      OnceGuardConsumer<String, String> c = new OnceGuardConsumer<>(props);
      c.subscribe(List.of(TOPIC));
      List<ConsumerRecord<String, String>> records = pollExactly(c, 1);
      c.close(CloseOptions.timeout(Duration.ofSeconds(5)));

      assertThat(records.get(0).value()).isEqualTo("v");
      assertThat(networked.ackedIds()).containsExactly("d1"); // auto-commit on close, as in Kafka
      assertThat(networked.halfCloses()).isEqualTo(1);
    } finally {
      server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static ConsumerRebalanceListener listener(List<String> assigned, List<String> revoked, List<String> lost) {
    return new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        partitions.forEach(p -> assigned.add(p.toString()));
      }

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        partitions.forEach(p -> revoked.add(p.toString()));
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> partitions) {
        partitions.forEach(p -> lost.add(p.toString()));
      }
    };
  }
}
