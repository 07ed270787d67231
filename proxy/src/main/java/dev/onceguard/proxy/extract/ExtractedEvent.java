package dev.onceguard.proxy.extract;

/**
 * What the guard needs to know about one record, read by an {@link Extractor}.
 *
 * @param entityId entity the event applies to; {@code null} on a route without a machine
 * @param event event name (an event of the route's machine); {@code null} without a machine
 * @param dedupKey lower-case hex SHA-256 of the canonical business key
 * @param businessKey readable business key, {@code name=value} pairs joined by {@code ", "}
 * @param fingerprint lower-case hex SHA-256 of the record's content (volatile fields excluded)
 */
public record ExtractedEvent(String entityId, String event, String dedupKey, String businessKey, String fingerprint) {}
