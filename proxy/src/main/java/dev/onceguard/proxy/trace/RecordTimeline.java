package dev.onceguard.proxy.trace;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A per-record timeline of the pipeline's steps and thread hand-offs, for the benchmark's "where
 * the time goes" breakdown: when each step of a record began and ended ({@link Mark}, by
 * {@link System#nanoTime()}), on which thread, and what the store's groups looked like when the
 * record's claim and confirm joined them ({@link Count}).
 *
 * <p>Off unless a benchmark {@linkplain #start starts} it: it is no setting of the sidecar. Off,
 * each hook is one read of a volatile field and allocates nothing. On, a record is followed from
 * the moment the poll thread takes it ({@link #polled}) while fewer than the capacity are
 * followed; the other hooks only stamp records followed already. A mark stamped again (a step run
 * again after a race or an outage) keeps the last time and counts the repeat.
 *
 * <p>Thread-safe: the hooks run on the poll thread, the cache's, the store's and the transport's
 * threads; the marks of one record are written one after the other along its own hand-offs, and
 * {@link #stop} is meant for after the records ended.
 */
public final class RecordTimeline {
  /** The points of a record's way through the pipeline, in the order a guarded record passes them. */
  public enum Mark {
    /** The poll thread took the record from {@code poll()}. */
    POLLED,
    /** The poll thread handed the record to its processor (its ordering key's turn came). */
    LAUNCHED,
    L1_START,
    L1_END,
    /** The claim joined the queue of claim groups. */
    CLAIM_SUBMIT,
    /** The claim's group took a group slot and was handed to the connection threads. */
    CLAIM_GROUP,
    /** A connection thread began the group's work. */
    CLAIM_WORK,
    /** The group's statements were done, before its COMMIT (the work's end when it has none). */
    CLAIM_STATEMENTS,
    /** The group's work ended, COMMIT included. */
    CLAIM_COMMIT,
    /** The record's own context took the claim's result. */
    CLAIM_BACK,
    /** The business call went out. */
    CALL_START,
    /** The business call's answer arrived (on the transport's thread). */
    CALL_END,
    /** The record's own context took the answer. */
    CALL_BACK,
    CONFIRM_SUBMIT,
    CONFIRM_GROUP,
    CONFIRM_WORK,
    CONFIRM_STATEMENTS,
    CONFIRM_COMMIT,
    CONFIRM_BACK,
    /** The verdict was reached (the listener is told next). */
    VERDICT
  }

  /** What a record saw of the store's queues. */
  public enum Count {
    /** Claims already waiting for a group slot when this one joined. */
    CLAIM_QUEUED,
    /** Claim group slots busy when this one joined. */
    CLAIM_RUNNING,
    /** Claims in this claim's group. */
    CLAIM_GROUP_SIZE,
    /** Units of work waiting for a connection thread when the claim's group was handed over. */
    CLAIM_DB_QUEUED,
    CONFIRM_QUEUED,
    CONFIRM_RUNNING,
    CONFIRM_GROUP_SIZE,
    CONFIRM_DB_QUEUED
  }

  /** A store step a connection thread works on: its group, work, statements and commit marks. */
  public enum Step {
    CLAIM(Mark.CLAIM_SUBMIT, Count.CLAIM_QUEUED, Count.CLAIM_RUNNING, Count.CLAIM_GROUP_SIZE, Count.CLAIM_DB_QUEUED),
    CONFIRM(Mark.CONFIRM_SUBMIT, Count.CONFIRM_QUEUED, Count.CONFIRM_RUNNING, Count.CONFIRM_GROUP_SIZE, Count.CONFIRM_DB_QUEUED);

    final Mark submit;
    final Mark group;
    final Mark work;
    final Mark statements;
    final Mark commit;
    final Count queued;
    final Count running;
    final Count groupSize;
    final Count dbQueued;

    Step(Mark submit, Count queued, Count running, Count groupSize, Count dbQueued) {
      Mark[] m = Mark.values();
      this.submit = submit;
      this.group = m[submit.ordinal() + 1];
      this.work = m[submit.ordinal() + 2];
      this.statements = m[submit.ordinal() + 3];
      this.commit = m[submit.ordinal() + 4];
      this.queued = queued;
      this.running = running;
      this.groupSize = groupSize;
      this.dbQueued = dbQueued;
    }
  }

  /** A record's coordinates. */
  public record Key(String topic, int partition, long offset) {}

  /**
   * One record's timeline.
   *
   * @param createdMillis the record's timestamp (epoch ms)
   * @param polledMillis the wall clock when the poll thread took it (epoch ms)
   * @param nanos per {@link Mark}, its {@link System#nanoTime()}; 0: not passed
   * @param threads per {@link Mark}, the thread that stamped it; null: not passed
   * @param counts per {@link Count}; -1: not seen
   * @param repeats marks stamped more than once (steps run again)
   * @param waited per {@link Mark}, the stamping thread's time waiting on a run queue so far
   *     ({@code /proc/thread-self/schedstat}, ns); -1: not read
   * @param ran per {@link Mark}, the stamping thread's time on a CPU so far (ns); -1: not read
   */
  public record Trace(Key key, long createdMillis, long polledMillis, long[] nanos, String[] threads, int[] counts, int repeats,
      long[] waited, long[] ran) {
    public boolean has(Mark m) {
      return nanos[m.ordinal()] != 0;
    }

    public long at(Mark m) {
      return nanos[m.ordinal()];
    }

    public String thread(Mark m) {
      return threads[m.ordinal()];
    }

    public int count(Count c) {
      return counts[c.ordinal()];
    }
  }

  private static final int MARKS = Mark.values().length;
  private static final int COUNTS = Count.values().length;
  private static volatile RecordTimeline active;
  /** The records a connection thread's current unit of work belongs to, with their step. */
  private static final ThreadLocal<Working> WORKING = new ThreadLocal<>();

  private record Working(Step step, List<Entry> entries) {}

  private final Map<Key, Entry> entries = new ConcurrentHashMap<>();
  private final int capacity;
  private final boolean schedstat;

  private RecordTimeline(int capacity, boolean schedstat) {
    this.capacity = capacity;
    this.schedstat = schedstat;
  }

  private static final java.nio.file.Path SCHEDSTAT = java.nio.file.Path.of("/proc/thread-self/schedstat");

  /** The calling thread's {on a CPU, waiting on a run queue} so far in ns (Linux), or null. */
  static long[] schedstat() {
    try {
      String[] f = new String(java.nio.file.Files.readAllBytes(SCHEDSTAT), java.nio.charset.StandardCharsets.US_ASCII).trim().split(" ");
      return new long[] {Long.parseLong(f[0]), Long.parseLong(f[1])};
    } catch (java.io.IOException | RuntimeException e) {
      return null;
    }
  }

  private static final class Entry {
    final Key key;
    final long createdMillis;
    final long polledMillis;
    final long[] nanos = new long[MARKS];
    final String[] threads = new String[MARKS];
    final int[] counts = new int[COUNTS];
    final long[] waited = new long[MARKS];
    final long[] ran = new long[MARKS];
    final boolean schedstat;
    int repeats;

    Entry(Key key, long createdMillis, long polledMillis, boolean schedstat) {
      this.key = key;
      this.createdMillis = createdMillis;
      this.polledMillis = polledMillis;
      this.schedstat = schedstat;
      java.util.Arrays.fill(counts, -1);
      java.util.Arrays.fill(waited, -1);
      java.util.Arrays.fill(ran, -1);
    }

    synchronized void stamp(Mark m) {
      int i = m.ordinal();
      if (nanos[i] != 0) {
        repeats++;
      }
      nanos[i] = System.nanoTime();
      threads[i] = Thread.currentThread().getName();
      long[] st = schedstat ? schedstat() : null;
      if (st != null) {
        ran[i] = st[0];
        waited[i] = st[1];
      }
    }

    synchronized void count(Count c, int n) {
      counts[c.ordinal()] = n;
    }

    synchronized Trace snapshot() {
      return new Trace(key, createdMillis, polledMillis, nanos.clone(), threads.clone(), counts.clone(), repeats, waited.clone(),
          ran.clone());
    }
  }

  /**
   * Starts following records (a benchmark's measured phase), forgetting any earlier timeline.
   *
   * @param capacity records followed at most
   * @param schedstat whether each mark also reads its thread's CPU and run-queue times (Linux,
   *     one small file read per mark)
   */
  public static void start(int capacity, boolean schedstat) {
    active = new RecordTimeline(capacity, schedstat);
  }

  /** Stops following records; the timelines of the records followed since {@link #start}. */
  public static List<Trace> stop() {
    RecordTimeline t = active;
    active = null;
    if (t == null) {
      return List.of();
    }
    List<Trace> out = new ArrayList<>(t.entries.size());
    for (Entry e : t.entries.values()) {
      out.add(e.snapshot());
    }
    return out;
  }

  /** Whether records are followed now: a hook that needs work to find its arguments asks first. */
  public static boolean on() {
    return active != null;
  }

  /** The poll thread took a record: it is followed from here on (while below the capacity). */
  public static void polled(String topic, int partition, long offset, long createdMillis) {
    RecordTimeline t = active;
    if (t == null || t.entries.size() >= t.capacity) {
      return;
    }
    Key k = new Key(topic, partition, offset);
    Entry e = new Entry(k, createdMillis, System.currentTimeMillis(), t.schedstat);
    t.entries.put(k, e);
    e.stamp(Mark.POLLED);
  }

  /** Stamps {@code m} on the record, if it is followed. */
  public static void mark(String topic, int partition, long offset, Mark m) {
    RecordTimeline t = active;
    if (t == null) {
      return;
    }
    Entry e = t.entries.get(new Key(topic, partition, offset));
    if (e != null) {
      e.stamp(m);
    }
  }

  /**
   * A store step joined its group queue, with {@code queued} items waiting and {@code running}
   * group slots busy.
   */
  public static void submitted(String topic, int partition, long offset, Step step, int queued, int running) {
    RecordTimeline t = active;
    if (t == null) {
      return;
    }
    Entry e = t.entries.get(new Key(topic, partition, offset));
    if (e != null) {
      e.stamp(step.submit);
      e.count(step.queued, queued);
      e.count(step.running, running);
    }
  }

  /**
   * A group of {@code keys} took a slot and is handed to the connection threads, where
   * {@code dbQueued} units of work wait already.
   */
  public static void grouped(Step step, List<Key> keys, int dbQueued) {
    RecordTimeline t = active;
    if (t == null) {
      return;
    }
    for (Key k : keys) {
      Entry e = t.entries.get(k);
      if (e != null) {
        e.stamp(step.group);
        e.count(step.groupSize, keys.size());
        e.count(step.dbQueued, dbQueued);
      }
    }
  }

  /** On a connection thread: the group of {@code keys} begins its work here. */
  public static void working(Step step, List<Key> keys) {
    RecordTimeline t = active;
    if (t == null) {
      return;
    }
    List<Entry> found = new ArrayList<>(keys.size());
    for (Key k : keys) {
      Entry e = t.entries.get(k);
      if (e != null) {
        e.stamp(step.work);
        found.add(e);
      }
    }
    WORKING.set(new Working(step, found));
  }

  /** On a connection thread: the current work's statements are done and its COMMIT goes out. */
  public static void beforeCommit() {
    if (active == null) {
      return;
    }
    Working w = WORKING.get();
    if (w != null) {
      for (Entry e : w.entries()) {
        e.stamp(w.step().statements);
      }
    }
  }

  /** On a connection thread: the current work ended (its COMMIT done, or it failed). */
  public static void worked() {
    Working w = WORKING.get();
    WORKING.remove();
    if (w == null || active == null) {
      return;
    }
    for (Entry e : w.entries()) {
      synchronized (e) {
        if (e.nanos[w.step().statements.ordinal()] < e.nanos[w.step().work.ordinal()]) {
          // no COMMIT of its own (autocommit): the statements ended with the work
          e.stamp(w.step().statements);
        }
      }
      e.stamp(w.step().commit);
    }
  }
}
