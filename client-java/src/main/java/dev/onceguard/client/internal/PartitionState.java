package dev.onceguard.client.internal;

import dev.onceguard.v1.Delivery;
import java.util.ArrayList;
import java.util.List;
import java.util.NavigableMap;
import java.util.TreeMap;
import java.util.function.LongSupplier;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;

/**
 * What {@link PullConsumer} knows of one partition, as Kafka's {@code TopicPartitionState} does
 * for {@code KafkaConsumer}: whether the current stream assigned it, whether it is paused, its
 * position, the deliveries poll returned and that are not yet acknowledged (what a commit
 * acknowledges), and its committed offset.
 *
 * <p>The parts live for different spans: assignment, position and outstanding deliveries belong
 * to one stream and end with it ({@link #unassign()}); a pause lasts until resume or
 * unsubscribe; the committed offset lasts as long as the consumer.
 *
 * <p>Not thread-safe: owned by the consumer thread, like the rest of the consumer's state (gRPC
 * threads only enqueue stream events, which that thread handles).
 */
final class PartitionState {
  private static final long UNKNOWN = -1;

  private boolean assigned;
  private boolean paused;
  /** Next offset after the highest record poll returned or refused, or where seek moved it. */
  private long position = UNKNOWN;
  /** Next offset after the highest record acknowledged OK. */
  private long committed = UNKNOWN;
  /** Returned by poll and not yet acknowledged, by offset. */
  private final NavigableMap<Long, Delivery> outstanding = new TreeMap<>();
  /** Given when {@link #outstanding} last went from empty to not empty; orders commits. */
  private long outstandingOrder;

  /** The current stream delivered a record of the partition. */
  void assign() {
    assigned = true;
  }

  boolean isAssigned() {
    return assigned;
  }

  /**
   * The stream ended: the partition is no longer assigned, and its outstanding deliveries can
   * no longer be acknowledged. As in Kafka, a partition assigned again starts from what was
   * committed, not from where the lost stream was: the records it handed out and that were not
   * acknowledged come back.
   */
  void unassign() {
    assigned = false;
    position = UNKNOWN;
    outstanding.clear();
  }

  void pause() {
    paused = true;
  }

  void resume() {
    paused = false;
  }

  boolean isPaused() {
    return paused;
  }

  /** Whether the state holds nothing worth keeping: not assigned, not paused, nothing committed. */
  boolean isUnused() {
    return !assigned && !paused && committed == UNKNOWN;
  }

  /**
   * The position: the offset after the highest record poll returned or refused, or where seek
   * moved it; before either, the lowest offset buffered for the partition, else the committed
   * offset, else 0.
   *
   * @param lowestBuffered the lowest offset received and not yet returned by poll, or
   *     {@link Long#MAX_VALUE} if none; asked only when needed
   */
  long position(LongSupplier lowestBuffered) {
    if (position != UNKNOWN) {
      return position;
    }
    long lowest = lowestBuffered.getAsLong();
    if (lowest != Long.MAX_VALUE) {
      return lowest;
    }
    return committed != UNKNOWN ? committed : 0;
  }

  /** Poll returned or refused the record at {@code offset}: the position moves past it. */
  void handedOut(long offset) {
    position = Math.max(position, offset + 1);
  }

  /** The committed offset, or {@code null} if no record of the partition was acknowledged OK. */
  OffsetAndMetadata committed() {
    return committed == UNKNOWN ? null : new OffsetAndMetadata(committed);
  }

  /** Records up to {@code next} (exclusive) were acknowledged OK. */
  void acknowledged(long next) {
    committed = Math.max(committed, next);
  }

  /**
   * Poll returns this delivery: it is outstanding until acknowledged.
   *
   * @param order a number larger than any given before, kept if the partition had no outstanding
   *     delivery: {@link #outstandingOrder()}
   */
  void addOutstanding(Delivery delivery, long order) {
    if (outstanding.isEmpty()) {
      outstandingOrder = order;
    }
    outstanding.put(delivery.getRecord().getOffset(), delivery);
  }

  boolean hasOutstanding() {
    return !outstanding.isEmpty();
  }

  int outstandingCount() {
    return outstanding.size();
  }

  /**
   * The order given when the partition last got an outstanding delivery while it had none; a
   * commit of everything acknowledges the partitions in this order.
   */
  long outstandingOrder() {
    return outstandingOrder;
  }

  /** What a Kafka commit of every outstanding delivery names: the highest offset + 1. */
  OffsetAndMetadata outstandingNext() {
    return new OffsetAndMetadata(outstanding.lastKey() + 1);
  }

  /** Removes and returns one outstanding delivery, or {@code null} if it is not outstanding. */
  Delivery takeOutstanding(long offset) {
    return outstanding.remove(offset);
  }

  /** Removes and returns every outstanding delivery, in offset order. */
  List<Delivery> takeAllOutstanding() {
    List<Delivery> all = new ArrayList<>(outstanding.values());
    outstanding.clear();
    return all;
  }

  /**
   * Removes and returns the outstanding deliveries below {@code next} (a Kafka commit names the
   * next offset to consume), in offset order.
   */
  List<Delivery> takeOutstandingBelow(long next) {
    NavigableMap<Long, Delivery> below = outstanding.headMap(next, false);
    List<Delivery> taken = new ArrayList<>(below.values());
    below.clear();
    return taken;
  }

  /**
   * Takes back the outstanding deliveries at or after {@code offset}, in offset order, for poll
   * to return again, and moves the position to {@code offset}. With none there, nothing
   * changes.
   */
  List<Delivery> rewindTo(long offset) {
    NavigableMap<Long, Delivery> tail = outstanding.tailMap(offset, true);
    List<Delivery> back = new ArrayList<>(tail.values());
    if (!back.isEmpty()) {
      tail.clear();
      position = offset;
    }
    return back;
  }
}
