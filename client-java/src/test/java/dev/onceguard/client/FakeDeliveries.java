package dev.onceguard.client;

import dev.onceguard.v1.Ack;
import dev.onceguard.v1.DeliveriesGrpc;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.SubscribeRequest;
import dev.onceguard.v1.Subscription;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A Deliveries service that behaves like the sidecar's pull mode as the contract states it:
 * sends queued deliveries while fewer than {@code window} are unacknowledged, records every
 * Ack, completes the stream when the client half-closes, and requeues unacknowledged
 * deliveries (redelivery = true, new delivery id) when a stream ends.
 */
final class FakeDeliveries extends DeliveriesGrpc.DeliveriesImplBase {
  static final int ROUTE_DEFAULT_WINDOW = 100;

  private final Deque<Delivery> backlog = new ArrayDeque<>();
  private final List<Subscription> subscriptions = new ArrayList<>();
  private final List<Ack> acks = new ArrayList<>();
  private Stream current;
  private Status refuseWith;
  private int halfCloses;
  private int redeliveries;

  /** Queues deliveries; sends them to the current subscriber as the window allows. */
  synchronized void enqueue(Delivery... deliveries) {
    backlog.addAll(List.of(deliveries));
    if (current != null) {
      current.pump();
    }
  }

  /** Sends an escalation notice on the current stream, outside the window, as the sidecar does. */
  synchronized void sendNotice(Delivery notice) {
    current.responses.onNext(notice);
  }

  /** Makes the next subscriptions fail with this status (null: accept again). */
  synchronized void refuseSubscriptions(Status status) {
    this.refuseWith = status;
  }

  /** Fails the current stream as a sidecar crash or network failure would. */
  synchronized void failCurrentStream(Status status) {
    Stream s = current;
    s.end();
    s.responses.onError(status.asRuntimeException());
  }

  synchronized List<Ack> acks() {
    return List.copyOf(acks);
  }

  synchronized List<String> ackedIds() {
    return acks.stream().map(Ack::getDeliveryId).toList();
  }

  synchronized List<Subscription> subscriptions() {
    return List.copyOf(subscriptions);
  }

  synchronized int halfCloses() {
    return halfCloses;
  }

  synchronized boolean streamOpen() {
    return current != null;
  }

  synchronized int unacknowledged() {
    return current == null ? 0 : current.unacked.size();
  }

  @Override
  public StreamObserver<SubscribeRequest> subscribe(StreamObserver<Delivery> responses) {
    Stream stream = new Stream(responses);
    return new StreamObserver<>() {
      @Override
      public void onNext(SubscribeRequest request) {
        synchronized (FakeDeliveries.this) {
          if (request.hasSubscription()) {
            subscriptions.add(request.getSubscription());
            if (refuseWith != null) {
              responses.onError(refuseWith.asRuntimeException());
              return;
            }
            stream.window = request.getSubscription().getWindow() == 0
                ? ROUTE_DEFAULT_WINDOW
                : request.getSubscription().getWindow();
            current = stream;
            stream.pump();
          } else if (request.hasAck()) {
            acks.add(request.getAck());
            stream.unacked.remove(request.getAck().getDeliveryId());
            stream.pump();
          }
        }
      }

      @Override
      public void onError(Throwable t) {
        synchronized (FakeDeliveries.this) {
          stream.end();
        }
      }

      @Override
      public void onCompleted() {
        synchronized (FakeDeliveries.this) {
          halfCloses++;
          stream.end();
          responses.onCompleted();
        }
      }
    };
  }

  /** One Subscribe call; guarded by the enclosing instance. */
  private final class Stream {
    final StreamObserver<Delivery> responses;
    final Map<String, Delivery> unacked = new LinkedHashMap<>();
    int window;
    boolean ended;

    Stream(StreamObserver<Delivery> responses) {
      this.responses = responses;
    }

    void pump() {
      while (!ended && current == this && unacked.size() < window && !backlog.isEmpty()) {
        Delivery d = backlog.poll();
        unacked.put(d.getDeliveryId(), d);
        responses.onNext(d);
      }
    }

    void end() {
      if (ended) {
        return;
      }
      ended = true;
      if (current == this) {
        current = null;
      }
      // the contract: unacknowledged deliveries go to the next subscriber, flagged
      List<Delivery> again = new ArrayList<>();
      for (Delivery d : unacked.values()) {
        again.add(d.toBuilder()
            .setRedelivery(true)
            .setDeliveryId(d.getDeliveryId() + "-r" + (++redeliveries))
            .build());
      }
      unacked.clear();
      for (int i = again.size() - 1; i >= 0; i--) {
        backlog.addFirst(again.get(i));
      }
    }
  }
}
