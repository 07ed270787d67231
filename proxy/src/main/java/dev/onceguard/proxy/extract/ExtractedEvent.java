package dev.onceguard.proxy.extract;

/**
 * What the guard needs to know about one record, read by an {@link Extractor}.
 *
 * @param entityId entity the event applies to; {@code null} on a route without a machine
 * @param event event name (an event of the route's machine); {@code null} without a machine
 * @param dedupKey lower-case hex SHA-256 of the canonical business key
 * @param businessKey readable business key, {@code name=value} pairs joined by {@code ", "}
 * @param fingerprint lower-case hex SHA-256 of the record's content (volatile fields excluded)
 * @param fields the fingerprinted content field by field, kept as digests with the ledger row
 *     ({@link FieldDigests#NONE} when the route keeps none)
 * @param payload the record's value, kept with the ledger row (route {@code store-payload: full},
 *     value within {@code store-payload-max-bytes}); {@code null} otherwise. Not copied: never modify
 * @param payloadSize the value's size in bytes when the route keeps payloads; -1 when it does not
 */
public record ExtractedEvent(String entityId, String event, String dedupKey, String businessKey, String fingerprint,
    FieldDigests fields, byte[] payload, int payloadSize) {

  /** An event that keeps nothing of its content beside the fingerprint. */
  public ExtractedEvent(String entityId, String event, String dedupKey, String businessKey, String fingerprint) {
    this(entityId, event, dedupKey, businessKey, fingerprint, FieldDigests.NONE, null, -1);
  }
}
