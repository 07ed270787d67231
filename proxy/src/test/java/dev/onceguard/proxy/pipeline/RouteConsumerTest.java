package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.time.Clock;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The pipeline against Kafka's {@link MockConsumer}: ordering, bounds, pause/resume, commits,
 * revocation and shutdown, with a processor whose records the test finishes by hand.
 */
class RouteConsumerTest {
  private static final TopicPartition P0 = new TopicPartition("orders", 0);
  private static final TopicPartition P1 = new TopicPartition("orders", 1);

  private final PollingMockConsumer consumer = new PollingMockConsumer();
  private final ManualProcessor processor = new ManualProcessor();
  /** The wall clock plus what a test adds, to age records without sleeping. */
  private final AtomicLong skew = new AtomicLong();
  private final Clock clock = () -> System.currentTimeMillis() + skew.get();
  private RouteConsumer route;

  /**
   * MockConsumer returns at once from poll: wait a little so an idle loop does not spin. It also
   * forgets commits on rebalance and close, so commits are recorded here.
   */
  static final class PollingMockConsumer extends MockConsumer<byte[], byte[]> {
    final Map<TopicPartition, Long> lastCommit = new ConcurrentHashMap<>();
    final Map<TopicPartition, Long> highestCommit = new ConcurrentHashMap<>();

    PollingMockConsumer() {
      super("earliest");
    }

    private void record(Map<TopicPartition, OffsetAndMetadata> offsets) {
      offsets.forEach((tp, om) -> {
        lastCommit.put(tp, om.offset());
        highestCommit.merge(tp, om.offset(), Math::max);
      });
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
      record(offsets);
      super.commitSync(offsets, timeout);
    }

    /** When set, async commits are swallowed: sent, never acknowledged (a broker that is slow to answer). */
    volatile boolean holdAsyncCommits;
    final AtomicInteger heldAsyncCommits = new AtomicInteger();

    @Override
    public synchronized void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
      if (holdAsyncCommits) {
        heldAsyncCommits.incrementAndGet();
        return;
      }
      record(offsets);
      super.commitAsync(offsets, callback);
    }

    @Override
    public ConsumerRecords<byte[], byte[]> poll(Duration timeout) {
      ConsumerRecords<byte[], byte[]> r = super.poll(timeout);
      if (r.isEmpty()) {
        try {
          Thread.sleep(Math.min(2, timeout.toMillis()));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return r;
    }
  }

  /** Records every start; the test finishes records by hand; honours cancellation. */
  static final class ManualProcessor implements RecordProcessor {
    final Map<String, CompletableFuture<Void>> work = new ConcurrentHashMap<>();
    final Map<String, Cancellation> cancels = new ConcurrentHashMap<>();
    final Map<String, OrderSlot> slots = new ConcurrentHashMap<>();
    final Map<String, AtomicInteger> nudges = new ConcurrentHashMap<>();
    final List<String> started = Collections.synchronizedList(new ArrayList<>());
    /** Attempts whose processing step threw (while {@link #failWith} was set), one entry each. */
    final List<String> failed = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger running = new AtomicInteger();
    final AtomicInteger maxRunning = new AtomicInteger();
    volatile RuntimeException failWith;

    static String id(int partition, long offset) {
      return partition + "@" + offset;
    }

    @Override
    public String orderingKey(ConsumerRecord<byte[], byte[]> r) {
      return new String(r.key(), StandardCharsets.UTF_8);
    }

    @Override
    public CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> r, Cancellation cancel) {
      return process(r, cancel, OrderSlot.NONE);
    }

    @Override
    public CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> r, Cancellation cancel, OrderSlot slot) {
      String id = id(r.partition(), r.offset());
      slots.put(id, slot);
      RuntimeException fail = failWith;
      if (fail != null) {
        failed.add(id);
        // a step of the chain throws: the stage completes exceptionally, nothing else reports it
        return CompletableFuture.completedFuture(null).thenRun(() -> {
          throw fail;
        });
      }
      CompletableFuture<Void> f = new CompletableFuture<>();
      work.put(id, f);
      cancels.put(id, cancel);
      started.add(id);
      maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
      cancel.onCancel(() -> f.completeExceptionally(new CancelledException(id)));
      // The route must see the record finish only after it no longer counts as running here.
      // A dependent registered on f itself would not do: a future runs its dependents newest
      // first, so the route's callback (registered later) would hand the completion to the poll
      // thread, which may start the next record, before this count went down (maxRunning 4 of 3).
      return f.whenComplete((v, e) -> running.decrementAndGet());
    }

    void finish(int partition, long offset) {
      await().until(() -> work.containsKey(id(partition, offset)));
      work.get(id(partition, offset)).complete(null);
    }

    boolean isStarted(int partition, long offset) {
      return started.contains(id(partition, offset));
    }

    void park(int partition, long offset) {
      String id = id(partition, offset);
      AtomicInteger n = nudges.computeIfAbsent(id, k -> new AtomicInteger());
      slots.get(id).park(n::incrementAndGet);
    }

    void parkWithThrowingNudge(int partition, long offset) {
      slots.get(id(partition, offset)).park(() -> {
        throw new IllegalStateException("nudge bug");
      });
    }

    long attempts(int partition, long offset) {
      String id = id(partition, offset);
      return started.stream().filter(id::equals).count();
    }

    void unpark(int partition, long offset) {
      slots.get(id(partition, offset)).unpark();
    }

    int nudges(int partition, long offset) {
      AtomicInteger n = nudges.get(id(partition, offset));
      return n == null ? 0 : n.get();
    }
  }

  private static RouteConsumer.Settings settings(int perPartition, int total, Duration shutdown) {
    return settings(perPartition, total, shutdown, 1);
  }

  private static RouteConsumer.Settings settings(int perPartition, int total, Duration shutdown, int reorderWindow) {
    return settings(perPartition, total, 10 * perPartition, shutdown, reorderWindow);
  }

  private static RouteConsumer.Settings settings(int perPartition, int total, int maxUncommitted, Duration shutdown, int reorderWindow) {
    return new RouteConsumer.Settings("orders", List.of("orders"), perPartition, total, maxUncommitted, Duration.ofMillis(20),
        shutdown, Duration.ofMillis(300), reorderWindow, new RetryConfig(Duration.ofMillis(20), Duration.ofMillis(50), 20));
  }

  private void startWith(RouteConsumer.Settings s, TopicPartition... assigned) {
    Map<TopicPartition, Long> begin = new java.util.HashMap<>();
    for (TopicPartition tp : assigned) {
      begin.put(tp, 0L);
    }
    consumer.updateBeginningOffsets(begin);
    consumer.schedulePollTask(() -> consumer.rebalance(List.of(assigned)));
    route = new RouteConsumer(s, consumer, processor, clock);
    route.start();
    await().until(() -> consumer.assignment().size() == assigned.length);
  }

  /** Adds records on the poll thread (MockConsumer is not meant for concurrent use). */
  private void produce(TopicPartition tp, long firstOffset, String... keys) {
    consumer.schedulePollTask(() -> {
      for (int i = 0; i < keys.length; i++) {
        consumer.addRecord(new ConsumerRecord<>(tp.topic(), tp.partition(), firstOffset + i,
            keys[i].getBytes(StandardCharsets.UTF_8), ("v" + (firstOffset + i)).getBytes(StandardCharsets.UTF_8)));
      }
    });
  }

  /** The last offset committed for {@code tp}, -1 if none. */
  private long committed(TopicPartition tp) {
    return consumer.lastCommit.getOrDefault(tp, -1L);
  }

  /** The highest offset ever committed for {@code tp}, -1 if none. */
  private long highestCommitted(TopicPartition tp) {
    return consumer.highestCommit.getOrDefault(tp, -1L);
  }

  @AfterEach
  void tearDown() {
    if (route != null) {
      route.close();
    }
  }

  @Test
  void sameKey_runsInOffsetOrderOneAtATime_otherKeysRunConcurrently() {
    startWith(settings(64, 512, Duration.ofMillis(300)), P0);
    produce(P0, 0, "a", "a", "b", "a");
    await().until(() -> processor.started.size() == 2);
    assertThat(processor.started).containsExactly("0@0", "0@2");
    processor.finish(0, 0);
    await().until(() -> processor.isStarted(0, 1));
    assertThat(processor.isStarted(0, 3)).isFalse();
    processor.finish(0, 1);
    await().until(() -> processor.isStarted(0, 3));
    assertThat(processor.started).containsExactly("0@0", "0@2", "0@1", "0@3");
  }

  @Test
  void commit_stopsAtFirstUnfinishedRecord_thenCatchesUp() {
    startWith(settings(64, 512, Duration.ofSeconds(5)), P0);
    produce(P0, 0, "a", "b", "c", "d");
    await().until(() -> processor.started.size() == 4);
    processor.finish(0, 1);
    processor.finish(0, 2);
    processor.finish(0, 3);
    // give the periodic commit several chances to (wrongly) pass offset 0
    await().pollDelay(Duration.ofMillis(200)).until(() -> true);
    assertThat(highestCommitted(P0)).isIn(-1L, 0L);
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 4);
  }

  @Test
  void idlePartition_isCommittedAtItsPosition() {
    startWith(settings(64, 512, Duration.ofMillis(300)), P0, P1);
    produce(P0, 0, "a");
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 1);
    // P1 never had a record: its position (the beginning, 0) is committed all the same
    await().until(() -> committed(P1) == 0);
  }

  @Test
  void partitionAtItsBound_isPausedWithoutLosingRecords_andResumedWhenDrained() {
    startWith(settings(2, 512, Duration.ofSeconds(5)), P0, P1);
    produce(P0, 0, "a", "b", "c", "d", "e");
    produce(P1, 0, "x");
    await().until(() -> processor.started.size() == 3);
    await().until(() -> consumer.paused().contains(P0));
    assertThat(consumer.paused()).doesNotContain(P1);
    assertThat(processor.maxRunning.get()).isLessThanOrEqualTo(3);
    for (long o = 0; o < 5; o++) {
      processor.finish(0, o);
    }
    processor.finish(1, 0);
    await().until(() -> committed(P0) == 5 && committed(P1) == 1);
    await().until(() -> consumer.paused().isEmpty());
    assertThat(processor.started).filteredOn(s -> s.startsWith("0@")).containsExactly("0@0", "0@1", "0@2", "0@3", "0@4");
  }

  @Test
  void routeBound_limitsRecordsRunningAcrossPartitions() {
    startWith(settings(10, 3, Duration.ofMillis(300)), P0, P1);
    produce(P0, 0, "a", "b", "c", "d");
    produce(P1, 0, "e", "f", "g", "h");
    await().until(() -> processor.started.size() == 3);
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(processor.started).hasSize(3);
    assertThat(consumer.paused()).contains(P0, P1);
    List<String> first = List.copyOf(processor.started);
    for (String id : first) {
      processor.work.get(id).complete(null);
    }
    await().until(() -> processor.started.size() == 6);
    assertThat(processor.maxRunning.get()).isEqualTo(3);
  }

  @Test
  void revoke_cancelsInFlight_commitsFinishedPrefix_andIgnoresLateCompletions() {
    startWith(settings(64, 512, Duration.ofSeconds(5)), P0, P1);
    produce(P0, 0, "a", "b", "c");
    await().until(() -> processor.started.size() == 3);
    processor.finish(0, 0);
    processor.finish(0, 2);
    // offset 1 stays unfinished; revoke P0 (keep P1)
    consumer.schedulePollTask(() -> consumer.rebalance(List.of(P1)));
    await().until(() -> processor.cancels.get("0@1").isCancelled());
    await().until(() -> committed(P0) == 1);
    await().until(() -> !consumer.assignment().contains(P0));
    // work that ends after revocation must not move the (gone) partition's offsets
    processor.work.get("0@1").complete(null);
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(highestCommitted(P0)).isEqualTo(1);
  }

  @Test
  void revoke_whileAnAsyncCommitIsUnacknowledged_stillCommitsSynchronously() {
    startWith(settings(64, 512, Duration.ofSeconds(5)), P0, P1);
    consumer.holdAsyncCommits = true;
    produce(P0, 0, "a", "b");
    await().until(() -> processor.started.size() == 2);
    processor.finish(0, 0);
    processor.finish(0, 1);
    await().until(() -> consumer.heldAsyncCommits.get() > 0);
    consumer.schedulePollTask(() -> consumer.rebalance(List.of(P1)));
    await().until(() -> committed(P0) == 2);
  }

  @Test
  void shutdown_waitsForRecordsInFlight_thenCommits() throws Exception {
    startWith(settings(64, 512, Duration.ofSeconds(5)), P0);
    produce(P0, 0, "a", "a");
    await().until(() -> processor.isStarted(0, 0));
    // close() asks for the stop from the closer thread, which may not run before finish(0, 0)
    // below on a loaded machine; the poll thread would then start 0@1. Ask here, synchronously.
    route.requestStop();
    Thread closer = new Thread(route::close);
    closer.start();
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(closer.isAlive()).as("close waits for the record in flight").isTrue();
    processor.finish(0, 0);
    closer.join(5_000);
    assertThat(closer.isAlive()).isFalse();
    // the second record of the key was never started: it is left for redelivery
    assertThat(processor.isStarted(0, 1)).isFalse();
    assertThat(committed(P0)).isEqualTo(1);
    assertThat(consumer.closed()).isTrue();
    assertThat(route.terminated().toCompletableFuture()).isCompleted();
  }

  @Test
  void shutdown_recordStillRunningAfterTimeout_isCancelledAndNotCommitted() {
    startWith(settings(64, 512, Duration.ofMillis(200)), P0);
    produce(P0, 0, "a", "b");
    await().until(() -> processor.started.size() == 2);
    processor.finish(0, 1);
    long t0 = System.nanoTime();
    route.close();
    // far below close()'s own worst case (shutdown + cancel grace + commit + close timeouts, ~27 s)
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(10));
    assertThat(processor.cancels.get("0@0").isCancelled()).isTrue();
    assertThat(highestCommitted(P0)).isIn(-1L, 0L);
    assertThat(consumer.closed()).isTrue();
  }

  @Test
  void throwingProcessorStep_isTriedAgain_notLeftInFlight_andNothingIsCommittedPastIt() {
    startWith(settings(64, 512, Duration.ofSeconds(5)), P0);
    processor.failWith = new IllegalStateException("bug in a continuation");
    produce(P0, 0, "a");
    // the failed record is tried again (with backoff), not left hanging after its first failure
    await().until(() -> processor.failed.stream().filter("0@0"::equals).count() >= 2);
    processor.failWith = null;
    produce(P0, 1, "b", "c");
    await().until(() -> processor.isStarted(0, 1) && processor.isStarted(0, 2));
    processor.finish(0, 1);
    processor.finish(0, 2);
    await().pollDelay(Duration.ofMillis(200)).until(() -> true);
    assertThat(highestCommitted(P0)).isIn(-1L, 0L);
    // its next attempt succeeds: the prefix moves past it
    await().until(() -> processor.isStarted(0, 0));
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 3);
    await().until(() -> route.running() == 0 && route.held() == 0);
  }

  @Test
  void nudgeThatThrows_cancelsTheParkedAttempt_andTheRecordIsTriedAgain() {
    startWith(settings(64, 512, Duration.ofSeconds(5), 2), P0);
    produce(P0, 0, "a", "a");
    await().until(() -> processor.isStarted(0, 0));
    processor.parkWithThrowingNudge(0, 0);
    await().until(() -> processor.isStarted(0, 1));
    Cancellation firstAttempt = processor.cancels.get("0@0");
    processor.finish(0, 1);
    await().until(() -> processor.attempts(0, 0) == 2);
    assertThat(firstAttempt.isCancelled()).isTrue();
    assertThat(highestCommitted(P0)).isIn(-1L, 0L);
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 2);
  }

  @Test
  void uncommittedSpanAtItsBound_pausesBelowTheInFlightBound_andResumesWhenTheStuckRecordFinishes() {
    startWith(settings(64, 512, 4, Duration.ofSeconds(5), 1), P0, P1);
    produce(P0, 0, "a", "b", "c", "d");
    await().until(() -> processor.started.stream().filter(id -> id.startsWith("0@")).count() == 4);
    processor.finish(0, 1);
    processor.finish(0, 2);
    processor.finish(0, 3);
    await().until(() -> route.held() == 1);
    // one record held, far below the in-flight bound; but a crash would replay four
    await().until(() -> consumer.paused().contains(P0));
    assertThat(consumer.paused()).doesNotContain(P1);
    assertThat(route.uncommittedRecords()).containsEntry(P0, 4).containsEntry(P1, 0);
    skew.addAndGet(30_000);
    assertThat(route.oldestUnfinishedAgeMillis().get(P0)).isGreaterThanOrEqualTo(30_000L);
    assertThat(route.oldestUnfinishedAgeMillis()).containsEntry(P1, 0L);
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 4);
    await().until(() -> !consumer.paused().contains(P0));
    await().until(() -> route.uncommittedRecords().get(P0) == 0 && route.oldestUnfinishedAgeMillis().get(P0) == 0L);
  }

  @Test
  void lag_isRecordsNotYetFetchedPlusTakenAndNotCommittable_andFallsAsThePrefixFinishes() {
    startWith(settings(64, 512, Duration.ofSeconds(5)), P0);
    consumer.schedulePollTask(() -> consumer.updateEndOffsets(Map.of(P0, 10L)));
    produce(P0, 0, "a", "b", "c");
    await().until(() -> processor.started.size() == 3);
    // position 3 of 10: seven not fetched, and the three taken are not committable
    await().until(() -> Long.valueOf(10).equals(route.lagRecords().get(P0)));
    processor.finish(0, 1);
    processor.finish(0, 2);
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(route.lagRecords()).as("offset 0 still unfinished: a crash replays all three").containsEntry(P0, 10L);
    processor.finish(0, 0);
    await().until(() -> Long.valueOf(7).equals(route.lagRecords().get(P0)));
  }

  @Test
  void parkedRecord_letsLaterRecordsOfItsKeyStart_withinTheWindow_andIsNudgedWhenOneFinishes() {
    startWith(settings(64, 512, Duration.ofSeconds(5), 2), P0);
    produce(P0, 0, "a", "a", "a");
    await().until(() -> processor.isStarted(0, 0));
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(processor.isStarted(0, 1)).as("strict order until the first record parks").isFalse();
    processor.park(0, 0);
    await().until(() -> processor.isStarted(0, 1));
    processor.park(0, 1);
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(processor.isStarted(0, 2)).as("two records of the key started: the window is full").isFalse();
    // the second record overtakes and finishes: the parked first one is nudged, the third starts
    processor.finish(0, 1);
    await().until(() -> processor.nudges(0, 0) == 1);
    await().until(() -> processor.isStarted(0, 2));
    assertThat(processor.nudges(0, 1)).isZero();
    processor.finish(0, 2);
    await().until(() -> processor.nudges(0, 0) == 2);
    // offset 0 is unfinished: nothing past it is committed, however much finished behind it
    await().pollDelay(Duration.ofMillis(100)).until(() -> true);
    assertThat(highestCommitted(P0)).isIn(-1L, 0L);
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 3);
  }

  @Test
  void parkedRecord_windowOne_keepsStrictOrder() {
    startWith(settings(64, 512, Duration.ofSeconds(5), 1), P0);
    produce(P0, 0, "a", "a");
    await().until(() -> processor.isStarted(0, 0));
    processor.park(0, 0);
    await().pollDelay(Duration.ofMillis(150)).until(() -> true);
    assertThat(processor.isStarted(0, 1)).isFalse();
    processor.finish(0, 0);
    await().until(() -> processor.isStarted(0, 1));
  }

  @Test
  void recordParkingAfterAnotherOfItsKeyFinished_isNudgedAtOnce() {
    startWith(settings(64, 512, Duration.ofSeconds(5), 2), P0);
    produce(P0, 0, "a", "a");
    await().until(() -> processor.isStarted(0, 0));
    processor.park(0, 0);
    await().until(() -> processor.isStarted(0, 1));
    // the first goes on and finishes while the second is still deciding whether to wait
    processor.unpark(0, 0);
    processor.finish(0, 0);
    await().until(() -> committed(P0) == 1);
    assertThat(processor.nudges(0, 1)).isZero();
    // when the second parks, what it would wait for may already have happened: it is told at once
    processor.park(0, 1);
    await().until(() -> processor.nudges(0, 1) == 1);
    processor.finish(0, 1);
    await().until(() -> committed(P0) == 2);
  }
}
