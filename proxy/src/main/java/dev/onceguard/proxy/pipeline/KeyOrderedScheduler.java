package dev.onceguard.proxy.pipeline;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.function.BiPredicate;

/**
 * Decides which records of one partition may start: records with the same ordering key start in
 * offset order and, normally, one at a time; records with different keys may run concurrently.
 * Among the records that may start, the lowest offset goes first, so the committable prefix grows
 * as fast as it can. The scheduler only decides; the caller starts the work, enforces capacity,
 * and reports the end.
 *
 * <p>A record is <em>waiting</em> from {@link #submit} until {@link #next} hands it out, then
 * <em>started</em> until {@link #finished}. A started record is <em>running</em>, or
 * <em>parked</em> after {@link #park}: it waits for something that may come later in the stream
 * (an early arrival waiting for its predecessor transition). The next waiting record of a key may
 * start only when every started record of that key is parked and fewer than {@code window}
 * records of the key are started: the <b>reorder window</b>, which lets a swapped pair
 * ("delivered" before "shipped") heal instead of timing out. With {@code window = 1} a key's
 * records run strictly one at a time. Started records may finish in any order.
 *
 * <p>Within the window, a record goes before an earlier parked one only where {@code mayOvertake
 * (parked, later)} allows it (see {@link RecordProcessor#mayOvertake}). A record that may not is
 * <em>held</em>: it takes its place in the window as if started and parked, so the records behind
 * it may still start (and be held in turn, or overtake it as well), but it is not handed out until
 * no earlier started or held record of its key forbids it any more (that record finished). A held record counts as waiting, not as started, for {@link #waiting},
 * {@link #running} and {@link #dropWaiting}.
 *
 * <p>Not thread-safe: confined to the route's poll thread.
 *
 * @param <T> the record type
 */
public final class KeyOrderedScheduler<T> {
  private enum State {
    WAITING,
    /** In the window, not handed out: it may not overtake an earlier parked (or held) record. */
    HELD,
    RUNNING,
    PARKED
  }

  private static final class Entry<T> {
    final String key;
    final long offset;
    final T item;
    State state = State.WAITING;
    /** In {@link #ready}. */
    boolean queued;
    /** A record of its key finished while this one was running: see {@link #takeProgressed}. */
    boolean progressed;

    Entry(String key, long offset, T item) {
      this.key = key;
      this.offset = offset;
      this.item = item;
    }

    long offset() {
      return offset;
    }
  }

  /** One key's unfinished records in offset order; the started and held ones are a prefix. */
  private static final class KeyQueue<T> {
    final List<Entry<T>> entries = new ArrayList<>(2);
    /** The prefix: started and held records. */
    int started;
    /** Parked and held records. */
    int parked;
  }

  private final int window;
  private final BiPredicate<T, T> mayOvertake;
  private final Map<String, KeyQueue<T>> byKey = new HashMap<>();
  /** Records that may start now (per key, its next waiting one and held ones let go), lowest offset first. */
  private final PriorityQueue<Entry<T>> ready = new PriorityQueue<>(Comparator.comparingLong(Entry::offset));
  private long lastOffset = -1;
  private int waiting;
  private int running;

  /** Strict order: one record per key at a time. */
  public KeyOrderedScheduler() {
    this(1);
  }

  /** Any record may overtake a parked one within the window. */
  public KeyOrderedScheduler(int window) {
    this(window, (parked, later) -> true);
  }

  /**
   * @param window records of one key that may be started at once (parked and held ones included); ≥ 1
   * @param mayOvertake whether the later record of a key may go before the earlier parked one;
   *     called on this scheduler's thread, must be cheap and not throw
   */
  public KeyOrderedScheduler(int window, BiPredicate<T, T> mayOvertake) {
    if (window < 1) {
      throw new IllegalArgumentException("window must be at least 1, was " + window);
    }
    this.window = window;
    this.mayOvertake = mayOvertake;
  }

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
    KeyQueue<T> q = byKey.computeIfAbsent(key, k -> new KeyQueue<>());
    q.entries.add(new Entry<>(key, offset, item));
    waiting++;
    refresh(q);
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
    e.queued = false;
    KeyQueue<T> q = byKey.get(e.key);
    if (e.state == State.HELD) {
      q.parked--; // already in the prefix
    } else {
      q.started++;
    }
    e.state = State.RUNNING;
    waiting--;
    running++;
    refresh(q);
    return e.item;
  }

  /**
   * The started record at {@code offset} waits for a later record of its key: the key's next
   * record may start (within the window). No effect if the record is not started or already
   * parked; returns whether it is parked now.
   */
  public boolean park(String key, long offset) {
    Entry<T> e = started(key, offset);
    if (e == null || e.state == State.HELD) {
      return false;
    }
    if (e.state == State.RUNNING) {
      e.state = State.PARKED;
      KeyQueue<T> q = byKey.get(key);
      q.parked++;
      refresh(q);
    }
    return true;
  }

  /** True if the started record at {@code offset} is parked. */
  public boolean isParked(String key, long offset) {
    Entry<T> e = started(key, offset);
    return e != null && e.state == State.PARKED;
  }

  /**
   * True, once, if a record of its key finished while the started record at {@code offset} was
   * running: it may be about to park on a state that record just changed, so when it parks it
   * looks again at once instead of waiting for the next nudge.
   */
  public boolean takeProgressed(String key, long offset) {
    Entry<T> e = started(key, offset);
    if (e == null || !e.progressed) {
      return false;
    }
    e.progressed = false;
    return true;
  }

  /** The parked record at {@code offset} runs again (it goes on to the business). No effect otherwise. */
  public void unpark(String key, long offset) {
    Entry<T> e = started(key, offset);
    if (e != null && e.state == State.PARKED) {
      e.state = State.RUNNING;
      KeyQueue<T> q = byKey.get(key);
      q.parked--;
      refresh(q);
    }
  }

  /**
   * Reports that the started record at {@code offset} finished; the key's next record may become
   * ready.
   *
   * @return the other started records of {@code key}, running or parked, in offset order: the
   *     ones waiting for a predecessor may now be able to go on; the running ones are marked
   *     {@linkplain #takeProgressed progressed}
   * @throws IllegalStateException if that record is not started
   */
  public List<T> finished(String key, long offset) {
    KeyQueue<T> q = byKey.get(key);
    int i = q == null ? -1 : indexOf(q, offset);
    State was = i < 0 ? null : q.entries.get(i).state;
    if (was != State.RUNNING && was != State.PARKED) {
      throw new IllegalStateException("no started record for key '" + key + "' at offset " + offset);
    }
    Entry<T> e = q.entries.remove(i);
    q.started--;
    if (e.state == State.PARKED) {
      q.parked--;
    }
    running--;
    if (q.entries.isEmpty()) {
      byKey.remove(key);
      return List.of();
    }
    refresh(q);
    List<T> others = new ArrayList<>(q.started);
    for (int j = 0; j < q.started; j++) {
      Entry<T> o = q.entries.get(j);
      if (o.state != State.HELD) {
        others.add(o.item);
      }
      if (o.state == State.RUNNING) {
        o.progressed = true;
      }
    }
    return others;
  }

  /**
   * Forgets every waiting record, held ones included (partition revoked, sidecar stopping), and
   * returns them in offset order. Started records stay counted until {@link #finished}; their
   * keys stay blocked.
   */
  public List<T> dropWaiting() {
    List<Entry<T>> dropped = new ArrayList<>();
    for (var it = byKey.values().iterator(); it.hasNext(); ) {
      KeyQueue<T> q = it.next();
      List<Entry<T>> tail = q.entries.subList(q.started, q.entries.size());
      dropped.addAll(tail);
      tail.clear();
      for (var es = q.entries.iterator(); es.hasNext(); ) {
        Entry<T> e = es.next();
        if (e.state == State.HELD) {
          dropped.add(e);
          es.remove();
          q.started--;
          q.parked--;
        }
      }
      if (q.entries.isEmpty()) {
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

  /** Submitted and not handed out, held ones included. */
  public int waiting() {
    return waiting;
  }

  /** Started records, parked ones included. */
  public int running() {
    return running;
  }

  /** Waiting (held ones included) plus started. */
  public int outstanding() {
    return waiting + running;
  }

  /**
   * Lets go the key's held records no earlier one forbids any more, then queues or unqueues its
   * first waiting record according to the window rule, holding it (and looking at the next one)
   * where it may not overtake an earlier parked one.
   */
  private void refresh(KeyQueue<T> q) {
    for (int i = 0; i < q.started; i++) {
      Entry<T> e = q.entries.get(i);
      if (e.state == State.HELD) {
        queue(e, !forbidden(q, i));
      }
    }
    while (q.started < q.entries.size()) {
      Entry<T> candidate = q.entries.get(q.started);
      boolean may = q.started == q.parked && q.started < window;
      if (may && forbidden(q, q.started)) {
        queue(candidate, false);
        candidate.state = State.HELD;
        q.started++;
        q.parked++;
        continue;
      }
      queue(candidate, may);
      return;
    }
  }

  /**
   * True if an earlier started or held record of the key may not be overtaken by the one at
   * {@code i}. A running one counts too: a held record let go while the one it waits for runs
   * (claims again, or goes on to the business) could otherwise overtake it after all.
   */
  private boolean forbidden(KeyQueue<T> q, int i) {
    T later = q.entries.get(i).item;
    for (int j = 0; j < i; j++) {
      Entry<T> e = q.entries.get(j);
      if (e.state != State.WAITING && !mayOvertake.test(e.item, later)) {
        return true;
      }
    }
    return false;
  }

  private void queue(Entry<T> e, boolean may) {
    if (may && !e.queued) {
      e.queued = true;
      ready.add(e);
    } else if (!may && e.queued) {
      e.queued = false;
      ready.remove(e);
    }
  }

  private Entry<T> started(String key, long offset) {
    KeyQueue<T> q = byKey.get(key);
    int i = q == null ? -1 : indexOf(q, offset);
    if (i < 0 || i >= q.started) {
      return null;
    }
    return q.entries.get(i);
  }

  private static <T> int indexOf(KeyQueue<T> q, long offset) {
    for (int i = 0; i < q.entries.size(); i++) {
      if (q.entries.get(i).offset == offset) {
        return i;
      }
    }
    return -1;
  }
}
