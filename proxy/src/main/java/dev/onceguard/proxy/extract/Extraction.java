package dev.onceguard.proxy.extract;

import dev.onceguard.v1.Reason;

/** The result of reading a record: an event, or the reason it cannot be read. */
public sealed interface Extraction {

  record Ok(ExtractedEvent event) implements Extraction {}

  /**
   * @param reason {@link Reason#MALFORMED}, {@link Reason#MISSING_FIELD} or {@link Reason#UNKNOWN_EVENT}
   * @param detail names the field or the problem; never contains the payload
   * @param entityId the entity id if it could be read, else {@code null}
   * @param event the event name if it could be read, else {@code null}
   */
  record Failed(Reason reason, String detail, String entityId, String event) implements Extraction {}
}
