package dev.onceguard.proxy.pipeline;

import java.util.Map;
import java.util.TreeMap;

/**
 * Completion tracking for one partition: which consumed offsets are finished, and the offset that
 * may be committed. Kafka's committed offset means "every record below it is finished", so the
 * commit offset is the lowest offset not finished yet — equivalently the highest contiguous
 * finished prefix plus one. Offsets need not be consecutive (compacted topics and transaction
 * markers leave gaps), so only offsets that were {@link #track tracked} count.
 *
 * <p>Example: tracked 10, 11, 12, 14; finished 10, 12, 14 → commit offset 11 (11 is unfinished).
 * Once 11 finishes → 15.
 *
 * <p>It also remembers when each record was taken, so that the age of the oldest unfinished record
 * (the one at the commit offset: records are taken in offset order) shows a stuck record.
 *
 * <p>Not thread-safe: confined to the route's poll thread. Cost: O(log n) per call in the number of
 * tracked offsets not yet below the committable prefix (bounded by the partition's in-flight and
 * buffered records).
 */
public final class OffsetTracker {
  /** Tracked offsets at or above the commit offset: when taken, and whether finished. */
  private final TreeMap<Long, Entry> open = new TreeMap<>();
  private long lastTracked = -1;

  private static final class Entry {
    final long takenAtMillis;
    boolean finished;

    Entry(long takenAtMillis) {
      this.takenAtMillis = takenAtMillis;
    }
  }

  /**
   * Starts tracking a consumed record. Offsets must be tracked in increasing order.
   *
   * @param takenAtMillis when the pipeline took the record (for {@link #oldestUnfinishedTakenAt})
   * @throws IllegalArgumentException if {@code offset} is not above the last tracked offset
   */
  public void track(long offset, long takenAtMillis) {
    if (offset <= lastTracked) {
      throw new IllegalArgumentException("offset " + offset + " tracked after " + lastTracked + "; offsets must increase");
    }
    open.put(offset, new Entry(takenAtMillis));
    lastTracked = offset;
  }

  /**
   * Marks a tracked record finished.
   *
   * @throws IllegalArgumentException if the offset was never tracked or already finished
   */
  public void complete(long offset) {
    Entry e = open.get(offset);
    if (e == null || e.finished) {
      throw new IllegalArgumentException("offset " + offset + " is not tracked or already finished"
          + " (open range " + (open.isEmpty() ? "empty" : open.firstKey() + ".." + lastTracked) + ")");
    }
    e.finished = true;
    // advance the prefix
    Map.Entry<Long, Entry> first;
    while ((first = open.firstEntry()) != null && first.getValue().finished) {
      open.pollFirstEntry();
    }
  }

  /**
   * The offset to commit: the lowest unfinished tracked offset, or the last tracked offset plus one
   * when all are finished; {@code -1} when nothing was ever tracked.
   */
  public long commitOffset() {
    if (open.isEmpty()) {
      return lastTracked < 0 ? -1 : lastTracked + 1;
    }
    return open.firstKey();
  }

  /**
   * Tracked offsets at or above the commit offset, finished or not: the records a crash now would
   * deliver again (the partition's uncommitted span, in records).
   */
  public int size() {
    return open.size();
  }

  /** When the oldest unfinished record (the one at the commit offset) was taken; -1 if none is unfinished. */
  public long oldestUnfinishedTakenAt() {
    Map.Entry<Long, Entry> first = open.firstEntry();
    return first == null ? -1 : first.getValue().takenAtMillis;
  }

  @Override
  public String toString() {
    return "OffsetTracker[commit=" + commitOffset() + ", open=" + open.size() + ", lastTracked=" + lastTracked + "]";
  }
}
