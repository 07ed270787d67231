package dev.onceguard.client;

import dev.onceguard.client.internal.ConsumerMetrics;
import dev.onceguard.client.internal.ConsumerSettings;
import dev.onceguard.client.internal.FailureClassifier;
import dev.onceguard.client.internal.PullConsumer;
import dev.onceguard.v1.HandleResult;
import io.grpc.Channel;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * A drop-in {@link Consumer} that receives the records a OnceGuard sidecar accepted, instead of
 * reading Kafka itself. Code written against {@code Consumer} (or {@code KafkaConsumer}) keeps
 * working when only the constructor line changes:
 *
 * <pre>{@code
 * Properties props = new Properties();
 * props.put("onceguard.target", "127.0.0.1:7700");    // the sidecar
 * props.put("onceguard.route", "orders-shipping");    // its pull-mode route
 * props.put("enable.auto.commit", "false");
 * Consumer<String, String> consumer =
 *     new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer());
 * }</pre>
 *
 * <h2>Model</h2>
 *
 * The sidecar consumes the route's topics with its own consumer group, drops duplicates and
 * illegal transitions, and streams the accepted records to this consumer over
 * {@code Deliveries.Subscribe}. Each returned record must be acknowledged: a <em>commit
 * acknowledges OK</em> every record that earlier polls returned (and that is what lets the
 * sidecar confirm it and commit its Kafka offset), {@link #reject} answers REJECT (the record
 * is escalated), {@link #retry} asks for it again later. Records not acknowledged when the
 * stream ends ({@link #close()}, a crash, a network failure) are delivered again, flagged with
 * the header {@link dev.onceguard.wire.Headers#REDELIVERY} {@code = "true"}, to the next subscriber.
 *
 * <ul>
 *   <li><b>Topics.</b> The route decides which topics are consumed. {@code subscribe} records
 *       the topics (or pattern) the code expects and opens the stream; a record of a topic
 *       outside the subscription is a mismatch between code and route, so {@code poll} throws a
 *       {@code KafkaException} naming it and ends the stream unacknowledged (nothing is lost,
 *       nothing is escalated). Subscribing to a topic the route does not consume cannot be
 *       detected here: it simply never yields records.
 *   <li><b>Assignment.</b> {@link #assignment()} is the set of partitions the current stream has
 *       delivered records of. The {@link ConsumerRebalanceListener} hears
 *       {@code onPartitionsAssigned} for each newly seen partition (inside {@code poll}),
 *       {@code onPartitionsRevoked} on {@code close}/{@code unsubscribe} (it may still commit
 *       then), and {@code onPartitionsLost} when the stream broke.
 *   <li><b>Order.</b> Records of one entity arrive in machine order, one at a time; different
 *       entities of a partition are processed concurrently by the sidecar, so a partition's
 *       records may arrive out of offset order. Each poll returns a partition's records sorted
 *       by offset, so committing {@code record.offset() + 1} after each record is safe.
 *   <li><b>Commit semantics.</b> {@code commitSync()} and {@code commitAsync()} acknowledge OK
 *       every record returned by previous polls and not yet acknowledged;
 *       {@code commitSync(offsets)} those of each given partition with an offset below the
 *       given one (the Kafka meaning: "the next offset to consume"). Acknowledgements are
 *       handed to the gRPC stream and not confirmed by the sidecar (the contract has no reply),
 *       so a stream that breaks right after a commit may still redeliver those records — the
 *       same at-least-once window as a Kafka commit that times out. If the stream has already
 *       ended, a commit throws {@link CommitFailedException}, as Kafka does after losing its
 *       partitions; the records come back, flagged as redeliveries.
 *   <li><b>Auto-commit.</b> {@code enable.auto.commit} (default {@code true}, as in Kafka):
 *       each {@code poll} first commits what earlier polls returned, and {@code close} and
 *       {@code unsubscribe} commit it too, as {@code KafkaConsumer} does.
 *       {@code auto.commit.interval.ms} is ignored: holding acknowledgements back would keep the
 *       window closed and stall the stream.
 *   <li><b>Flow control.</b> The sidecar sends at most {@code onceguard.window} unacknowledged
 *       deliveries. Polled-but-uncommitted records count against it: with auto-commit off,
 *       {@code poll} returns nothing more once that many records wait for a commit.
 *       {@link #pause}/{@link #resume} are honoured locally: records of paused partitions that
 *       arrive are held (and keep their window slots) until resumed.
 *   <li><b>Time to commit.</b> The sidecar redelivers a record that is not acknowledged within
 *       the route's handler timeout — the analogue of {@code max.poll.interval.ms}. Commit
 *       soon after processing; a late acknowledgement is ignored and the record comes back,
 *       flagged as a redelivery.
 *   <li><b>Records.</b> Key and value are deserialized with the configured deserializers;
 *       headers are the Kafka record's, null values included, followed by
 *       the delivery headers of {@link dev.onceguard.wire.Headers}. A record whose deserialization fails is not returned: it is
 *       answered REJECT ({@code SerializationException}) or RETRY (transient causes), by the
 *       rule of {@link MessageHandlerAdapter}, and logged — there is no {@code seek} to skip it
 *       with, and the escalation topic keeps its bytes. The timestamp type is always
 *       {@code CREATE_TIME} and the leader epoch empty (the contract does not carry them).
 *   <li><b>kafka-clients versions.</b> Runs on kafka-clients 3.0 to 4.x, whichever the
 *       application's build resolved; the constructors check the version and throw an
 *       {@link IllegalStateException} naming the supported range on any other. Methods that only
 *       the 3.x {@code Consumer} declares ({@code poll(long)}, {@code committed(TopicPartition)})
 *       are implemented too.
 *   <li><b>Reconnects.</b> When the stream ends unexpectedly, {@code poll} resubscribes with
 *       exponential backoff ({@code reconnect.backoff.ms} to {@code reconnect.backoff.max.ms}).
 *       Statuses that resubscribing cannot fix (unknown route, route not in pull mode, not
 *       authorised, no {@code Deliveries} service) make that poll throw a
 *       {@code KafkaException} with the sidecar's description.
 * </ul>
 *
 * <p>Answered locally: {@code position} (after the highest record poll returned),
 * {@code committed} (after the highest record this consumer acknowledged), {@code metrics()}
 * (the client's own counters), {@code seek} back to records returned and not yet acknowledged
 * (they are returned again); {@code currentLag} is unknown, {@code enforceRebalance} and metric
 * registration are no-ops. Escalations of the route can reach an {@link EscalationListener}.
 *
 * <p>Not supported, each throwing {@link UnsupportedOperationException} with the reason and
 * what to do instead: {@code assign} (non-empty), {@code seek} anywhere else,
 * {@code seekToBeginning}, {@code seekToEnd}, {@code partitionsFor}, {@code listTopics},
 * {@code offsetsForTimes}, {@code beginningOffsets}, {@code endOffsets},
 * {@code groupMetadata}, {@code clientInstanceId}, {@code subscribe(SubscriptionPattern)}.
 *
 * <h2>Threading and resources</h2>
 *
 * Like {@code KafkaConsumer}, this class is not thread-safe: use it from one thread at a time
 * (concurrent use throws {@link java.util.ConcurrentModificationException}), except
 * {@link #wakeup()}, which any thread may call to make a blocked {@code poll} (or the next one)
 * throw {@link org.apache.kafka.common.errors.WakeupException}. Rebalance listener and commit
 * callbacks run on the calling thread, inside {@code poll}, commits, {@code unsubscribe} and
 * {@code close}. {@code poll} blocks up to its timeout; everything else returns without waiting
 * on the network, except {@code close} and {@code unsubscribe}, which wait for the sidecar to
 * end the stream (up to their timeout, 30 s by default).
 *
 * <p>Always {@link #close()} it. A consumer built from {@code onceguard.target} owns its gRPC
 * channel and shuts it down on close; one built from a {@link Channel} leaves it open.
 * Deserializers are closed in both cases, as {@code KafkaConsumer} does.
 *
 * @param <K> key type
 * @param <V> value type
 * @see OnceGuardConsumerConfig for the configuration keys
 */
public class OnceGuardConsumer<K, V> implements Consumer<K, V> {
  private static final String OFFSETS_OWNED =
      " is not supported by OnceGuardConsumer: the sidecar owns the offsets. It commits a partition only past"
          + " records that were confirmed, ignored as duplicates or escalated, so moving the position from the"
          + " client would skip records without a verdict or replay them around the ledger. To process a record"
          + " again, re-drive it from the escalation topic.";
  private static final String NO_BROKER =
      " is not supported by OnceGuardConsumer: it has no connection to the Kafka brokers, only to the sidecar."
          + " Use a Kafka Admin client.";
  private static final String ASSIGNMENT_OWNED =
      "assign is not supported by OnceGuardConsumer: the sidecar's route owns the consumer group and the partition"
          + " assignment, and a subscriber receives what the route consumes. Use subscribe().";
  private static final String SEEK_UNSUPPORTED =
      " is not supported by OnceGuardConsumer: the sidecar owns the offsets and commits a partition only past"
          + " records with a verdict, so only records returned by poll() and not yet acknowledged can be returned"
          + " again. To process an acknowledged record again, re-drive it from the escalation topic";

  private final PullConsumer<K, V> delegate;

  /**
   * Creates a consumer from a configuration, with deserializers from {@code key.deserializer}
   * and {@code value.deserializer} (configured with this configuration).
   *
   * @param configs see {@link OnceGuardConsumerConfig}; {@code onceguard.target} and
   *     {@code onceguard.route} are required
   * @throws org.apache.kafka.common.config.ConfigException naming a missing or invalid key
   * @throws IllegalStateException if the kafka-clients on the classpath is outside 3.0 to 4.x
   */
  public OnceGuardConsumer(Map<String, Object> configs) {
    this(configs, null, null);
  }

  /**
   * Creates a consumer from properties, with deserializers from {@code key.deserializer} and
   * {@code value.deserializer} (configured with these properties).
   *
   * @param properties see {@link OnceGuardConsumerConfig}; {@code onceguard.target} and
   *     {@code onceguard.route} are required
   * @throws org.apache.kafka.common.config.ConfigException naming a missing or invalid key
   * @throws IllegalStateException if the kafka-clients on the classpath is outside 3.0 to 4.x
   */
  public OnceGuardConsumer(Properties properties) {
    this(ConsumerSettings.toMap(properties), null, null);
  }

  /**
   * Creates a consumer from properties and deserializers. As with {@code KafkaConsumer}, the
   * deserializers' {@code configure} is not called.
   *
   * @param properties see {@link OnceGuardConsumerConfig}; {@code onceguard.target} and
   *     {@code onceguard.route} are required
   * @param keyDeserializer key deserializer, or {@code null} to use {@code key.deserializer}
   * @param valueDeserializer value deserializer, or {@code null} to use {@code value.deserializer}
   * @throws org.apache.kafka.common.config.ConfigException naming a missing or invalid key
   * @throws IllegalStateException if the kafka-clients on the classpath is outside 3.0 to 4.x
   */
  public OnceGuardConsumer(Properties properties, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    this(ConsumerSettings.toMap(properties), keyDeserializer, valueDeserializer);
  }

  /**
   * Creates a consumer from a configuration and deserializers. As with {@code KafkaConsumer},
   * the deserializers' {@code configure} is not called.
   *
   * @param configs see {@link OnceGuardConsumerConfig}; {@code onceguard.target} and
   *     {@code onceguard.route} are required
   * @param keyDeserializer key deserializer, or {@code null} to use {@code key.deserializer}
   * @param valueDeserializer value deserializer, or {@code null} to use {@code value.deserializer}
   * @throws org.apache.kafka.common.config.ConfigException naming a missing or invalid key
   * @throws IllegalStateException if the kafka-clients on the classpath is outside 3.0 to 4.x
   */
  public OnceGuardConsumer(
      Map<String, Object> configs, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    this.delegate = PullConsumer.create(configs, null, keyDeserializer, valueDeserializer);
  }

  /**
   * Creates a consumer on a channel the caller owns — for tests (an in-process channel) or for
   * channel settings this class does not expose (TLS, interceptors). The consumer does not shut
   * the channel down: whoever creates a channel closes it, since it may be shared with other
   * stubs (the reasoning of grpc-java's HelloWorldClient). {@code onceguard.target} is not
   * needed.
   *
   * @param channel channel to the sidecar, not owned
   * @param configs see {@link OnceGuardConsumerConfig}; {@code onceguard.route} is required
   * @param keyDeserializer key deserializer, or {@code null} to use {@code key.deserializer}
   * @param valueDeserializer value deserializer, or {@code null} to use {@code value.deserializer}
   * @throws org.apache.kafka.common.config.ConfigException naming a missing or invalid key
   * @throws IllegalStateException if the kafka-clients on the classpath is outside 3.0 to 4.x
   */
  public OnceGuardConsumer(
      Channel channel, Map<String, Object> configs, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    if (channel == null) {
      throw new IllegalArgumentException("channel must not be null");
    }
    this.delegate = PullConsumer.create(configs, channel, keyDeserializer, valueDeserializer);
  }

  /** For tests that build the delegate themselves (to make a step of poll fail). */
  OnceGuardConsumer(PullConsumer<K, V> delegate) {
    this.delegate = delegate;
  }

  // ---------------------------------------------------------------------------------------------
  // OnceGuard additions
  // ---------------------------------------------------------------------------------------------

  /**
   * Answers REJECT for one polled record instead of committing it: the sidecar aborts its claim
   * (the entity goes back to its previous state) and escalates the record as
   * {@code BUSINESS_REJECTED} with {@code reason} in its headers. A later commit does not touch
   * it. Sent at once, not at the next commit.
   *
   * @param record a record returned by {@code poll} on this consumer and not yet acknowledged
   * @param reason why it cannot be applied; ends up in escalation headers (no payload, no secrets)
   * @throws IllegalStateException if the record is not outstanding (not returned by poll,
   *     already acknowledged, or its stream ended — then it is redelivered anyway)
   */
  public void reject(ConsumerRecord<K, V> record, String reason) {
    delegate.decide(record, FailureClassifier.decision(HandleResult.Outcome.REJECT, reason, 0));
  }

  /**
   * Answers RETRY for one polled record instead of committing it: the sidecar delivers it again
   * later (attempt + 1), up to its retry bound, then escalates it. A later commit does not touch
   * it. Sent at once, not at the next commit.
   *
   * @param record a record returned by {@code poll} on this consumer and not yet acknowledged
   * @param retryAfter minimum wait before the next delivery; {@link Duration#ZERO} lets the
   *     sidecar choose
   * @throws IllegalStateException if the record is not outstanding (not returned by poll,
   *     already acknowledged, or its stream ended — then it is redelivered anyway)
   */
  public void retry(ConsumerRecord<K, V> record, Duration retryAfter) {
    if (retryAfter == null || retryAfter.isNegative()) {
      throw new IllegalArgumentException("retryAfter must be zero or positive: " + retryAfter);
    }
    delegate.decide(
        record, FailureClassifier.decision(HandleResult.Outcome.RETRY, "retry requested by the consumer", retryAfter.toMillis()));
  }

  /**
   * Sets the listener told about each record of the route that the sidecar escalated (or removes
   * it, with {@code null}); replaces {@value OnceGuardConsumerConfig#ESCALATION_LISTENER_CONFIG}.
   * Call it before {@code subscribe}: the subscription asks the sidecar for the notices.
   *
   * @param listener called on the consumer thread, inside {@code poll}
   */
  public void setEscalationListener(EscalationListener listener) {
    delegate.setEscalationListener(listener);
  }

  // ---------------------------------------------------------------------------------------------
  // Subscription
  // ---------------------------------------------------------------------------------------------

  /**
   * The partitions the current stream has delivered records of; empty before the first record
   * and after the stream ends.
   */
  @Override
  public Set<TopicPartition> assignment() {
    return delegate.assignment();
  }

  /**
   * The subscribed topics; for a pattern subscription, the delivered topics that match it.
   */
  @Override
  public Set<String> subscription() {
    return delegate.subscription();
  }

  /**
   * Records the topics this code expects and opens the stream to the route if none is open.
   * An empty collection unsubscribes. See the class documentation for the topic rule.
   *
   * @param topics topics the route delivers
   */
  @Override
  public void subscribe(Collection<String> topics) {
    delegate.subscribe(topics, noListener());
  }

  /**
   * Like {@link #subscribe(Collection)}, with a listener for the stream's partitions: assigned
   * as they are first delivered, revoked on close/unsubscribe, lost when the stream broke.
   *
   * @param topics topics the route delivers
   * @param listener called on the consumer thread, inside poll, close and unsubscribe
   */
  @Override
  public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) {
    delegate.subscribe(topics, listener);
  }

  /**
   * Like {@link #subscribe(Collection)}, with a {@link Pattern} (full match) instead of names.
   *
   * @param pattern pattern every delivered topic must match
   */
  @Override
  public void subscribe(Pattern pattern) {
    delegate.subscribe(pattern, noListener());
  }

  /**
   * Like {@link #subscribe(Collection, ConsumerRebalanceListener)}, with a {@link Pattern}.
   *
   * @param pattern pattern every delivered topic must match
   * @param listener called on the consumer thread, inside poll, close and unsubscribe
   */
  @Override
  public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) {
    delegate.subscribe(pattern, listener);
  }

  /**
   * Not supported: the broker evaluates a {@link SubscriptionPattern} (RE2J) in the consumer
   * group protocol, and here the sidecar's route decides the topics.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public void subscribe(SubscriptionPattern pattern) {
    throw subscriptionPatternUnsupported();
  }

  /**
   * Not supported; see {@link #subscribe(SubscriptionPattern)}.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public void subscribe(SubscriptionPattern pattern, ConsumerRebalanceListener callback) {
    throw subscriptionPatternUnsupported();
  }

  /**
   * Not supported for a non-empty collection: the sidecar's route owns the consumer group and
   * the partition assignment. An empty collection unsubscribes, as in Kafka.
   *
   * @throws UnsupportedOperationException for a non-empty collection
   */
  @Override
  public void assign(Collection<TopicPartition> partitions) {
    if (partitions == null) {
      throw new IllegalArgumentException("Topic partition collection to assign to cannot be null");
    }
    if (!partitions.isEmpty()) {
      throw new UnsupportedOperationException(ASSIGNMENT_OWNED);
    }
    delegate.unsubscribe();
  }

  /**
   * Ends the stream: the listener hears {@code onPartitionsRevoked}, auto-commit (if enabled)
   * acknowledges what polls returned, then the stream is half-closed and the sidecar redelivers
   * whatever is still unacknowledged. Waits up to 30 s for the sidecar to end the stream. The
   * consumer may subscribe again.
   */
  @Override
  public void unsubscribe() {
    delegate.unsubscribe();
  }

  // ---------------------------------------------------------------------------------------------
  // Poll and commit
  // ---------------------------------------------------------------------------------------------

  /**
   * Returns the deliveries received so far (up to {@code max.poll.records}), waiting up to
   * {@code timeout} for the first one; with auto-commit, first commits what earlier polls
   * returned. Reopens the stream if it ended.
   *
   * @param timeout maximum time to block; zero returns what is buffered
   * @return records, grouped by partition, each partition sorted by offset; {@code nextOffsets}
   *     (kafka-clients 4.0 and later) holds each partition's highest offset + 1. A record counts as
   *     polled, and a commit acknowledges it, only once poll has returned it: if poll throws,
   *     none of the batch it was building is acknowledged by a later commit
   * @throws org.apache.kafka.common.errors.WakeupException if {@link #wakeup()} was called
   * @throws org.apache.kafka.common.errors.InterruptException if the thread was interrupted
   * @throws org.apache.kafka.common.KafkaException if a record's topic is outside the
   *     subscription, or the sidecar refused the subscription for good (unknown route, ...)
   * @throws IllegalStateException if not subscribed, or closed
   */
  @Override
  public ConsumerRecords<K, V> poll(Duration timeout) {
    return delegate.poll(timeout);
  }

  /**
   * Same as {@link #poll(Duration)} with this many milliseconds. {@code Consumer} declares it up
   * to kafka-clients 3.x (deprecated there, removed in 4.0); it is here so that code calling it
   * through the 3.x interface gets records rather than an {@code AbstractMethodError}.
   *
   * @param timeoutMs maximum time to block, in milliseconds
   * @return see {@link #poll(Duration)}
   * @deprecated as in kafka-clients 3.x: use {@link #poll(Duration)}
   */
  @Deprecated
  public ConsumerRecords<K, V> poll(long timeoutMs) {
    if (timeoutMs < 0) {
      throw new IllegalArgumentException("Timeout must not be negative");
    }
    return delegate.poll(Duration.ofMillis(timeoutMs));
  }

  /**
   * Acknowledges OK every record returned by previous polls and not yet acknowledged.
   *
   * @throws CommitFailedException if the stream ended before; those records are redelivered
   * @throws org.apache.kafka.common.errors.WakeupException if {@link #wakeup()} was called
   */
  @Override
  public void commitSync() {
    delegate.commitSync();
  }

  /**
   * Same as {@link #commitSync()}; acknowledgements do not wait on the network, so the timeout
   * is not needed.
   *
   * @param timeout ignored
   */
  @Override
  public void commitSync(Duration timeout) {
    delegate.commitSync();
  }

  /**
   * Acknowledges OK, for each given partition, the polled records with an offset below the
   * given one (Kafka's "next offset to consume"). Partitions not given, and records not yet
   * returned by poll, are untouched.
   *
   * @param offsets next offset to consume, per partition
   * @throws CommitFailedException if the stream ended before; those records are redelivered
   * @throws org.apache.kafka.common.errors.WakeupException if {@link #wakeup()} was called
   */
  @Override
  public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
    delegate.commitSync(offsets);
  }

  /**
   * Same as {@link #commitSync(Map)}; the timeout is not needed.
   *
   * @param offsets next offset to consume, per partition
   * @param timeout ignored
   */
  @Override
  public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
    delegate.commitSync(offsets);
  }

  /** Like {@link #commitSync()}; a failure is logged at the next poll instead of thrown. */
  @Override
  public void commitAsync() {
    delegate.commitAsync(null);
  }

  /**
   * Like {@link #commitSync()}; the outcome goes to {@code callback}, which runs on the
   * consumer thread in a later poll, commit or close, as in Kafka.
   *
   * @param callback receives the committed next offsets and a {@link CommitFailedException} or
   *     {@code null}
   */
  @Override
  public void commitAsync(OffsetCommitCallback callback) {
    delegate.commitAsync(callback);
  }

  /**
   * Like {@link #commitSync(Map)}; the outcome goes to {@code callback}, which runs on the
   * consumer thread in a later poll, commit or close, as in Kafka.
   *
   * @param offsets next offset to consume, per partition
   * @param callback receives {@code offsets} and a {@link CommitFailedException} or {@code null}
   */
  @Override
  public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
    delegate.commitAsync(offsets, callback);
  }

  // ---------------------------------------------------------------------------------------------
  // Offsets and metadata: owned by the sidecar or by the brokers
  // ---------------------------------------------------------------------------------------------

  /**
   * Returns again, from the next poll on, the records of {@code partition} at or after
   * {@code offset} that poll returned and that are not acknowledged yet — what an error handler
   * that seeks back to a failed record (Spring Kafka's {@code DefaultErrorHandler}) needs. Records
   * already acknowledged are final and never returned again. Seeking to the current position is
   * a no-op.
   *
   * @param partition a partition in {@link #assignment()}
   * @param offset the offset to consume next
   * @throws IllegalStateException if the partition is not assigned
   * @throws UnsupportedOperationException for any other move (forward, or back to acknowledged
   *     records): the sidecar owns the offsets
   */
  @Override
  public void seek(TopicPartition partition, long offset) {
    delegate.seek(partition, offset, SEEK_UNSUPPORTED);
  }

  /**
   * Same as {@link #seek(TopicPartition, long)}; the metadata is ignored.
   *
   * @param partition a partition in {@link #assignment()}
   * @param offsetAndMetadata the offset to consume next
   */
  @Override
  public void seek(TopicPartition partition, OffsetAndMetadata offsetAndMetadata) {
    if (offsetAndMetadata == null) {
      throw new IllegalArgumentException("offsetAndMetadata must not be null");
    }
    delegate.seek(partition, offsetAndMetadata.offset(), SEEK_UNSUPPORTED);
  }

  /**
   * Not supported: the sidecar owns the offsets.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public void seekToBeginning(Collection<TopicPartition> partitions) {
    throw new UnsupportedOperationException("seekToBeginning" + OFFSETS_OWNED);
  }

  /**
   * Not supported: the sidecar owns the offsets.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public void seekToEnd(Collection<TopicPartition> partitions) {
    throw new UnsupportedOperationException("seekToEnd" + OFFSETS_OWNED);
  }

  /**
   * The offset after the highest record of {@code partition} that poll returned (what
   * {@code KafkaConsumer} calls the fetch position); before the first, the lowest offset received
   * for it. Records of other entities of the partition may still arrive below it: the sidecar
   * processes entities concurrently.
   *
   * @param partition a partition in {@link #assignment()}
   * @return the position
   * @throws IllegalStateException if the partition is not assigned (its stream ended, or no
   *     record of it was delivered yet)
   */
  @Override
  public long position(TopicPartition partition) {
    return delegate.position(partition);
  }

  /**
   * Same as {@link #position(TopicPartition)}; answered locally, the timeout is not needed.
   *
   * @param partition a partition in {@link #assignment()}
   * @param timeout ignored
   * @return the position
   */
  @Override
  public long position(TopicPartition partition, Duration timeout) {
    return delegate.position(partition);
  }

  /**
   * Per partition, the offset after the highest record this consumer acknowledged OK (committed)
   * to the sidecar, or {@code null} if it acknowledged none: what this consumer committed. The
   * sidecar's own consumer group commits the Kafka offset later, once the records before it have
   * a verdict too; read that group with the Kafka Admin API when the broker's view is needed.
   *
   * @param partitions partitions to look up
   * @return a map with an entry per partition, {@code null} for those without an acknowledgement
   */
  @Override
  public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions) {
    return delegate.committed(partitions);
  }

  /**
   * Same as {@link #committed(Set)}; answered locally, the timeout is not needed.
   *
   * @param partitions partitions to look up
   * @param timeout ignored
   * @return see {@link #committed(Set)}
   */
  @Override
  public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions, Duration timeout) {
    return delegate.committed(partitions);
  }

  /**
   * Same as {@link #committed(Set)} for one partition. {@code Consumer} declares it up to
   * kafka-clients 3.x; it is here so that code calling it through the 3.x interface gets an
   * answer rather than an {@code AbstractMethodError}.
   *
   * @param partition partition to look up
   * @return the committed offset, or {@code null}
   * @deprecated as in kafka-clients 3.x: use {@link #committed(Set)}
   */
  @Deprecated
  public OffsetAndMetadata committed(TopicPartition partition) {
    return delegate.committed(Set.of(partition)).get(partition);
  }

  /**
   * Same as {@link #committed(TopicPartition)}.
   *
   * @param partition partition to look up
   * @param timeout ignored
   * @return the committed offset, or {@code null}
   * @deprecated as in kafka-clients 3.x: use {@link #committed(Set, Duration)}
   */
  @Deprecated
  public OffsetAndMetadata committed(TopicPartition partition, Duration timeout) {
    return committed(partition);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public List<PartitionInfo> partitionsFor(String topic) {
    throw new UnsupportedOperationException("partitionsFor" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public List<PartitionInfo> partitionsFor(String topic, Duration timeout) {
    throw new UnsupportedOperationException("partitionsFor" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<String, List<PartitionInfo>> listTopics() {
    throw new UnsupportedOperationException("listTopics" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<String, List<PartitionInfo>> listTopics(Duration timeout) {
    throw new UnsupportedOperationException("listTopics" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> timestampsToSearch) {
    throw new UnsupportedOperationException("offsetsForTimes" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(
      Map<TopicPartition, Long> timestampsToSearch, Duration timeout) {
    throw new UnsupportedOperationException("offsetsForTimes" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions) {
    throw new UnsupportedOperationException("beginningOffsets" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions, Duration timeout) {
    throw new UnsupportedOperationException("beginningOffsets" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
    throw new UnsupportedOperationException("endOffsets" + NO_BROKER);
  }

  /**
   * Not supported: no connection to the brokers.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions, Duration timeout) {
    throw new UnsupportedOperationException("endOffsets" + NO_BROKER);
  }

  /**
   * Always empty: the lag is known to the sidecar's consumer, not here. {@code KafkaConsumer}
   * answers the same when it has not fetched the partition.
   */
  @Override
  public OptionalLong currentLag(TopicPartition topicPartition) {
    delegate.ensureOpen();
    return OptionalLong.empty();
  }

  /**
   * Not supported: transactional offset commits ({@code Producer.sendOffsetsToTransaction})
   * need the group that owns the offsets, which is the sidecar's; the sidecar's ledger, not a
   * Kafka transaction, makes processing effectively once here.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public ConsumerGroupMetadata groupMetadata() {
    throw new UnsupportedOperationException(
        "groupMetadata is not supported by OnceGuardConsumer: transactional offset commits"
            + " (Producer.sendOffsetsToTransaction) need the group that owns the offsets, and that group is the"
            + " sidecar's. The sidecar's ledger, not a Kafka transaction, makes processing effectively once.");
  }

  /**
   * Not supported: a client instance id is assigned by a broker for client telemetry (KIP-714),
   * and this consumer talks to the sidecar only.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Uuid clientInstanceId(Duration timeout) {
    throw new UnsupportedOperationException(
        "clientInstanceId is not supported by OnceGuardConsumer: a broker assigns it for client telemetry"
            + " (KIP-714), and this consumer talks to the sidecar only.");
  }

  /**
   * The client's own counters, group {@value ConsumerMetrics#GROUP}, tags {@code client-id} and
   * {@code route}: {@code records-polled-total}, {@code records-acknowledged-total},
   * {@code records-rejected-total}, {@code records-retried-total}, {@code records-refused-total}
   * (undeserializable), {@code records-in-flight} (polled, not acknowledged),
   * {@code sidecar-reconnects-total}, {@code sidecar-connected}, {@code escalation-notices-total}.
   * Values are live. Like {@code KafkaConsumer.metrics()}, any thread may call it (a metrics
   * reporter, Micrometer's {@code KafkaClientMetrics}), also after close.
   */
  @Override
  public Map<MetricName, ? extends Metric> metrics() {
    return delegate.metrics().metrics();
  }

  /** No-op: there is no broker to push client telemetry to (as with telemetry disabled). */
  @Override
  public void registerMetricForSubscription(KafkaMetric metric) {
    delegate.ensureOpen();
  }

  /** No-op: there is no broker to push client telemetry to (as with telemetry disabled). */
  @Override
  public void unregisterMetricFromSubscription(KafkaMetric metric) {
    delegate.ensureOpen();
  }

  /**
   * No-op: there is no consumer group on this side; the sidecar's group rebalances on its own.
   * Kafka also treats the call as a request it may skip.
   */
  @Override
  public void enforceRebalance() {
    delegate.ensureOpen();
  }

  /**
   * No-op; see {@link #enforceRebalance()}.
   *
   * @param reason ignored
   */
  @Override
  public void enforceRebalance(String reason) {
    delegate.ensureOpen();
  }

  // ---------------------------------------------------------------------------------------------
  // Flow control, wakeup, close
  // ---------------------------------------------------------------------------------------------

  /** The partitions paused with {@link #pause}. */
  @Override
  public Set<TopicPartition> paused() {
    return delegate.paused();
  }

  /**
   * Stops returning records of these partitions. Local: records of them that arrive are held,
   * keeping their window slots, so a long pause also slows other partitions down once the
   * window is full. Unlike Kafka, a partition need not be in {@link #assignment()} yet.
   *
   * @param partitions partitions to pause
   */
  @Override
  public void pause(Collection<TopicPartition> partitions) {
    delegate.pause(partitions);
  }

  /**
   * Returns records of these partitions again, held ones first.
   *
   * @param partitions partitions to resume
   */
  @Override
  public void resume(Collection<TopicPartition> partitions) {
    delegate.resume(partitions);
  }

  /**
   * Makes a {@code poll} or {@code commitSync} that is blocked now, or the next one, throw
   * {@link org.apache.kafka.common.errors.WakeupException}. The only method any thread may
   * call.
   */
  @Override
  public void wakeup() {
    delegate.wakeup();
  }

  /** Same as {@link #close(CloseOptions)} with a 30 s timeout, Kafka's default. */
  @Override
  public void close() {
    delegate.close(PullConsumer.DEFAULT_CLOSE_TIMEOUT);
  }

  /**
   * Same as {@link #close(CloseOptions)} with this timeout.
   *
   * @param timeout how long to wait for the sidecar to end the stream
   * @deprecated as in {@link Consumer#close(Duration)}: use {@link #close(CloseOptions)} with
   *     {@link CloseOptions#timeout(Duration)}
   */
  @Deprecated
  @Override
  public void close(Duration timeout) {
    delegate.close(timeout);
  }

  /**
   * Ends the stream and releases everything: the listener hears {@code onPartitionsRevoked},
   * auto-commit (if enabled) acknowledges what polls returned, pending commit callbacks run,
   * the stream is half-closed and, once the sidecar ended it or the timeout (30 s if none)
   * passed, cancelled; then the deserializers are closed and an owned channel shut down.
   * Whatever is still unacknowledged is redelivered by the sidecar. Idempotent. The group
   * membership operation does not apply: the sidecar's group is not this consumer's.
   *
   * @param option close options
   */
  @Override
  public void close(CloseOptions option) {
    delegate.close(option == null ? PullConsumer.DEFAULT_CLOSE_TIMEOUT : option.timeout().orElse(PullConsumer.DEFAULT_CLOSE_TIMEOUT));
  }

  private static ConsumerRebalanceListener noListener() {
    return new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
    };
  }

  private static UnsupportedOperationException subscriptionPatternUnsupported() {
    return new UnsupportedOperationException(
        "subscribe(SubscriptionPattern) is not supported by OnceGuardConsumer: the broker evaluates that RE2J"
            + " pattern in the consumer group protocol, and here the sidecar's route decides the topics. Use"
            + " subscribe(Collection) or subscribe(Pattern).");
  }

}
