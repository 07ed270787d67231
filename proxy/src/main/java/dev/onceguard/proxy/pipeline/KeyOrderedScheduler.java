package dev.onceguard.proxy.pipeline;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;

/**
 * Decides which records of one partition may start: records with the same ordering key run one at
 * a time in offset order; records with different keys may run concurrently. Among the records
 * that may start, the lowest offset goes first, so the committable prefix grows as fast as it can.
 * The scheduler only decides; the caller starts the work, enforces capacity, and reports the end.
 *
 * <p>A record is <em>waiting</em> from {@link #submit} until {@link #next} hands it out, then
 * <em>running</em> until {@link #finished}. A record whose key has an earlier record waiting or
 * running is blocked behind it.
 *
 * <p>Not thread-safe: confined to the route's poll thread.
 *
 * @param <T> the record type
 */
public final class KeyOrderedScheduler<T> {
  private static final class Entry<T> {
    final String key;
    final long offset;
    final T item;
    boolean running;

    Entry(String key, long offset, T item) {
      this.key = key;
      this.offset = offset;
      this.item = item;
    }

    long offset() {
      return offset;
    }
  }

  /** Per key: its unfinished records in offset order; the head is running or ready. */
  private final Map<String, ArrayDeque<Entry<T>>> byKey = new HashMap<>();
  /** Heads of keys that may start now, lowest offset first. */
  private final PriorityQueue<Entry<T>> ready = new PriorityQueue<>(Comparator.comparingLong(Entry::offset));
  private long lastOffset = -1;
  private int waiting;
  private int running;

  /**
   * Adds a record; offsets must increase.
   *
   * @throws IllegalArgumentException on a non-increasing offset
   */
  public void submit(String key, long offset, T item) {
    if (offset <= lastOffset) {
      throw new IllegalArgumentException("offset " + offset + " submitted after " + lastOffset);
    }
    lastOffset = offset;
    Entry<T> e = new Entry<>(key, offset, item);
    ArrayDeque<Entry<T>> q = byKey.get(key);
    if (q == null) {
      q = new ArrayDeque<>();
      byKey.put(key, q);
      ready.add(e);
    }
    q.addLast(e);
    waiting++;
  }

  /** True if some record may start now. */
  public boolean hasReady() {
    return !ready.isEmpty();
  }

  /** Hands out the lowest-offset record that may start, now counted as running; null if none. */
  public T next() {
    Entry<T> e = ready.poll();
    if (e == null) {
      return null;
    }
    e.running = true;
    waiting--;
    running++;
    return e.item;
  }

  /**
   * Reports that the running record of {@code key} finished; the next record of that key (if any)
   * becomes ready.
   *
   * @throws IllegalStateException if {@code key} has no running record
   */
  public void finished(String key) {
    ArrayDeque<Entry<T>> q = byKey.get(key);
    if (q == null || !q.peekFirst().running) {
      throw new IllegalStateException("no running record for key '" + key + "'");
    }
    q.pollFirst();
    running--;
    if (q.isEmpty()) {
      byKey.remove(key);
    } else {
      ready.add(q.peekFirst());
    }
  }

  /**
   * Forgets every waiting record (partition revoked, sidecar stopping) and returns them in offset
   * order. Running records stay counted until {@link #finished}; their keys stay blocked.
   */
  public List<T> dropWaiting() {
    List<Entry<T>> dropped = new ArrayList<>();
    for (var it = byKey.values().iterator(); it.hasNext(); ) {
      ArrayDeque<Entry<T>> q = it.next();
      // everything behind the head waits; the head waits unless it runs
      var qi = q.iterator();
      if (q.peekFirst().running) {
        qi.next();
      }
      while (qi.hasNext()) {
        dropped.add(qi.next());
        qi.remove();
      }
      if (q.isEmpty()) {
        it.remove();
      }
    }
    ready.clear();
    waiting = 0;
    dropped.sort(Comparator.comparingLong(Entry::offset));
    List<T> out = new ArrayList<>(dropped.size());
    dropped.forEach(e -> out.add(e.item));
    return out;
  }

  public int waiting() {
    return waiting;
  }

  public int running() {
    return running;
  }

  /** Waiting plus running. */
  public int outstanding() {
    return waiting + running;
  }
}
