package dev.onceguard.client;

import static dev.onceguard.client.TestDeliveries.delivery;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.HandleResult.Outcome;
import dev.onceguard.v1.MessageHandlerGrpc;
import dev.onceguard.wire.Headers;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.errors.NotLeaderOrFollowerException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/** The adapter is called through a real in-process gRPC channel, as the sidecar calls it. */
class MessageHandlerAdapterTest {
  private static final Delivery DELIVERY = delivery("d1", 2, 10, "o-1", "{\"order\":1}");

  private static HandleResult call(MessageHandlerAdapter<String, String> adapter, Delivery delivery) {
    try (InProcess grpc = new InProcess(adapter)) {
      return MessageHandlerGrpc.newBlockingStub(grpc.channel).handle(delivery);
    }
  }

  private static HandleResult callThrowing(Exception failure) {
    return call(MessageHandlerAdapter.<String, String>builder(
            new StringDeserializer(), new StringDeserializer(), (record, info) -> { throw failure; })
        .build(), DELIVERY);
  }

  @Test
  void handle_normalReturn_answersOkAndPassesRecordAndDeliveryInfo() {
    List<ConsumerRecord<String, String>> records = new ArrayList<>();
    List<DeliveryInfo> infos = new ArrayList<>();
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter.<String, String>builder(
            new StringDeserializer(), new StringDeserializer(), (record, info) -> {
              records.add(record);
              infos.add(info);
            })
        .build();

    HandleResult result = call(adapter, DELIVERY);

    assertThat(result.getOutcome()).isEqualTo(Outcome.OK);
    assertThat(records).singleElement().satisfies(r -> {
      assertThat(r.topic()).isEqualTo(TestDeliveries.TOPIC);
      assertThat(r.partition()).isEqualTo(2);
      assertThat(r.offset()).isEqualTo(10);
      assertThat(r.key()).isEqualTo("o-1");
      assertThat(r.value()).isEqualTo("{\"order\":1}");
      assertThat(new String(r.headers().lastHeader(Headers.DEDUP_KEY).value(), StandardCharsets.UTF_8))
          .isEqualTo("dk-d1");
    });
    assertThat(infos).singleElement().satisfies(i -> {
      assertThat(i.dedupKey()).isEqualTo("dk-d1");
      assertThat(i.entityId()).isEqualTo("order-o-1");
      assertThat(i.fromState()).isEqualTo("packed");
      assertThat(i.toState()).isEqualTo("shipped");
      assertThat(i.attempt()).isEqualTo(1);
      assertThat(i.redelivery()).isFalse();
    });
  }

  @Test
  void handle_rejectException_answersRejectWithItsMessage() {
    HandleResult result = callThrowing(new RejectException("sku discontinued"));

    assertThat(result.getOutcome()).isEqualTo(Outcome.REJECT);
    assertThat(result.getMessage()).isEqualTo("sku discontinued");
  }

  @Test
  void handle_retryableException_answersRetryWithItsDelay() {
    HandleResult result = callThrowing(new RetryableException("warehouse API busy", null, Duration.ofMillis(1500)));

    assertThat(result.getOutcome()).isEqualTo(Outcome.RETRY);
    assertThat(result.getRetryAfterMs()).isEqualTo(1500);
    assertThat(result.getMessage()).isEqualTo("warehouse API busy");
  }

  @Test
  void handle_kafkaRetriableException_answersRetry() {
    assertThat(callThrowing(new NotLeaderOrFollowerException("moved")).getOutcome()).isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_ioException_answersRetry() {
    assertThat(callThrowing(new IOException("connection reset")).getOutcome()).isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_ioExceptionAsCause_answersRetry() {
    assertThat(callThrowing(new UncheckedIOException(new IOException("reset"))).getOutcome())
        .isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_timeoutException_answersRetry() {
    assertThat(callThrowing(new TimeoutException("db pool")).getOutcome()).isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_retriableOnceGuardException_answersRetry() {
    EntityBusyException busy = new EntityBusyException(Status.ABORTED.withDescription("busy").asRuntimeException());

    assertThat(callThrowing(busy).getOutcome()).isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_serializationExceptionFromHandler_answersReject() {
    assertThat(callThrowing(new SerializationException("bad avro")).getOutcome()).isEqualTo(Outcome.REJECT);
  }

  @Test
  void handle_valueThatDoesNotDeserialize_answersRejectWithoutCallingTheHandler() {
    List<String> handled = new ArrayList<>();
    Deserializer<String> strict = (topic, data) -> {
      throw new SerializationException("not JSON");
    };
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter.<String, String>builder(
            new StringDeserializer(), strict, (record, info) -> handled.add(record.value()))
        .build();

    HandleResult result = call(adapter, DELIVERY);

    assertThat(result.getOutcome()).isEqualTo(Outcome.REJECT);
    assertThat(result.getMessage()).contains("SerializationException").contains("not JSON");
    assertThat(handled).isEmpty();
  }

  @Test
  void handle_serializationExceptionCausedByIo_answersRetry() {
    // e.g. a schema registry that is down: transient, although wrapped as a SerializationException
    SerializationException registryDown = new SerializationException("Error retrieving schema", new IOException("refused"));

    assertThat(callThrowing(registryDown).getOutcome()).isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_otherRuntimeException_answersRetryByDefault() {
    HandleResult result = callThrowing(new IllegalStateException("bug"));

    assertThat(result.getOutcome()).isEqualTo(Outcome.RETRY);
    assertThat(result.getMessage()).isEqualTo("java.lang.IllegalStateException: bug");
  }

  @Test
  void handle_otherRuntimeException_answersRejectWhenConfigured() {
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter.<String, String>builder(
            new StringDeserializer(), new StringDeserializer(), (record, info) -> {
              throw new IllegalStateException("bug");
            })
        .unclassifiedFailures(FailureOutcome.REJECT)
        .build();

    assertThat(call(adapter, DELIVERY).getOutcome()).isEqualTo(Outcome.REJECT);
  }

  @Test
  void handle_explicitRetryStillWins_whenUnclassifiedFailuresAreRejected() {
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter.<String, String>builder(
            new StringDeserializer(), new StringDeserializer(), (record, info) -> {
              throw new IOException("reset");
            })
        .unclassifiedFailures(FailureOutcome.REJECT)
        .build();

    assertThat(call(adapter, DELIVERY).getOutcome()).isEqualTo(Outcome.RETRY);
  }

  @Test
  void handle_longMessage_isTruncatedForHeaders() {
    HandleResult result = callThrowing(new RejectException("x".repeat(5000)));

    assertThat(result.getMessage()).hasSize(1024);
  }

  @Test
  void handle_errorIsNotCaught_andTheCallFails() {
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter.<String, String>builder(
            new StringDeserializer(), new StringDeserializer(), (record, info) -> {
              throw new AssertionError("boom");
            })
        .build();

    try (InProcess grpc = new InProcess(adapter)) {
      StatusRuntimeException e = org.assertj.core.api.Assertions.catchThrowableOfType(
          StatusRuntimeException.class, () -> MessageHandlerGrpc.newBlockingStub(grpc.channel).handle(DELIVERY));
      // the sidecar retries any status other than the reject ones
      assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNKNOWN);
    }
  }
}
