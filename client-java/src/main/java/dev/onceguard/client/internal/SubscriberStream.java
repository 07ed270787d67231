package dev.onceguard.client.internal;

import dev.onceguard.v1.Ack;
import dev.onceguard.v1.DeliveriesGrpc;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.SubscribeRequest;
import dev.onceguard.v1.Subscription;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * One {@code Deliveries.Subscribe} call. gRPC threads only enqueue {@link StreamEvent}s; every
 * other method is called by the consumer thread only (a gRPC request stream is not
 * thread-safe).
 */
final class SubscriberStream implements ClientResponseObserver<SubscribeRequest, Delivery> {
  private final BlockingQueue<StreamEvent> events;
  private final CountDownLatch ended = new CountDownLatch(1);
  private volatile ClientCallStreamObserver<SubscribeRequest> requests;
  private volatile boolean readySignalled; // onReady runs serialized on gRPC's executor

  private SubscriberStream(BlockingQueue<StreamEvent> events) {
    this.events = events;
  }

  /**
   * Starts the call and sends the subscription. Never blocks; a failure to connect arrives as an
   * {@link StreamEvent.Ended} event.
   */
  static SubscriberStream open(Channel channel, Subscription subscription, BlockingQueue<StreamEvent> events) {
    SubscriberStream stream = new SubscriberStream(events);
    DeliveriesGrpc.newStub(channel).subscribe(stream);
    stream.requests.onNext(SubscribeRequest.newBuilder().setSubscription(subscription).build());
    return stream;
  }

  @Override
  public void beforeStart(ClientCallStreamObserver<SubscribeRequest> requestStream) {
    this.requests = requestStream;
    // the first onReady: the call reached a connected transport
    requestStream.setOnReadyHandler(() -> {
      if (!readySignalled) {
        readySignalled = true;
        events.add(new StreamEvent.Ready(this));
      }
    });
  }

  @Override
  public void onNext(Delivery delivery) {
    events.add(new StreamEvent.Received(this, delivery));
  }

  @Override
  public void onError(Throwable t) {
    end(Status.fromThrowable(t));
  }

  @Override
  public void onCompleted() {
    end(Status.OK);
  }

  private void end(Status status) {
    ended.countDown();
    events.add(new StreamEvent.Ended(this, status));
  }

  /** Whether the call is over (the consumer thread may not have seen the event yet). */
  boolean isEnded() {
    return ended.getCount() == 0;
  }

  /** Sends one acknowledgement. Fire-and-forget: the contract has no reply to an Ack. */
  void ack(String deliveryId, HandleResult result) {
    requests.onNext(
        SubscribeRequest.newBuilder()
            .setAck(Ack.newBuilder().setDeliveryId(deliveryId).setResult(result))
            .build());
  }

  /**
   * Ends the subscription politely: half-closing keeps the acknowledgements already sent ahead
   * of the end, whereas a cancel may drop them. The sidecar then completes the call.
   */
  void halfClose() {
    requests.onCompleted();
  }

  /** Ends the call at once; acknowledgements not yet on the wire may be lost. */
  void cancel(String reason) {
    requests.cancel(reason, null);
  }

  /** Waits for the call to end; true if it did within the timeout. */
  boolean awaitEnd(long timeoutNanos) throws InterruptedException {
    return ended.await(Math.max(0, timeoutNanos), TimeUnit.NANOSECONDS);
  }
}
