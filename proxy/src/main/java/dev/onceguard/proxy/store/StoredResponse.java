package dev.onceguard.proxy.store;

/**
 * A response a Guard API caller stored with its confirm, kept in the DONE ledger row and handed to
 * every later Submit of the same fact, so a service in front of the sidecar can answer a retried
 * request exactly as the first time.
 *
 * @param body the response bytes (the route's {@code response-max-bytes} at most)
 * @param contentType media type of {@code body}; may be empty
 * @param completedAtMillis when the row was confirmed (the confirming sidecar's clock); 0 when
 *     the response is a command to store, not a row read
 */
public record StoredResponse(byte[] body, String contentType, long completedAtMillis) {
  /** Longest content type the ledger column holds. */
  public static final int MAX_CONTENT_TYPE_CHARS = 255;
}
