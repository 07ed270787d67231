package dev.onceguard.client.internal;

import dev.onceguard.client.EscalationListener;
import dev.onceguard.client.FailureOutcome;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.Subscription;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The mechanics behind {@code OnceGuardConsumer}: one {@code Deliveries.Subscribe} stream at a
 * time, the buffer of received deliveries, and the Kafka-shaped bookkeeping around them
 * (subscription, rebalance listener, commit callbacks, and one {@link PartitionState} per
 * partition: assignment, pause, position, the deliveries returned by poll and not yet
 * acknowledged, committed offset).
 *
 * <p>Threading mirrors {@code KafkaConsumer}: every method except {@link #wakeup()} must be
 * called from one thread at a time (checked, {@code ConcurrentModificationException}). gRPC
 * threads only put {@link StreamEvent}s on a queue; all state changes, partition states
 * included, happen on the calling thread, inside poll, commit, close and the like, which is
 * also where listener and commit callbacks run.
 *
 * <p>Streams: the first {@code subscribe} opens one. When it ends without being asked to
 * (sidecar restart, network), the deliveries it had buffered are dropped and the ones returned
 * by poll but not acknowledged can no longer be committed (the sidecar redelivers all of them,
 * flagged {@code redelivery}); the listener hears {@code onPartitionsLost}; and poll
 * resubscribes after an exponential backoff. Statuses that resubscribing cannot fix (unknown
 * route, route not in pull mode, not authorised) also make that poll throw.
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class PullConsumer<K, V> {
  private static final Logger log = LoggerFactory.getLogger(PullConsumer.class);

  /** How long a reopened stream must stay connected (without a delivery) to count as back. */
  static final Duration SETTLED = Duration.ofMillis(500);
  private static final long NOT_READY = Long.MIN_VALUE;

  /** Kafka's default close timeout. */
  public static final Duration DEFAULT_CLOSE_TIMEOUT = Duration.ofSeconds(30);

  private static final HandleResult OK = HandleResult.newBuilder().setOutcome(HandleResult.Outcome.OK).build();
  private static final ConsumerRebalanceListener NO_LISTENER = new ConsumerRebalanceListener() {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
  };

  private final Channel channel;
  private final ManagedChannel ownedChannel;
  private final ConsumerSettings settings;
  private final Deserializer<K> keyDeserializer;
  private final Deserializer<V> valueDeserializer;
  private final RecordConverter<K, V> converter;
  private final RecordsFactory recordsFactory;
  private final FailureClassifier classifier = new FailureClassifier(FailureOutcome.RETRY);
  private final SingleThreadAccess access = new SingleThreadAccess("OnceGuardConsumer");
  private final BlockingQueue<StreamEvent> events = new LinkedBlockingQueue<>();
  private final AtomicBoolean wakeupRequested = new AtomicBoolean();

  // Everything below is owned by the consumer thread.
  private TopicFilter filter; // null: not subscribed
  private ConsumerRebalanceListener listener = NO_LISTENER;
  private final Set<String> matchedTopics = new LinkedHashSet<>();
  private SubscriberStream stream; // null: none open
  private final Deque<Delivery> received = new ArrayDeque<>();
  /**
   * One state per partition the consumer knows of: assigned on the current stream, paused, or
   * with a committed offset. In assignment order among the assigned ones ({@link #assign}).
   */
  private final Map<TopicPartition, PartitionState> states = new LinkedHashMap<>();
  /** The last order given to {@link PartitionState#addOutstanding}. */
  private long outstandingOrder;
  private final Deque<Runnable> completedCommits = new ArrayDeque<>();
  private int failedStreams;
  private long nextStreamAtNanos = System.nanoTime();
  private boolean closed;
  private final ConsumerMetrics metrics;
  private EscalationListener escalationListener;
  /** The last stream ended unexpectedly: the next one is a reconnect, and logs stay quiet. */
  private boolean outage;
  private int outageRetries;
  private long outageSinceNanos;
  private long streamReadyAtNanos = NOT_READY;

  private PullConsumer(
      Channel channel,
      ManagedChannel ownedChannel,
      ConsumerSettings settings,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      RecordsFactory recordsFactory) {
    this.channel = channel;
    this.ownedChannel = ownedChannel;
    this.settings = settings;
    this.keyDeserializer = keyDeserializer;
    this.valueDeserializer = valueDeserializer;
    this.converter = new RecordConverter<>(keyDeserializer, valueDeserializer);
    this.recordsFactory = recordsFactory;
    this.metrics = new ConsumerMetrics(settings.subscriber(), settings.route());
    this.escalationListener = settings.escalationListener();
  }

  /**
   * Creates a consumer the way {@code KafkaConsumer}'s constructors do: deserializers passed in
   * are used as they are; missing ones are created from {@code key.deserializer} /
   * {@code value.deserializer} and configured with the whole configuration.
   *
   * @param configs consumer configuration
   * @param channel channel to the sidecar, not owned; {@code null} to open (and own) one to
   *     {@code onceguard.target}
   * @param keyDeserializer key deserializer, or {@code null} to create it from the configuration
   * @param valueDeserializer value deserializer, or {@code null} likewise
   * @throws IllegalStateException if the kafka-clients on the classpath is not a supported version
   */
  public static <K, V> PullConsumer<K, V> create(
      Map<String, ?> configs, Channel channel, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    // Before anything is opened or configured: an unsupported kafka-clients would otherwise
    // only show as a NoSuchMethodError in the first poll that has records.
    return create(configs, channel, keyDeserializer, valueDeserializer, KafkaClientsCompat.forRunningVersion());
  }

  /**
   * Like {@link #create(Map, Channel, Deserializer, Deserializer)}, with the factory that builds
   * each poll's {@code ConsumerRecords} given (tests make it fail).
   */
  public static <K, V> PullConsumer<K, V> create(
      Map<String, ?> configs,
      Channel channel,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      RecordsFactory recordsFactory) {
    ConsumerSettings settings = ConsumerSettings.parse(configs, channel != null);
    Deserializer<K> key = keyDeserializer != null
        ? keyDeserializer
        : fromConfig(settings, ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, settings.keyDeserializerClass(), true);
    Deserializer<V> value;
    try {
      value = valueDeserializer != null
          ? valueDeserializer
          : fromConfig(settings, ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, settings.valueDeserializerClass(), false);
    } catch (RuntimeException e) {
      closeQuietly(key, "key deserializer");
      throw e;
    }
    ManagedChannel owned;
    try {
      owned = channel == null ? Channels.open(settings.target(), settings.security()) : null;
    } catch (RuntimeException e) {
      // an unreadable TLS or token file
      closeQuietly(key, "key deserializer");
      closeQuietly(value, "value deserializer");
      throw e;
    }
    return new PullConsumer<>(channel != null ? channel : owned, owned, settings, key, value, recordsFactory);
  }

  @SuppressWarnings("unchecked")
  private static <T> Deserializer<T> fromConfig(ConsumerSettings settings, String key, Class<?> type, boolean isKey) {
    if (type == null) {
      throw new ConfigException(key, null, "no deserializer: pass one to the constructor or set this key");
    }
    if (!Deserializer.class.isAssignableFrom(type)) {
      throw new ConfigException(key, type.getName(), "is not a " + Deserializer.class.getName());
    }
    Deserializer<T> deserializer;
    try {
      deserializer = (Deserializer<T>) type.getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException e) {
      throw new ConfigException(key, type.getName(), "cannot be instantiated with a public no-arg constructor: " + e);
    }
    deserializer.configure(settings.originals(), isKey);
    return deserializer;
  }

  // ---------------------------------------------------------------------------------------------
  // Subscription
  // ---------------------------------------------------------------------------------------------

  /** See {@code Consumer.subscribe(Collection, ConsumerRebalanceListener)}. */
  public void subscribe(Collection<String> topics, ConsumerRebalanceListener rebalanceListener) {
    acquireAndEnsureOpen();
    try {
      if (topics == null) {
        throw new IllegalArgumentException("Topic collection to subscribe to cannot be null");
      }
      if (topics.isEmpty()) {
        unsubscribeLocked();
        return;
      }
      for (String topic : topics) {
        if (topic == null || topic.isBlank()) {
          throw new IllegalArgumentException("Topic collection to subscribe to cannot contain null or empty topic");
        }
      }
      subscribeLocked(TopicFilter.of(Set.copyOf(topics)), rebalanceListener);
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.subscribe(Pattern, ConsumerRebalanceListener)}. */
  public void subscribe(Pattern pattern, ConsumerRebalanceListener rebalanceListener) {
    acquireAndEnsureOpen();
    try {
      if (pattern == null || pattern.pattern().isEmpty()) {
        throw new IllegalArgumentException("Topic pattern to subscribe to cannot be " + (pattern == null ? "null" : "empty"));
      }
      subscribeLocked(TopicFilter.of(pattern), rebalanceListener);
    } finally {
      access.release();
    }
  }

  private void subscribeLocked(TopicFilter newFilter, ConsumerRebalanceListener rebalanceListener) {
    if (rebalanceListener == null) {
      throw new IllegalArgumentException("RebalanceListener cannot be null");
    }
    filter = newFilter;
    listener = rebalanceListener;
    matchedTopics.clear();
    for (TopicPartition p : assignedPartitions()) {
      if (filter.matches(p.topic())) {
        matchedTopics.add(p.topic());
      }
    }
    if (stream == null) {
      nextStreamAtNanos = System.nanoTime();
      openStreamIfDue();
    }
  }

  /** See {@code Consumer.unsubscribe()}. */
  public void unsubscribe() {
    acquireAndEnsureOpen();
    try {
      unsubscribeLocked();
    } finally {
      access.release();
    }
  }

  private void unsubscribeLocked() {
    try {
      endStream(System.nanoTime() + DEFAULT_CLOSE_TIMEOUT.toNanos());
    } finally {
      filter = null;
      listener = NO_LISTENER;
      matchedTopics.clear();
      states.values().forEach(PartitionState::resume);
      pruneUnused();
    }
  }

  /** See {@code Consumer.subscription()}. */
  public Set<String> subscription() {
    acquireAndEnsureOpen();
    try {
      if (filter == null) {
        return Set.of();
      }
      return filter.topics() != null ? filter.topics() : Set.copyOf(matchedTopics);
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.assignment()}: the partitions delivered on the current stream. */
  public Set<TopicPartition> assignment() {
    acquireAndEnsureOpen();
    try {
      return Set.copyOf(assignedPartitions());
    } finally {
      access.release();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Poll
  // ---------------------------------------------------------------------------------------------

  /** See {@code Consumer.poll(Duration)}. */
  public ConsumerRecords<K, V> poll(Duration timeout) {
    acquireAndEnsureOpen();
    try {
      if (timeout == null || timeout.isNegative()) {
        throw new IllegalArgumentException("Timeout must not be negative");
      }
      if (filter == null) {
        throw new IllegalStateException("Consumer is not subscribed to any topics or assigned any partitions");
      }
      long deadline = saturatedDeadline(timeout);
      maybeThrowWakeup();
      runCompletedCommitCallbacks();
      if (settings.autoCommit()) {
        autoCommit();
      }
      while (true) {
        openStreamIfDue();
        drainEvents();
        maybeBack();
        ConsumerRecords<K, V> records = takeReady();
        if (records != null) {
          if (!records.isEmpty()) {
            return records;
          }
          continue; // every record of the batch was refused; more may be ready
        }
        long now = System.nanoTime();
        long wait = deadline - now;
        if (wait <= 0) {
          return ConsumerRecords.empty();
        }
        if (stream == null) {
          wait = Math.min(wait, Math.max(0, nextStreamAtNanos - now));
        } else if (outage && streamReadyAtNanos != NOT_READY) {
          wait = Math.min(wait, Math.max(0, streamReadyAtNanos + SETTLED.toNanos() - now)); // to log it is back
        }
        StreamEvent event;
        try {
          event = events.poll(wait, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          throw new InterruptException(e);
        }
        if (event != null) {
          handle(event);
        }
      }
    } finally {
      access.release();
    }
  }

  private void drainEvents() {
    StreamEvent event;
    while ((event = events.poll()) != null) {
      handle(event);
    }
  }

  private void handle(StreamEvent event) {
    if (event instanceof StreamEvent.Wakeup) {
      maybeThrowWakeup(); // a wakeup already consumed at the start of a call leaves a stale event
    } else if (event instanceof StreamEvent.Received) {
      StreamEvent.Received r = (StreamEvent.Received) event;
      if (r.stream() == stream) {
        onConnected();
        if (r.delivery().hasEscalation()) {
          onEscalationNotice(r.delivery());
        } else {
          onReceived(r.delivery());
        }
      }
    } else if (event instanceof StreamEvent.Ready) {
      if (((StreamEvent.Ready) event).stream() == stream) {
        streamReadyAtNanos = System.nanoTime();
        metrics.connected = true;
      }
    } else if (event instanceof StreamEvent.Ended) {
      StreamEvent.Ended e = (StreamEvent.Ended) event;
      if (e.stream() == stream) {
        onStreamLost(e.status());
      }
    }
  }

  /**
   * Ends an outage once the current stream has stayed connected for {@link #SETTLED}: a sidecar
   * that accepts the connection and then refuses the subscription is still away.
   */
  private void maybeBack() {
    if (outage && stream != null && streamReadyAtNanos != NOT_READY
        && System.nanoTime() - streamReadyAtNanos >= SETTLED.toNanos()) {
      onConnected();
    }
  }

  /** The current stream works: one INFO line if it ends an outage. */
  private void onConnected() {
    metrics.connected = true;
    if (outage) {
      outage = false;
      log.info("route={}: the stream to the sidecar is back after {} failed resubscription(s) in {} ms",
          settings.route(), outageRetries, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - outageSinceNanos));
    }
  }

  private void onEscalationNotice(Delivery notice) {
    metrics.escalations.incrementAndGet();
    EscalationListener l = escalationListener;
    if (l == null) {
      return;
    }
    try {
      l.onEscalation(RecordConverter.rawRecord(notice), GuardMapping.toVerdict(notice.getEscalation()));
    } catch (RuntimeException e) {
      log.warn("route={}: the escalation listener threw on {}-{}@{}; ignored", settings.route(),
          notice.getRecord().getTopic(), notice.getRecord().getPartition(), notice.getRecord().getOffset(), e);
    }
  }

  private void onReceived(Delivery delivery) {
    failedStreams = 0; // the stream works: the next break starts the backoff from the beginning
    received.add(delivery);
    TopicPartition partition = RecordConverter.topicPartition(delivery);
    if (assign(partition)) {
      if (filter.matches(partition.topic())) {
        matchedTopics.add(partition.topic());
      }
      invokeListener("onPartitionsAssigned", List.of(partition), listener::onPartitionsAssigned);
    }
  }

  /**
   * Returns up to max.poll.records deliveries of unpaused partitions as records; {@code null}
   * if none is ready.
   *
   * <p>A delivery becomes outstanding (what a commit acknowledges OK) only once the whole batch
   * is built, just before poll returns it. If any step throws (a deserializer's {@code Error},
   * building {@code ConsumerRecords}), the batch goes back to the front of the buffer untouched:
   * nothing was acknowledged, not even the refusals of undeserializable records, and the next
   * poll tries again (or the sidecar redelivers it, if the stream ends first).
   */
  private ConsumerRecords<K, V> takeReady() {
    List<Delivery> batch = new ArrayList<>();
    for (Iterator<Delivery> it = received.iterator(); it.hasNext() && batch.size() < settings.maxPollRecords(); ) {
      Delivery d = it.next();
      if (!isPaused(RecordConverter.topicPartition(d))) {
        it.remove();
        batch.add(d);
      }
    }
    if (batch.isEmpty()) {
      return null;
    }
    for (Delivery d : batch) {
      if (!filter.matches(d.getRecord().getTopic())) {
        failForeignTopic(d);
      }
    }
    Map<TopicPartition, List<ConsumerRecord<K, V>>> byPartition = new LinkedHashMap<>();
    List<Delivery> returned = new ArrayList<>(batch.size());
    List<Refusal> refused = new ArrayList<>();
    ConsumerRecords<K, V> records;
    try {
      for (Delivery d : batch) {
        ConsumerRecord<K, V> record;
        try {
          record = converter.toRecord(d);
        } catch (RuntimeException e) {
          refused.add(new Refusal(d, e));
          continue;
        }
        returned.add(d);
        byPartition.computeIfAbsent(RecordConverter.topicPartition(d), p -> new ArrayList<>()).add(record);
      }
      // Different entities of a partition are processed concurrently by the sidecar, so they may
      // arrive out of offset order. Sorting each partition's records keeps the Kafka habit of
      // committing record.offset() + 1 after each record safe within one batch.
      byPartition.values().forEach(list -> list.sort(Comparator.comparingLong(ConsumerRecord::offset)));
      records = recordsFactory.create(byPartition, nextOffsets(returned));
    } catch (Throwable t) { // Errors too: a NoSuchMethodError must not cost a record either
      for (int i = batch.size() - 1; i >= 0; i--) {
        received.addFirst(batch.get(i));
      }
      throw t;
    }
    // The batch is built; from here poll returns it.
    for (Delivery d : returned) {
      state(RecordConverter.topicPartition(d)).addOutstanding(d, ++outstandingOrder);
    }
    for (Refusal r : refused) {
      refuseUndeserializable(r.delivery(), r.failure());
    }
    for (Delivery d : batch) {
      state(RecordConverter.topicPartition(d)).handedOut(d.getRecord().getOffset());
    }
    metrics.polled.addAndGet(returned.size());
    metrics.refused.addAndGet(refused.size());
    metrics.inFlight = inFlight();
    return records;
  }

  /** A delivery whose key or value could not be deserialized, and why. */
  private record Refusal(Delivery delivery, RuntimeException failure) {}

  private void failForeignTopic(Delivery delivery) {
    String topic = delivery.getRecord().getTopic();
    String subscribed = filter.topics() != null ? filter.topics().toString() : "pattern " + filter.pattern();
    // Half-close rather than cancel: acknowledgements sent earlier still reach the sidecar.
    stream.halfClose();
    onStreamLost(Status.CANCELLED.withDescription("record of topic '" + topic + "' outside the subscription"));
    throw new KafkaException(String.format(
        "Route '%s' delivered a record of topic '%s', which this consumer is not subscribed to (%s). The route,"
            + " not subscribe(), decides which topics are consumed: subscribe to all of its topics. The stream was"
            + " ended with the record unacknowledged, so the sidecar redelivers it.",
        settings.route(), topic, subscribed));
  }

  private void refuseUndeserializable(Delivery d, RuntimeException failure) {
    HandleResult result = classifier.classify(failure);
    log.warn(
        "route={} topic={} partition={} offset={} dedupKey={}: cannot deserialize the record, answering {}",
        settings.route(),
        d.getRecord().getTopic(),
        d.getRecord().getPartition(),
        d.getRecord().getOffset(),
        d.getDedupKey(),
        result.getOutcome(),
        failure);
    stream.ack(d.getDeliveryId(), result);
  }

  // ---------------------------------------------------------------------------------------------
  // Commits and decisions
  // ---------------------------------------------------------------------------------------------

  /** See {@code Consumer.commitSync()}: acknowledges OK everything poll returned. */
  public void commitSync() {
    acquireAndEnsureOpen();
    try {
      maybeThrowWakeup();
      runCompletedCommitCallbacks();
      commitAll();
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.commitSync(Map)}: acknowledges OK what poll returned below the offsets. */
  public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
    acquireAndEnsureOpen();
    try {
      requireOffsets(offsets);
      maybeThrowWakeup();
      runCompletedCommitCallbacks();
      commitBelow(offsets);
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.commitAsync(OffsetCommitCallback)}. */
  public void commitAsync(OffsetCommitCallback callback) {
    acquireAndEnsureOpen();
    try {
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      states.forEach((p, s) -> {
        if (s.hasOutstanding()) {
          offsets.put(p, s.outstandingNext());
        }
      });
      Exception error = null;
      try {
        commitAll();
      } catch (CommitFailedException e) {
        error = e;
      }
      enqueueCallback(callback, offsets, error);
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.commitAsync(Map, OffsetCommitCallback)}. */
  public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
    acquireAndEnsureOpen();
    try {
      requireOffsets(offsets);
      Map<TopicPartition, OffsetAndMetadata> copy = Map.copyOf(offsets);
      Exception error = null;
      try {
        commitBelow(copy);
      } catch (CommitFailedException e) {
        error = e;
      }
      enqueueCallback(callback, copy, error);
    } finally {
      access.release();
    }
  }

  /**
   * Answers one polled record with RETRY or REJECT instead of committing it.
   *
   * @param record a record returned by poll on this consumer and not yet acknowledged
   * @param result the answer
   */
  public void decide(ConsumerRecord<?, ?> record, HandleResult result) {
    acquireAndEnsureOpen();
    try {
      if (record == null) {
        throw new IllegalArgumentException("record must not be null");
      }
      requireLiveStreamForOutstanding();
      TopicPartition partition = new TopicPartition(record.topic(), record.partition());
      PartitionState state = states.get(partition);
      Delivery d = state == null ? null : state.takeOutstanding(record.offset());
      if (d == null) {
        throw new IllegalStateException(String.format(
            "%s@%d is not outstanding: it was not returned by poll() on this consumer, was already committed,"
                + " rejected or retried, or its stream ended (then the sidecar redelivers it)",
            partition, record.offset()));
      }
      stream.ack(d.getDeliveryId(), result);
      (result.getOutcome() == HandleResult.Outcome.REJECT ? metrics.rejected : metrics.retried).incrementAndGet();
      metrics.inFlight = inFlight();
    } finally {
      access.release();
    }
  }

  private void autoCommit() {
    try {
      commitAll();
    } catch (CommitFailedException e) {
      // The stream ended; this poll handles that. Kafka's auto-commit logs failures likewise.
      log.debug("route={}: auto-commit skipped: {}", settings.route(), e.getMessage());
    }
  }

  private Map<TopicPartition, OffsetAndMetadata> commitAll() {
    requireLiveStreamForOutstanding();
    List<Delivery> all = new ArrayList<>();
    states.values().stream()
        .filter(PartitionState::hasOutstanding)
        .sorted(Comparator.comparingLong(PartitionState::outstandingOrder))
        .forEach(s -> all.addAll(s.takeAllOutstanding()));
    return acknowledge(all);
  }

  private void commitBelow(Map<TopicPartition, OffsetAndMetadata> offsets) {
    requireLiveStreamForOutstanding();
    List<Delivery> below = new ArrayList<>();
    offsets.forEach((partition, next) -> {
      PartitionState state = states.get(partition);
      if (state != null && next != null) {
        below.addAll(state.takeOutstandingBelow(next.offset()));
      }
    });
    acknowledge(below);
  }

  private Map<TopicPartition, OffsetAndMetadata> acknowledge(List<Delivery> deliveries) {
    for (Delivery d : deliveries) {
      stream.ack(d.getDeliveryId(), OK);
    }
    Map<TopicPartition, OffsetAndMetadata> next = nextOffsets(deliveries);
    next.forEach((p, o) -> state(p).acknowledged(o.offset()));
    metrics.acknowledged.addAndGet(deliveries.size());
    metrics.inFlight = inFlight();
    return next;
  }

  /** The next offset per partition for a list of deliveries: highest offset + 1. */
  private static Map<TopicPartition, OffsetAndMetadata> nextOffsets(List<Delivery> deliveries) {
    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
    for (Delivery d : deliveries) {
      long candidate = d.getRecord().getOffset() + 1;
      next.merge(
          RecordConverter.topicPartition(d),
          new OffsetAndMetadata(candidate),
          (a, b) -> a.offset() >= b.offset() ? a : b);
    }
    return next;
  }

  private void requireLiveStreamForOutstanding() {
    if (inFlight() > 0 && stream.isEnded()) {
      throw new CommitFailedException(String.format(
          "The stream to the sidecar for route '%s' ended before these records were acknowledged; the sidecar"
              + " redelivers them (redelivery=true) on the next subscription, which poll() opens.",
          settings.route()));
    }
  }

  private void enqueueCallback(
      OffsetCommitCallback callback, Map<TopicPartition, OffsetAndMetadata> offsets, Exception error) {
    // Like KafkaConsumer: callbacks run on the consumer thread, in a later poll, commit or close.
    if (callback != null) {
      completedCommits.add(() -> callback.onComplete(offsets, error));
    } else if (error != null) {
      completedCommits.add(() -> log.warn("route={}: asynchronous commit failed: {}", settings.route(), error.getMessage()));
    }
  }

  private void runCompletedCommitCallbacks() {
    Runnable callback;
    while ((callback = completedCommits.poll()) != null) {
      callback.run();
    }
  }

  private static void requireOffsets(Map<TopicPartition, OffsetAndMetadata> offsets) {
    if (offsets == null) {
      throw new IllegalArgumentException("offsets must not be null");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Positions, offsets, metrics, escalations
  // ---------------------------------------------------------------------------------------------

  /**
   * See {@code Consumer.committed(Set)}: per partition, the offset after the highest record this
   * consumer acknowledged OK, or {@code null} if it acknowledged none.
   */
  public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions) {
    acquireAndEnsureOpen();
    try {
      requirePartitions(partitions);
      Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
      for (TopicPartition p : partitions) {
        PartitionState state = states.get(p);
        out.put(p, state == null ? null : state.committed());
      }
      return out;
    } finally {
      access.release();
    }
  }

  /**
   * See {@code Consumer.position}: the offset after the highest record of the partition that
   * poll returned (or refused); before the first, the lowest offset received for it.
   *
   * @throws IllegalStateException if the partition is not in {@link #assignment()}
   */
  public long position(TopicPartition partition) {
    acquireAndEnsureOpen();
    try {
      requireAssigned(partition, "check the position for");
      return positionLocked(partition);
    } finally {
      access.release();
    }
  }

  private long positionLocked(TopicPartition partition) {
    return states.get(partition).position(() -> lowestBuffered(partition));
  }

  /** The lowest offset of the partition received and not returned by poll; MAX_VALUE if none. */
  private long lowestBuffered(TopicPartition partition) {
    long lowest = Long.MAX_VALUE;
    for (Delivery d : received) {
      if (RecordConverter.topicPartition(d).equals(partition)) {
        lowest = Math.min(lowest, d.getRecord().getOffset());
      }
    }
    return lowest;
  }

  /**
   * See {@code Consumer.seek}: the records of the partition at or after {@code offset} that poll
   * returned and that are not acknowledged are returned again by the next poll (what a Spring
   * Kafka error handler does to retry a failed record). Acknowledged records are final.
   *
   * @throws IllegalStateException if the partition is not in {@link #assignment()}
   * @throws UnsupportedOperationException if no unacknowledged record is at or after
   *     {@code offset} and {@code offset} is not the current position: that move would skip
   *     records without a verdict or replay acknowledged ones
   */
  public void seek(TopicPartition partition, long offset, String unsupportedMessage) {
    acquireAndEnsureOpen();
    try {
      requireAssigned(partition, "seek");
      if (offset < 0) {
        throw new IllegalArgumentException("seek offset must not be negative");
      }
      List<Delivery> back = states.get(partition).rewindTo(offset);
      if (back.isEmpty()) {
        if (offset != positionLocked(partition)) {
          throw new UnsupportedOperationException(String.format(
              "seek(%s, %d)%s (position %d; only unacknowledged records can be returned again)", partition, offset,
              unsupportedMessage, positionLocked(partition)));
        }
        return;
      }
      for (int i = back.size() - 1; i >= 0; i--) {
        received.addFirst(back.get(i));
      }
      metrics.inFlight = inFlight();
    } finally {
      access.release();
    }
  }

  private void requireAssigned(TopicPartition partition, String what) {
    if (partition == null) {
      throw new IllegalArgumentException("partition must not be null");
    }
    PartitionState state = states.get(partition);
    if (state == null || !state.isAssigned()) {
      throw new IllegalStateException("You can only " + what + " partitions assigned to this consumer; " + partition
          + " is not (OnceGuardConsumer: a partition is assigned once the current stream delivered a record of it)");
    }
  }

  /** The consumer's own counters; callable from any thread. */
  public ConsumerMetrics metrics() {
    return metrics;
  }

  /** Sets (or, with null, removes) the escalation listener; applies to the next subscription. */
  public void setEscalationListener(EscalationListener listener) {
    acquireAndEnsureOpen();
    try {
      this.escalationListener = listener;
    } finally {
      access.release();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Pause, wakeup, close
  // ---------------------------------------------------------------------------------------------

  /** See {@code Consumer.pause}: local; records that arrived for these partitions are held. */
  public void pause(Collection<TopicPartition> partitions) {
    acquireAndEnsureOpen();
    try {
      requirePartitions(partitions);
      partitions.forEach(p -> state(p).pause());
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.resume}. */
  public void resume(Collection<TopicPartition> partitions) {
    acquireAndEnsureOpen();
    try {
      requirePartitions(partitions);
      for (TopicPartition p : partitions) {
        PartitionState state = states.get(p);
        if (state != null) {
          state.resume();
        }
      }
      pruneUnused();
    } finally {
      access.release();
    }
  }

  /** See {@code Consumer.paused()}. */
  public Set<TopicPartition> paused() {
    acquireAndEnsureOpen();
    try {
      return Set.copyOf(partitionsWhere(PartitionState::isPaused));
    } finally {
      access.release();
    }
  }

  private static void requirePartitions(Collection<TopicPartition> partitions) {
    if (partitions == null) {
      throw new IllegalArgumentException("partitions must not be null");
    }
    for (TopicPartition p : partitions) { // contains(null) throws on immutable collections
      if (p == null) {
        throw new IllegalArgumentException("partitions must not contain null");
      }
    }
  }

  /** See {@code Consumer.wakeup()}: the one method any thread may call. */
  public void wakeup() {
    wakeupRequested.set(true);
    events.add(StreamEvent.WAKEUP);
  }

  /** Checks that the consumer is open and used by one thread; for methods with no state. */
  public void ensureOpen() {
    acquireAndEnsureOpen();
    access.release();
  }

  /** See {@code Consumer.close(Duration)}. Idempotent. */
  public void close(Duration timeout) {
    if (timeout == null || timeout.isNegative()) {
      throw new IllegalArgumentException("The timeout cannot be negative.");
    }
    access.acquire();
    try {
      if (closed) {
        return;
      }
      long deadline = saturatedDeadline(timeout);
      KafkaException failure = null;
      try {
        endStream(deadline);
        runCompletedCommitCallbacks();
      } catch (RuntimeException e) {
        failure = new KafkaException("Failed to close OnceGuardConsumer cleanly", e);
      } finally {
        closed = true;
        filter = null;
        closeQuietly(keyDeserializer, "key deserializer");
        closeQuietly(valueDeserializer, "value deserializer");
        if (ownedChannel != null) {
          Channels.shutdown(ownedChannel, Duration.ofNanos(Math.max(0, deadline - System.nanoTime())));
        }
      }
      if (failure != null) {
        throw failure;
      }
    } finally {
      access.release();
    }
  }

  /**
   * Ends the current stream on purpose (unsubscribe, close): the listener hears
   * {@code onPartitionsRevoked} and may still commit; then auto-commit; then a half-close so
   * the acknowledgements reach the sidecar before the end.
   */
  private void endStream(long deadline) {
    if (stream == null) {
      return;
    }
    RuntimeException listenerFailure = null;
    List<TopicPartition> assigned = assignedPartitions();
    if (!assigned.isEmpty()) {
      // A stream that already broke cannot take commits any more: its partitions are lost.
      boolean broken = stream.isEnded();
      try {
        if (broken) {
          invokeListener("onPartitionsLost", assigned, listener::onPartitionsLost);
        } else {
          invokeListener("onPartitionsRevoked", assigned, listener::onPartitionsRevoked);
        }
      } catch (RuntimeException e) {
        listenerFailure = e;
      }
    }
    if (settings.autoCommit()) {
      autoCommit();
    }
    SubscriberStream ending = stream;
    stream = null;
    discardStreamState();
    if (!ending.isEnded()) {
      ending.halfClose();
      try {
        if (!ending.awaitEnd(deadline - System.nanoTime())) {
          log.warn("route={}: the sidecar did not end the stream in time after half-close; cancelling", settings.route());
          ending.cancel("consumer closed");
        }
      } catch (InterruptedException e) {
        ending.cancel("consumer closed (interrupted)");
        Thread.currentThread().interrupt();
      }
    }
    if (listenerFailure != null) {
      throw listenerFailure;
    }
  }

  private void onStreamLost(Status status) {
    stream = null;
    List<TopicPartition> lost = assignedPartitions();
    discardStreamState();
    long delayMs = backoffMs(failedStreams++);
    nextStreamAtNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(delayMs);
    boolean fatal = isFatal(status.getCode());
    metrics.connected = false;
    if (outage) {
      // One line per outage, not one per attempt: the INFO when it is back counts them.
      outageRetries++;
      log.debug("route={}: resubscription {} failed ({}); next in {} ms", settings.route(), outageRetries, describe(status),
          delayMs);
    } else {
      outage = true;
      outageRetries = 0;
      outageSinceNanos = System.nanoTime();
      if (status.isOk()) {
        log.info("route={}: the sidecar ended the stream; resubscribing in {} ms", settings.route(), delayMs);
      } else {
        log.warn("route={}: the stream to the sidecar broke ({}); resubscribing with backoff (up to {} ms apart), logged"
            + " again once it is back", settings.route(), describe(status), settings.reconnectBackoffMaxMs());
      }
    }
    if (!lost.isEmpty()) {
      invokeListener("onPartitionsLost", lost, listener::onPartitionsLost);
    }
    if (fatal) {
      throw new KafkaException(String.format(
          "The sidecar refused the subscription to route '%s': %s%s", settings.route(), status.getCode(),
          status.getDescription() == null ? "" : ": " + status.getDescription()),
          status.asRuntimeException());
    }
  }

  private void discardStreamState() {
    received.clear();
    states.values().forEach(PartitionState::unassign);
    pruneUnused();
    metrics.inFlight = 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Partition states
  // ---------------------------------------------------------------------------------------------

  /** The state of a partition, created if the consumer knew nothing of it. */
  private PartitionState state(TopicPartition partition) {
    return states.computeIfAbsent(partition, p -> new PartitionState());
  }

  /**
   * Assigns a partition on the current stream; {@code false} if it already was. A newly assigned
   * partition's state moves to the end of {@link #states}, which keeps the assigned ones in
   * assignment order (the stream's end unassigns them all).
   */
  private boolean assign(TopicPartition partition) {
    PartitionState state = states.get(partition);
    if (state == null) {
      state = new PartitionState();
    } else if (state.isAssigned()) {
      return false;
    } else {
      states.remove(partition);
    }
    state.assign();
    states.put(partition, state);
    return true;
  }

  /** The partitions assigned on the current stream, in assignment order; unmodifiable. */
  private List<TopicPartition> assignedPartitions() {
    return partitionsWhere(PartitionState::isAssigned);
  }

  /** The partitions whose state passes the test, in the order of {@link #states}; unmodifiable. */
  private List<TopicPartition> partitionsWhere(Predicate<PartitionState> test) {
    List<TopicPartition> matching = new ArrayList<>();
    states.forEach((p, s) -> {
      if (test.test(s)) {
        matching.add(p);
      }
    });
    return List.copyOf(matching);
  }

  private boolean isPaused(TopicPartition partition) {
    PartitionState state = states.get(partition);
    return state != null && state.isPaused();
  }

  /** How many deliveries poll returned that are not acknowledged. */
  private int inFlight() {
    int n = 0;
    for (PartitionState s : states.values()) {
      n += s.outstandingCount();
    }
    return n;
  }

  /** Forgets the partitions of which nothing is worth keeping. */
  private void pruneUnused() {
    states.values().removeIf(PartitionState::isUnused);
  }

  /** A status in one line: code and description, the cause's message, no stack trace. */
  private static String describe(Status status) {
    StringBuilder b = new StringBuilder(status.getCode().name());
    if (status.getDescription() != null) {
      b.append(": ").append(status.getDescription());
    }
    if (status.getCause() != null) {
      b.append(" (").append(status.getCause()).append(')');
    }
    return b.toString();
  }

  /** Statuses a new subscription cannot fix without an operator; polls report them. */
  private static boolean isFatal(Status.Code code) {
    switch (code) {
      case INVALID_ARGUMENT:
      case NOT_FOUND:
      case FAILED_PRECONDITION:
      case PERMISSION_DENIED:
      case UNAUTHENTICATED:
      case UNIMPLEMENTED:
        return true;
      default:
        return false;
    }
  }

  private long backoffMs(int failures) {
    long base = settings.reconnectBackoffMs();
    long max = settings.reconnectBackoffMaxMs();
    long exp = failures >= 30 ? max : Math.min(max, base << failures);
    // +-20% jitter, so that the subscribers of a restarted sidecar do not return in lockstep
    double jitter = 0.8 + 0.4 * ThreadLocalRandom.current().nextDouble();
    return Math.min(max, (long) (exp * jitter));
  }

  private void openStreamIfDue() {
    if (stream == null && filter != null && System.nanoTime() - nextStreamAtNanos >= 0) {
      Subscription subscription = Subscription.newBuilder()
          .setRoute(settings.route())
          .setWindow(settings.window())
          .setSubscriber(settings.subscriber())
          .setEscalations(escalationListener != null)
          .build();
      if (outage) {
        metrics.reconnects.incrementAndGet();
      }
      streamReadyAtNanos = NOT_READY;
      stream = SubscriberStream.open(channel, subscription, events);
      log.debug("route={} subscriber={}: subscribed, window {}", settings.route(), settings.subscriber(), settings.window());
    }
  }

  private void invokeListener(String name, List<TopicPartition> partitions, java.util.function.Consumer<List<TopicPartition>> call) {
    try {
      call.accept(partitions);
    } catch (WakeupException | InterruptException e) {
      throw e;
    } catch (KafkaException e) {
      throw e;
    } catch (RuntimeException e) {
      throw new KafkaException("User rebalance callback " + name + " threw an error", e);
    }
  }

  private void maybeThrowWakeup() {
    if (wakeupRequested.getAndSet(false)) {
      throw new WakeupException();
    }
  }

  private void acquireAndEnsureOpen() {
    access.acquire();
    if (closed) {
      access.release();
      throw new IllegalStateException("This consumer has already been closed.");
    }
  }

  private static long saturatedDeadline(Duration timeout) {
    long now = System.nanoTime();
    long nanos;
    try {
      nanos = timeout.toNanos();
    } catch (ArithmeticException e) {
      nanos = Long.MAX_VALUE;
    }
    long deadline = now + nanos;
    return deadline - now < 0 ? now + Long.MAX_VALUE : deadline;
  }

  private static void closeQuietly(AutoCloseable closeable, String what) {
    try {
      closeable.close();
    } catch (Exception e) {
      log.warn("Failed to close the {}", what, e);
    }
  }

  /** Which delivered topics the subscription accepts: a fixed set, or a pattern. */
  private record TopicFilter(Set<String> topics, Pattern pattern) {
    static TopicFilter of(Set<String> topics) {
      return new TopicFilter(topics, null);
    }

    static TopicFilter of(Pattern pattern) {
      return new TopicFilter(null, pattern);
    }

    boolean matches(String topic) {
      return topics != null ? topics.contains(topic) : pattern.matcher(topic).matches();
    }
  }
}
