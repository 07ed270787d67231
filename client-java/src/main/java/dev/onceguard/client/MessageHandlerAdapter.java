package dev.onceguard.client;

import dev.onceguard.client.internal.FailureClassifier;
import dev.onceguard.client.internal.RecordConverter;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.BindableService;
import io.grpc.Context;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Serves the push-mode {@code MessageHandler} service from a {@link RecordHandler}: each
 * {@code Handle(Delivery)} call becomes one {@link ConsumerRecord} (deserialized, with the Kafka
 * headers and the delivery headers of {@link dev.onceguard.wire.Headers}) passed to the handler.
 *
 * <pre>{@code
 * MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter
 *     .builder(new StringDeserializer(), new StringDeserializer(), (record, info) -> ship(record.value()))
 *     .build();
 * Server server = Grpc.newServerBuilderForPort(50052, InsecureServerCredentials.create())
 *     .addService(adapter)
 *     .build()
 *     .start();
 * }</pre>
 *
 * <h2>Results</h2>
 *
 * A normal return answers OK: the sidecar confirms the record. A thrown exception answers RETRY
 * or REJECT; the first matching rule wins:
 *
 * <ol>
 *   <li>{@link RejectException}: REJECT — the handler says the record can never be applied;
 *   <li>{@link RetryableException}: RETRY, with its {@code retryAfter};
 *   <li>a Kafka {@link org.apache.kafka.common.errors.RetriableException}, an
 *       {@link java.io.IOException}, a {@link java.util.concurrent.TimeoutException}, an
 *       {@link InterruptedException}, or a retriable {@link OnceGuardException}, thrown or
 *       anywhere in the cause chain: RETRY — the trouble is in the environment, not in the
 *       record;
 *   <li>a {@link org.apache.kafka.common.errors.SerializationException} (including a
 *       deserializer's failure before the handler runs), thrown or in the cause chain: REJECT —
 *       retrying cannot change the bytes. Rule 3 comes first because deserializers wrap
 *       transient trouble, such as a schema registry that is down, in a
 *       {@code SerializationException};
 *   <li>anything else: RETRY by default, or REJECT if {@link Builder#unclassifiedFailures} says
 *       so. RETRY is the default because the sidecar bounds retries and then escalates anyway:
 *       an unexpected bug stalls one entity up to that bound instead of rolling its state back
 *       at once, and a transient failure this rule does not recognise heals by itself.
 * </ol>
 *
 * <p>The answer's message is the exception's message (with its type, except for the two
 * exceptions above); on REJECT it is copied into the escalation headers, so exception messages
 * must not carry payload or secrets. {@link Error}s are not caught: gRPC fails the call, which
 * the sidecar retries. A call whose deadline already passed is not handed to the handler.
 *
 * <h2>Threading</h2>
 *
 * gRPC calls {@code Handle} concurrently on its server executor, so the handler and both
 * deserializers must be thread-safe (Kafka's own deserializers are). The sidecar sends one
 * record at a time per entity. The adapter is immutable; it does not close the deserializers.
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class MessageHandlerAdapter<K, V> implements BindableService {
  private static final Logger log = LoggerFactory.getLogger(MessageHandlerAdapter.class);
  private static final HandleResult OK = HandleResult.newBuilder().setOutcome(HandleResult.Outcome.OK).build();

  private final RecordConverter<K, V> converter;
  private final RecordHandler<K, V> handler;
  private final FailureClassifier classifier;

  private MessageHandlerAdapter(Builder<K, V> builder) {
    this.converter = new RecordConverter<>(builder.keyDeserializer, builder.valueDeserializer);
    this.handler = builder.handler;
    this.classifier = new FailureClassifier(builder.unclassified);
  }

  /**
   * Starts building an adapter.
   *
   * @param keyDeserializer turns key bytes into K; used as is ({@code configure} is not called)
   * @param valueDeserializer turns value bytes into V; used as is
   * @param handler applies one record; must be thread-safe
   * @param <K> key type
   * @param <V> value type
   * @return a builder
   */
  public static <K, V> Builder<K, V> builder(
      Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer, RecordHandler<K, V> handler) {
    return new Builder<>(keyDeserializer, valueDeserializer, handler);
  }

  /**
   * The {@code MessageHandler} service definition, for {@code ServerBuilder.addService}. The
   * adapter itself is a {@link BindableService}, so it can be added directly as well.
   */
  @Override
  public ServerServiceDefinition bindService() {
    return MessageHandlerGrpc.bindService(new MessageHandlerGrpc.AsyncService() {
      @Override
      public void handle(Delivery delivery, StreamObserver<HandleResult> responses) {
        if (Context.current().isCancelled()) {
          // The sidecar gave up already (deadline); it retries, so don't apply the record now.
          responses.onError(Status.CANCELLED.withDescription("call cancelled before handling").asRuntimeException());
          return;
        }
        responses.onNext(apply(delivery));
        responses.onCompleted();
      }
    });
  }

  /**
   * Handles one delivery as a {@code Handle} call would, without gRPC: deserializes it, calls
   * the handler and maps the outcome. Useful to test a handler against the same rule.
   *
   * @param delivery a delivery
   * @return OK, or RETRY/REJECT with a message
   */
  public HandleResult apply(Delivery delivery) {
    try {
      ConsumerRecord<K, V> record = converter.toRecord(delivery);
      handler.handle(record, DeliveryInfo.of(delivery));
      return OK;
    } catch (Exception e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      HandleResult result = classifier.classify(e);
      log.warn(
          "route={} topic={} partition={} offset={} dedupKey={} attempt={}: handler failed, answering {}",
          delivery.getRoute(),
          delivery.getRecord().getTopic(),
          delivery.getRecord().getPartition(),
          delivery.getRecord().getOffset(),
          delivery.getDedupKey(),
          delivery.getAttempt(),
          result.getOutcome(),
          e);
      return result;
    }
  }

  /**
   * Builds a {@link MessageHandlerAdapter}.
   *
   * @param <K> key type
   * @param <V> value type
   */
  public static final class Builder<K, V> {
    private final Deserializer<K> keyDeserializer;
    private final Deserializer<V> valueDeserializer;
    private final RecordHandler<K, V> handler;
    private FailureOutcome unclassified = FailureOutcome.RETRY;

    private Builder(Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer, RecordHandler<K, V> handler) {
      if (keyDeserializer == null || valueDeserializer == null || handler == null) {
        throw new IllegalArgumentException("deserializers and handler must not be null");
      }
      this.keyDeserializer = keyDeserializer;
      this.valueDeserializer = valueDeserializer;
      this.handler = handler;
    }

    /**
     * What to answer for an exception no rule recognises. Default {@link FailureOutcome#RETRY}.
     *
     * @param outcome RETRY or REJECT
     * @return this builder
     */
    public Builder<K, V> unclassifiedFailures(FailureOutcome outcome) {
      if (outcome == null) {
        throw new IllegalArgumentException("outcome must not be null");
      }
      this.unclassified = outcome;
      return this;
    }

    /** {@return a new adapter} */
    public MessageHandlerAdapter<K, V> build() {
      return new MessageHandlerAdapter<>(this);
    }
  }
}
