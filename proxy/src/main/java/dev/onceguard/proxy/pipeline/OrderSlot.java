package dev.onceguard.proxy.pipeline;

/**
 * A started record's say in its ordering key's order (see {@link KeyOrderedScheduler}): while it
 * is parked, later records of its key may start within the route's reorder window, and it is
 * nudged whenever one of them finishes, since that may be the predecessor it waits for.
 *
 * <p>Threading: both methods may be called from any thread and return at once; the pipeline
 * applies them on its poll thread, in call order. The nudge runs on the poll thread and must not
 * block.
 */
public interface OrderSlot {

  /** For processors run outside a Kafka pipeline: parking lets nothing start, nothing nudges. */
  OrderSlot NONE = new OrderSlot() {
    @Override
    public void park(Runnable nudge) {}

    @Override
    public void unpark() {}
  };

  /**
   * The record waits for something that may come later in the stream. Calling it again replaces
   * the nudge.
   *
   * @param nudge run each time a record of the same key finishes while this one is parked
   */
  void park(Runnable nudge);

  /** The record goes on (to the business, or to its end): later records of its key wait again. */
  void unpark();
}
