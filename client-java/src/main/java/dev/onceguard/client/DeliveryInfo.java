package dev.onceguard.client;

import dev.onceguard.v1.Delivery;

/**
 * What the sidecar knows about one accepted record besides the record itself.
 *
 * @param route the route (configuration name) that consumed the record
 * @param entityId entity the record belongs to; empty for routes without a state machine
 * @param event event name in the route's state machine; empty without a machine
 * @param fromState state before this transition; empty for a creating event or no machine
 * @param toState state once this delivery is confirmed; empty without a machine
 * @param dedupKey lower-case hex SHA-256 of the canonical business key; stable across
 *     redeliveries, so the business can use it as its own idempotency key
 * @param businessKey readable business key, for logs and audit only
 * @param attempt 1 for the first call for this claim, incremented for every retry
 * @param redelivery true when the business may have seen this record before
 * @param deliveryId opaque id of this delivery, unique per sidecar run
 */
public record DeliveryInfo(
    String route,
    String entityId,
    String event,
    String fromState,
    String toState,
    String dedupKey,
    String businessKey,
    int attempt,
    boolean redelivery,
    String deliveryId) {

  /**
   * Reads the metadata of a delivery.
   *
   * @param delivery a delivery as received from the sidecar
   * @return its metadata
   */
  public static DeliveryInfo of(Delivery delivery) {
    return new DeliveryInfo(
        delivery.getRoute(),
        delivery.getEntityId(),
        delivery.getEvent(),
        delivery.getFromState(),
        delivery.getToState(),
        delivery.getDedupKey(),
        delivery.getBusinessKey(),
        delivery.getAttempt(),
        delivery.getRedelivery(),
        delivery.getDeliveryId());
  }
}
