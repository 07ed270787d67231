package dev.onceguard.compat;

import com.google.protobuf.ByteString;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.DeliveriesGrpc;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.KafkaRecord;
import dev.onceguard.v1.SubscribeRequest;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The smallest Deliveries service a consumer loop needs, served in process: each subscription
 * gets the deliveries queued so far (no window, no redelivery), every Ack is recorded, and a
 * half-close completes the call. What is under test is the kafka-clients binary compatibility
 * of the client, not the pull protocol (client-java's FakeDeliveries covers that).
 */
final class LoopbackSidecar extends DeliveriesGrpc.DeliveriesImplBase implements AutoCloseable {
  static final String ROUTE = "orders-shipping";
  static final String TOPIC = "orders";

  private final List<Delivery> queued = new ArrayList<>();
  private final List<Ack> acks = new ArrayList<>();
  private final Server server;
  final ManagedChannel channel;

  LoopbackSidecar() throws IOException {
    String name = InProcessServerBuilder.generateName();
    server = InProcessServerBuilder.forName(name).directExecutor().addService(this).build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  /** Queues a delivery of a string record on {@link #TOPIC}, sent to the next subscriber. */
  synchronized void queue(String id, int partition, long offset, String key, String value) {
    queued.add(Delivery.newBuilder()
        .setRecord(KafkaRecord.newBuilder()
            .setTopic(TOPIC)
            .setPartition(partition)
            .setOffset(offset)
            .setTimestampMs(1_700_000_000_000L + offset)
            .setKey(ByteString.copyFrom(key, StandardCharsets.UTF_8))
            .setValue(ByteString.copyFrom(value, StandardCharsets.UTF_8)))
        .setRoute(ROUTE)
        .setDedupKey("dk-" + id)
        .setAttempt(1)
        .setDeliveryId(id)
        .build());
  }

  synchronized List<Ack> acks() {
    return List.copyOf(acks);
  }

  @Override
  public StreamObserver<SubscribeRequest> subscribe(StreamObserver<Delivery> responses) {
    return new StreamObserver<>() {
      @Override
      public void onNext(SubscribeRequest request) {
        synchronized (LoopbackSidecar.this) {
          if (request.hasSubscription()) {
            queued.forEach(responses::onNext);
            queued.clear();
          } else if (request.hasAck()) {
            acks.add(request.getAck());
          }
        }
      }

      @Override
      public void onError(Throwable t) {}

      @Override
      public void onCompleted() {
        responses.onCompleted();
      }
    };
  }

  @Override
  public void close() throws InterruptedException {
    channel.shutdownNow();
    server.shutdownNow();
    channel.awaitTermination(5, TimeUnit.SECONDS);
    server.awaitTermination(5, TimeUnit.SECONDS);
  }
}
