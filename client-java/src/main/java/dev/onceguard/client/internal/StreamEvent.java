package dev.onceguard.client.internal;

import dev.onceguard.v1.Delivery;
import io.grpc.Status;

/**
 * What gRPC threads hand to the consumer thread. Events name their stream, so that events of a
 * stream the consumer already gave up on are recognised and dropped.
 */
sealed interface StreamEvent {
  /** A delivery arrived on {@code stream}. */
  record Received(SubscriberStream stream, Delivery delivery) implements StreamEvent {}

  /** {@code stream} ended; {@code status} is OK when the sidecar completed it. */
  record Ended(SubscriberStream stream, Status status) implements StreamEvent {}

  /** {@code stream} is connected to the sidecar (gRPC's onReady fired the first time). */
  record Ready(SubscriberStream stream) implements StreamEvent {}

  /** {@code wakeup()} was called; unblocks a waiting poll. */
  record Wakeup() implements StreamEvent {}

  /** The one wakeup event. */
  StreamEvent WAKEUP = new Wakeup();
}
