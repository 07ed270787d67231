package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.trace.RecordTimeline;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.PriorityQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka intake of one route: one thread that owns the route's consumer and feeds records to the
 * {@link RecordProcessor} in per-key order. The bookkeeping around it has a class each, all
 * confined to that thread: {@link PartitionCommits} (what is finished, what to commit),
 * {@link PausePolicy} (when a partition pauses) and {@link PartitionDrain} (letting partitions go
 * on revocation, loss, shutdown and failure).
 *
 * <h2>Threading</h2>
 * Everything except {@link #start}, {@link #requestStop}, {@link #close}, {@link #terminated} and
 * the statistics runs on the route's <em>poll thread</em>, which alone touches the consumer
 * (KafkaConsumer is single-threaded) and all partition state, without locks. The processor's
 * stages complete on other threads; their completions are handed to the poll thread through a
 * queue, and the poll is woken with {@link Consumer#wakeup()} — at most once per loop iteration (a
 * flag coalesces completions), so a busy route pays one wakeup per batch, not per record. A wakeup
 * rather than a short poll timeout because a record whose key has a successor must hand over to it
 * at once: with a 100 ms poll, a hot key would be limited to ten records a second. The rare
 * {@link WakeupException} that lands in a commit is retried.
 *
 * <h2>Ordering and bounds</h2>
 * Per partition, a {@link KeyOrderedScheduler} runs records of one ordering key one at a time in
 * offset order; different keys run concurrently, at most {@code maxInFlightPerPartition} per
 * partition and {@code maxInFlight} per route. A record that waits for a successor transition
 * parks itself through its {@link OrderSlot}; then later records of its key may start, up to
 * {@code reorderWindow} started records per key, and every record of the key that finishes
 * nudges the parked ones, so a swapped pair heals at once instead of after a retry delay. A later
 * record starts before a parked one only where the processor's {@link RecordProcessor#mayOvertake}
 * allows it; otherwise the scheduler holds it until that one goes on or finishes. A record
 * polled while its key is busy or the bounds are reached waits in memory. Partitions pause and
 * resume by the {@link PausePolicy}. As one poll returns at most {@code max.poll.records} (set to
 * the per-partition bound, see {@link ConsumerProperties}), memory stays below
 * {@code maxInFlight + max.poll.records} records. Nothing is dropped or skipped.
 *
 * <h2>Failures</h2>
 * Only the contiguous finished prefix of a partition is committed ({@link PartitionCommits}). A
 * record whose stage failed with anything but a {@link CancelledException} of its own cancellation
 * — a processor step or continuation threw, or a nudge of it threw — never finished: it is logged
 * at ERROR and tried again after the route's retry backoff, keeping its key and its offset, so
 * nothing at or after it is committed meanwhile and it never hangs unseen. The age of each
 * partition's oldest unfinished record ({@link #oldestUnfinishedAgeMillis}) shows a record that
 * keeps failing or never reports back.
 *
 * <h2>Rebalance and shutdown</h2>
 * See {@link PartitionDrain}: on revocation, running records are cancelled and awaited up to
 * {@code revokeTimeout}; at shutdown ({@link #requestStop}) they get {@code shutdownTimeout} first;
 * then the finished prefix is committed and the partitions' state forgotten (late completions are
 * ignored). On loss nothing is committed.
 *
 * <p>Ownership: takes ownership of the consumer (closes it); uses, does not own, the processor.
 */
public final class RouteConsumer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(RouteConsumer.class);

  /** How long cancelled work gets to report back before it is abandoned. */
  static final Duration CANCEL_GRACE = Duration.ofSeconds(2);
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);
  /** Longest poll: bounds how late a periodic commit can be when nothing else wakes the loop. */
  static final Duration MAX_POLL_WAIT = Duration.ofSeconds(1);

  /**
   * The pipeline's settings for one route.
   *
   * @param maxUncommittedPerPartition a partition pauses while this many of its records are taken
   *     and not committable (at or after its first unfinished record), see {@link PausePolicy}
   * @param revokeTimeout how long revocation waits for cancelled work before abandoning it; the
   *     group's rebalance waits for it, so keep it short
   * @param retry the backoff before a record whose stage failed is tried again
   */
  public record Settings(
      String route,
      List<String> topics,
      int maxInFlightPerPartition,
      int maxInFlight,
      int maxUncommittedPerPartition,
      Duration commitInterval,
      Duration shutdownTimeout,
      Duration revokeTimeout,
      int reorderWindow,
      RetryConfig retry) {
    public static final Duration DEFAULT_REVOKE_TIMEOUT = Duration.ofSeconds(5);

    public Settings {
      topics = List.copyOf(topics);
      if (maxInFlightPerPartition < 1 || maxInFlight < 1 || maxUncommittedPerPartition < 1 || reorderWindow < 1) {
        throw new IllegalArgumentException("in-flight and uncommitted bounds and the reorder window must be positive");
      }
      Objects.requireNonNull(retry, "retry");
    }

    public static Settings of(SidecarConfig sidecar, RouteConfig route) {
      Duration revoke = DEFAULT_REVOKE_TIMEOUT.compareTo(sidecar.shutdownTimeout()) < 0
          ? DEFAULT_REVOKE_TIMEOUT
          : sidecar.shutdownTimeout();
      return new Settings(route.name(), route.intake().topics(), route.intake().maxInFlightPerPartition(), route.intake().maxInFlight(),
          route.intake().maxUncommittedPerPartition(), sidecar.commitInterval(), sidecar.shutdownTimeout(), revoke,
          route.intake().reorderWindow(), route.delivery().retry());
    }
  }

  private final Settings settings;
  private final Consumer<byte[], byte[]> consumer;
  private final RecordProcessor processor;
  private final Clock clock;
  private final Backoff retryBackoff;
  private final Thread thread;
  /** Completions and slot changes, from any thread to the poll thread. */
  private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();
  /** True while a wakeup is pending or unnecessary; completions wake the poll only when false. */
  private final AtomicBoolean wakeupRequested = new AtomicBoolean();
  private final CompletableFuture<Void> terminated = new CompletableFuture<>();
  private final AtomicBoolean started = new AtomicBoolean();
  private final LogThrottle failureLog = new LogThrottle(Duration.ofSeconds(5), System::nanoTime);
  private volatile boolean stopRequested;
  private volatile boolean consumerClosed;
  /** For metrics, written by the poll thread once per loop. */
  private volatile int statRunning;
  private volatile int statHeld;
  private volatile int statPaused;
  private volatile Map<TopicPartition, PartitionStat> statPartitions = Map.of();
  /** For probes: when the poll loop last began a turn (clock millis), and whether the group assigned us (even nothing). */
  private volatile long lastTurnAt;
  private volatile boolean inGroup;

  // ---- poll-thread state
  private final Map<TopicPartition, PartitionWork> partitions = new LinkedHashMap<>();
  private final PartitionCommits commits;
  private final PausePolicy pausePolicy;
  private final PartitionDrain drain;
  /** Records whose attempt failed, by the time they are due again. */
  private final PriorityQueue<InFlight> retries = new PriorityQueue<>(Comparator.comparingLong(InFlight::retryAt));
  /** Records started and not finished, summed over partitions (cancelled and retrying ones count). */
  private int running;
  /** Records held (waiting plus running), summed over partitions. */
  private int outstanding;

  /**
   * @param consumer a consumer configured with {@link ConsumerProperties}, not yet subscribed; this
   *     object owns it from now on
   */
  public RouteConsumer(Settings settings, Consumer<byte[], byte[]> consumer, RecordProcessor processor, Clock clock) {
    this.settings = settings;
    this.consumer = consumer;
    this.processor = processor;
    this.clock = clock;
    this.retryBackoff = Backoff.of(settings.retry());
    this.commits = new PartitionCommits(settings.route(), consumer, settings.commitInterval(), clock);
    this.pausePolicy = new PausePolicy(settings.route(), consumer, settings.maxInFlightPerPartition(), settings.maxInFlight(),
        settings.maxUncommittedPerPartition());
    this.drain = new PartitionDrain(settings.route(), new DrainView(), commits, System::nanoTime);
    this.thread = new Thread(this::run, "onceguard-route-" + settings.route());
  }

  /** Subscribes and starts the poll thread. Once only. */
  public void start() {
    if (!started.compareAndSet(false, true)) {
      throw new IllegalStateException("route " + settings.route() + ": already started");
    }
    lastTurnAt = clock.nowMillis();
    thread.start();
  }

  /** Asks the poll thread to drain and stop; returns at once. Idempotent, any thread. */
  public void requestStop() {
    stopRequested = true;
    wakeConsumer();
  }

  /**
   * Completes when the poll thread ended and the consumer is closed: normally after a stop,
   * exceptionally if the consumer failed (the route then consumes nothing more).
   */
  public CompletionStage<Void> terminated() {
    return terminated;
  }

  /**
   * Stops and waits for the drain ({@code shutdownTimeout} plus bounded commit and close time).
   * Returns early if the thread is interrupted. Any thread.
   */
  @Override
  public void close() {
    if (started.compareAndSet(false, true)) {
      // never started: nothing in flight, only the consumer to release
      closeConsumer();
      terminated.complete(null);
      return;
    }
    requestStop();
    Duration bound = settings.shutdownTimeout().plus(CANCEL_GRACE).plus(PartitionCommits.COMMIT_TIMEOUT).plus(CLOSE_TIMEOUT).plusSeconds(5);
    try {
      thread.join(bound.toMillis());
      if (thread.isAlive()) {
        log.error("route {}: poll thread did not stop within {}; interrupting it", settings.route(), bound);
        thread.interrupt();
        thread.join(CLOSE_TIMEOUT.toMillis());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * When the poll loop last began a turn (clock millis; the start time before its first). A loop
   * that is not wedged turns at least every {@link #MAX_POLL_WAIT} plus the time of a commit or a
   * rebalance callback; it stops turning while it drains at shutdown. Any thread.
   */
  public long lastTurnAtMillis() {
    return lastTurnAt;
  }

  /**
   * True once the consumer joined its group and got an assignment, possibly empty (more instances
   * than partitions), until the assignment is lost. Any thread.
   */
  public boolean inGroup() {
    return inGroup;
  }

  /** Partitions assigned, as of the poll loop's last turn. Any thread. */
  public int assignedPartitions() {
    return statPartitions.size();
  }

  /** Records started and not finished (parked ones included), as of the poll loop's last turn. Any thread. */
  public int running() {
    return statRunning;
  }

  /** Records held in memory, started or waiting to start. Any thread. */
  public int held() {
    return statHeld;
  }

  /** Partitions paused by the {@link PausePolicy}. Any thread. */
  public int pausedPartitions() {
    return statPaused;
  }

  /** Per assigned partition: records taken and not committable, as of the poll loop's last turn. Any thread. */
  public Map<TopicPartition, Integer> uncommittedRecords() {
    Map<TopicPartition, Integer> out = new HashMap<>();
    statPartitions.forEach((tp, s) -> out.put(tp, s.uncommitted()));
    return out;
  }

  /**
   * Per assigned partition whose log end offset is known: the records not yet finished in order,
   * that is the log end offset minus the consumer's position (from the last fetch response, so
   * it stands still while the partition is paused) plus the records taken and not committable.
   * As of the poll loop's last turn. Any thread.
   */
  public Map<TopicPartition, Long> lagRecords() {
    Map<TopicPartition, Long> out = new HashMap<>();
    statPartitions.forEach((tp, s) -> {
      if (s.lag() >= 0) {
        out.put(tp, s.lag());
      }
    });
    return out;
  }

  /**
   * Per assigned partition: how long ago its oldest unfinished record was taken, now; 0 when none is
   * unfinished. Any thread.
   */
  public Map<TopicPartition, Long> oldestUnfinishedAgeMillis() {
    long now = clock.nowMillis();
    Map<TopicPartition, Long> out = new HashMap<>();
    statPartitions.forEach((tp, s) -> out.put(tp, s.oldestUnfinishedTakenAt() < 0 ? 0L : Math.max(0, now - s.oldestUnfinishedTakenAt())));
    return out;
  }

  // ------------------------------------------------------------------------------------------
  // poll thread

  private void run() {
    Throwable failure = null;
    try {
      consumer.subscribe(settings.topics(), new Rebalance());
      log.info("route {}: consuming {} (in flight at most {} per partition, {} in total; at most {} uncommitted per partition)",
          settings.route(), settings.topics(), settings.maxInFlightPerPartition(), settings.maxInFlight(),
          settings.maxUncommittedPerPartition());
      while (!stopRequested) {
        lastTurnAt = clock.nowMillis();
        wakeupRequested.set(false);
        drainCompletions();
        startDueRetries();
        startReady();
        updatePauses();
        commits.commitIfDue();
        ConsumerRecords<byte[], byte[]> polled;
        try {
          polled = consumer.poll(pollTimeout());
        } catch (WakeupException e) {
          continue;
        }
        accept(polled);
      }
      // blocking from here on; completions need not wake anything
      wakeupRequested.set(true);
      drain.shutdown(List.copyOf(partitions.keySet()), settings.shutdownTimeout(), CANCEL_GRACE);
    } catch (RuntimeException | Error e) {
      failure = e;
      log.error("route {}: consumer failed; the route stops consuming", settings.route(), e);
      drain.abandon(List.copyOf(partitions.keySet()));
    } finally {
      closeConsumer();
      inGroup = false;
      if (failure == null) {
        log.info("route {}: stopped", settings.route());
        terminated.complete(null);
      } else {
        terminated.completeExceptionally(failure);
      }
    }
  }

  private Duration pollTimeout() {
    long until = commits.nextDueAt();
    InFlight nextRetry = retries.peek();
    if (nextRetry != null) {
      until = Math.min(until, nextRetry.retryAt);
    }
    return Duration.ofMillis(Math.max(1, Math.min(until - clock.nowMillis(), MAX_POLL_WAIT.toMillis())));
  }

  private void accept(ConsumerRecords<byte[], byte[]> polled) {
    for (TopicPartition tp : polled.partitions()) {
      PartitionWork w = partitions.get(tp);
      if (w == null) {
        // The consumer returns records of assigned partitions only; not fatal, since Kafka
        // redelivers anything this instance neither processes nor commits.
        log.error("route {}: polled records of unassigned partition {}; ignoring them", settings.route(), tp);
        continue;
      }
      for (ConsumerRecord<byte[], byte[]> r : polled.records(tp)) {
        String key = orderingKey(r);
        commits.taken(w.commits, r.offset());
        w.scheduler.submit(key, r.offset(), new Pending(r, key));
        RecordTimeline.polled(r.topic(), r.partition(), r.offset(), r.timestamp());
        outstanding++;
      }
    }
  }

  private String orderingKey(ConsumerRecord<byte[], byte[]> r) {
    try {
      return Objects.requireNonNull(processor.orderingKey(r), "orderingKey returned null");
    } catch (RuntimeException e) {
      // the contract says never; a record-specific key keeps the record in order with itself
      log.error("route {} {}-{}@{}: orderingKey failed; using the record's own key", settings.route(),
          r.topic(), r.partition(), r.offset(), e);
      return "p" + r.partition() + "o" + r.offset();
    }
  }

  /** Starts what the bounds allow, one record per partition per round, for fairness. */
  private void startReady() {
    if (stopRequested) {
      return; // a stop drains what runs; what has not started is left for redelivery
    }
    boolean progress = true;
    while (progress && running < settings.maxInFlight()) {
      progress = false;
      for (PartitionWork w : partitions.values()) {
        if (running >= settings.maxInFlight()) {
          break;
        }
        if (w.scheduler.running() < settings.maxInFlightPerPartition() && w.scheduler.hasReady()) {
          Pending p = w.scheduler.next();
          running++;
          launch(new InFlight(w, p.record(), p.key(), 1));
          progress = true;
        }
      }
    }
  }

  /**
   * The processor's {@link RecordProcessor#mayOvertake}; one that throws (a bug) keeps the order:
   * the later record waits until the parked one goes on or finishes.
   */
  private boolean mayOvertake(Pending parked, Pending later) {
    try {
      return processor.mayOvertake(parked.record(), later.record());
    } catch (RuntimeException e) {
      log.error("route {}: mayOvertake failed; the later record keeps its order", settings.route(), e);
      return false;
    }
  }

  /** Starts an attempt of a record the scheduler handed out (it already counts as running). */
  private void launch(InFlight f) {
    f.work.inFlight.put(f.record.offset(), f);
    RecordTimeline.mark(f.record.topic(), f.record.partition(), f.record.offset(), RecordTimeline.Mark.LAUNCHED);
    try {
      CompletionStage<Void> stage = Objects.requireNonNull(processor.process(f.record, f.cancel, f), "process returned null");
      stage.whenComplete((v, e) -> post(new Completion(f, e)));
    } catch (RuntimeException e) {
      post(new Completion(f, e));
    }
  }

  /** Any thread: hands an event to the poll thread and wakes it if needed. */
  private void post(Event e) {
    events.add(e);
    if (!wakeupRequested.getAndSet(true)) {
      wakeConsumer();
    }
  }

  private void wakeConsumer() {
    if (consumerClosed) {
      return;
    }
    try {
      consumer.wakeup();
    } catch (RuntimeException e) {
      // racing with close; the poll thread no longer needs waking
      log.debug("route {}: wakeup failed", settings.route(), e);
    }
  }

  private void drainCompletions() {
    Event e;
    while ((e = events.poll()) != null) {
      apply(e);
    }
  }

  private void apply(Event event) {
    if (event instanceof SlotChange sc) {
      applySlotChange(sc);
      return;
    }
    Completion c = (Completion) event;
    InFlight f = c.inFlight();
    PartitionWork w = f.work;
    long offset = f.record.offset();
    if (partitions.get(w.tp) != w || w.inFlight.get(offset) != f) {
      return; // the partition was revoked or lost meanwhile: its state is gone, nothing to record
    }
    w.inFlight.remove(offset);
    Throwable e = c.error() instanceof CompletionException && c.error().getCause() != null ? c.error().getCause() : c.error();
    if (e == null) {
      finished(f);
    } else if (f.failure == null && e instanceof CancelledException && f.cancel.isCancelled()) {
      log.debug("route {} {}@{}: cancelled; it stays uncommitted", settings.route(), w.tp, offset);
    } else {
      retryLater(f, f.failure != null ? f.failure : e);
    }
  }

  private void finished(InFlight f) {
    PartitionWork w = f.work;
    long offset = f.record.offset();
    commits.finished(w.commits, offset);
    List<Pending> others = w.scheduler.finished(f.key, offset);
    running--;
    outstanding--;
    // the running ones are marked progressed by the scheduler: they look again when they park
    for (Pending p : others) {
      InFlight g = w.inFlight.get(p.record().offset());
      if (g != null && g.nudge != null && w.scheduler.isParked(f.key, p.record().offset())) {
        nudge(g);
      }
    }
  }

  /**
   * The record's attempt failed: a processor bug, as processors finish every record or stop on
   * their cancellation. The record keeps its place (its key stays blocked, its offset uncommitted)
   * and is tried again, as a restart would.
   */
  private void retryLater(InFlight f, Throwable cause) {
    PartitionWork w = f.work;
    long offset = f.record.offset();
    // the next attempt runs until it parks again: later records of its key wait meanwhile
    w.scheduler.unpark(f.key, offset);
    Duration wait = retryBackoff.delay(f.attempt);
    f.retryAt = clock.nowMillis() + wait.toMillis();
    w.retrying.put(offset, f);
    retries.add(f);
    int heldBack = failureLog.tryAcquire();
    if (heldBack >= 0) {
      log.error("route {} {}@{}: attempt {} failed, which processors must never do (a bug); the record stays uncommitted "
          + "and is tried again in {} ms{}", settings.route(), w.tp, offset, f.attempt, wait.toMillis(),
          heldBack == 0 ? "" : " (" + heldBack + " other failures since the last report not logged)", cause);
    } else {
      log.debug("route {} {}@{}: attempt {} failed; tried again in {} ms", settings.route(), w.tp, offset, f.attempt, wait.toMillis(), cause);
    }
  }

  private void startDueRetries() {
    long now = clock.nowMillis();
    while (!stopRequested && !retries.isEmpty() && retries.peek().retryAt <= now) {
      InFlight f = retries.poll();
      PartitionWork w = f.work;
      if (partitions.get(w.tp) == w && w.retrying.remove(f.record.offset(), f)) {
        launch(new InFlight(w, f.record, f.key, f.attempt + 1));
      }
    }
  }

  private void applySlotChange(SlotChange sc) {
    InFlight f = sc.inFlight();
    PartitionWork w = f.work;
    if (partitions.get(w.tp) != w || w.inFlight.get(f.record.offset()) != f) {
      return; // revoked, or already finished: nothing to reorder any more
    }
    if (sc.nudge() == null) {
      f.nudge = null;
      w.scheduler.unpark(f.key, f.record.offset());
    } else {
      f.nudge = sc.nudge();
      w.scheduler.park(f.key, f.record.offset());
      if (w.scheduler.takeProgressed(f.key, f.record.offset())) {
        // a record of its key finished while it was deciding to wait: look again at once
        nudge(f);
      }
    }
  }

  /**
   * Runs a parked record's nudge. A nudge that throws leaves the record waiting for a wake-up that
   * may never come: its attempt is cancelled and, once it reports back, tried again.
   */
  private void nudge(InFlight f) {
    try {
      f.nudge.run();
    } catch (RuntimeException e) {
      log.error("route {} {}@{}: nudge of a parked record failed; cancelling the attempt to try it again",
          settings.route(), f.work.tp, f.record.offset(), e);
      f.nudge = null;
      f.failure = e;
      f.cancel.cancel();
    }
  }

  private void updatePauses() {
    List<PausePolicy.Load> loads = new ArrayList<>(partitions.size());
    Map<TopicPartition, PartitionStat> stats = new HashMap<>();
    for (PartitionWork w : partitions.values()) {
      loads.add(new PausePolicy.Load(w.tp, w.scheduler.outstanding(), w.commits.uncommitted()));
      stats.put(w.tp, new PartitionStat(w.commits.uncommitted(), w.commits.oldestUnfinishedTakenAt(), lag(w)));
    }
    statPaused = pausePolicy.update(outstanding, loads);
    statRunning = running;
    statHeld = outstanding;
    statPartitions = stats;
  }

  /** See {@link #lagRecords}; -1 while the log end offset or the position is not known. */
  private long lag(PartitionWork w) {
    try {
      // a local lookup; when the end offset is unknown it asks for it in the background
      OptionalLong behind = consumer.currentLag(w.tp);
      return behind.isPresent() ? behind.getAsLong() + w.commits.uncommitted() : -1;
    } catch (RuntimeException e) {
      // a statistic must never stop the route; the next turn asks again
      log.debug("route {} {}: lag not known: {}", settings.route(), w.tp, e.toString());
      return -1;
    }
  }

  private void closeConsumer() {
    consumerClosed = true;
    try {
      consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
    } catch (RuntimeException e) {
      log.warn("route {}: closing the consumer failed: {}", settings.route(), e.toString());
    }
  }

  /** Runs on the poll thread, inside {@code poll}. */
  private final class Rebalance implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
      // called after every join, also with nothing assigned
      inGroup = true;
      for (TopicPartition tp : assigned) {
        partitions.put(tp, new PartitionWork(tp, commits.assigned(tp)));
      }
      if (!assigned.isEmpty()) {
        log.info("route {}: assigned {}", settings.route(), assigned);
      }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
      List<TopicPartition> ours = revoked.stream().filter(partitions::containsKey).toList();
      if (ours.isEmpty()) {
        return;
      }
      wakeupRequested.set(true); // we block here; a wakeup would only interrupt our own commit
      drain.revoke(ours, settings.revokeTimeout());
      // completions of other partitions queued meanwhile must not wait for the poll's timeout
      wakeupRequested.set(false);
      if (!events.isEmpty() && !wakeupRequested.getAndSet(true)) {
        wakeConsumer();
      }
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> lost) {
      inGroup = false;
      List<TopicPartition> ours = lost.stream().filter(partitions::containsKey).toList();
      if (!ours.isEmpty()) {
        drain.lose(ours);
      }
    }
  }

  /** The partitions' work as {@link PartitionDrain} sees it; poll thread only. */
  private final class DrainView implements PartitionDrain.Work {
    private List<PartitionWork> works(Collection<TopicPartition> tps) {
      return tps.stream().map(partitions::get).filter(Objects::nonNull).toList();
    }

    @Override
    public int dropWaiting(Collection<TopicPartition> tps) {
      int n = 0;
      for (PartitionWork w : works(tps)) {
        n += w.scheduler.dropWaiting().size();
      }
      outstanding -= n;
      return n;
    }

    @Override
    public int running(Collection<TopicPartition> tps) {
      return works(tps).stream().mapToInt(w -> w.inFlight.size()).sum();
    }

    @Override
    public void cancel(Collection<TopicPartition> tps) {
      for (PartitionWork w : works(tps)) {
        w.retrying.clear();
        // cancel listeners may complete stages synchronously, which only enqueues completions
        for (InFlight f : List.copyOf(w.inFlight.values())) {
          f.cancel.cancel();
        }
      }
    }

    @Override
    public boolean applyNextCompletion(long nanos) throws InterruptedException {
      Event e = events.poll(nanos, TimeUnit.NANOSECONDS);
      if (e != null) {
        apply(e);
      }
      return e != null;
    }

    @Override
    public void forget(Collection<TopicPartition> tps) {
      for (PartitionWork w : works(tps)) {
        partitions.remove(w.tp);
        commits.forget(w.tp);
        pausePolicy.forget(w.tp);
        running -= w.scheduler.running();
        outstanding -= w.scheduler.outstanding();
      }
    }
  }

  private final class PartitionWork {
    final TopicPartition tp;
    final PartitionCommits.Partition commits;
    final KeyOrderedScheduler<Pending> scheduler = new KeyOrderedScheduler<>(settings.reorderWindow(), RouteConsumer.this::mayOvertake);
    /** Started records whose current attempt runs, by offset. */
    final Map<Long, InFlight> inFlight = new HashMap<>();
    /** Started records whose attempt failed, waiting to be tried again, by offset. */
    final Map<Long, InFlight> retrying = new HashMap<>();

    PartitionWork(TopicPartition tp, PartitionCommits.Partition commits) {
      this.tp = tp;
      this.commits = commits;
    }
  }

  private record Pending(ConsumerRecord<byte[], byte[]> record, String key) {}

  /** @param lag -1 when not known */
  private record PartitionStat(int uncommitted, long oldestUnfinishedTakenAt, long lag) {}

  /** One attempt of a started record; its {@link OrderSlot} posts to the poll thread. */
  private final class InFlight implements OrderSlot {
    final PartitionWork work;
    final ConsumerRecord<byte[], byte[]> record;
    final String key;
    final int attempt;
    final Cancellation cancel = new Cancellation();
    /** Poll thread only: what the record asked to be nudged with when it last parked; null once it went on. */
    Runnable nudge;
    /** Poll thread only: the pipeline failed this attempt (its nudge threw) and cancelled it. */
    Throwable failure;
    /** Poll thread only: when a failed attempt is tried again (clock millis). */
    long retryAt;

    InFlight(PartitionWork work, ConsumerRecord<byte[], byte[]> record, String key, int attempt) {
      this.work = work;
      this.record = record;
      this.key = key;
      this.attempt = attempt;
    }

    long retryAt() {
      return retryAt;
    }

    @Override
    public void park(Runnable onNudge) {
      post(new SlotChange(this, Objects.requireNonNull(onNudge, "nudge")));
    }

    @Override
    public void unpark() {
      post(new SlotChange(this, null));
    }
  }

  private sealed interface Event permits Completion, SlotChange {}

  private record Completion(InFlight inFlight, Throwable error) implements Event {}

  /** {@code nudge == null}: unpark. */
  private record SlotChange(InFlight inFlight, Runnable nudge) implements Event {}
}
