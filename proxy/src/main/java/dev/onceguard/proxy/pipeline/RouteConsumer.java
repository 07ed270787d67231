package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
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
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka intake of one route: one thread that owns the route's consumer, feeds records to the
 * {@link RecordProcessor} in per-key order, bounds what is in flight, and commits only finished
 * prefixes.
 *
 * <h2>Threading</h2>
 * Everything except {@link #start}, {@link #requestStop}, {@link #close} and {@link #terminated}
 * runs on the route's <em>poll thread</em>, which alone touches the consumer (KafkaConsumer is
 * single-threaded) and all partition state, without locks. The processor's stages complete on
 * other threads; their completions are handed to the poll thread through a queue, and the poll is
 * woken with {@link Consumer#wakeup()} — at most once per loop iteration (a flag coalesces
 * completions), so a busy route pays one wakeup per batch, not per record. A wakeup rather than a
 * short poll timeout because a record whose key has a successor must hand over to it at once:
 * with a 100 ms poll, a hot key would be limited to ten records a second. The rare
 * {@link WakeupException} that lands in a commit is retried.
 *
 * <h2>Ordering and bounds</h2>
 * Per partition, a {@link KeyOrderedScheduler} runs records of one ordering key one at a time in
 * offset order; different keys run concurrently, at most {@code maxInFlightPerPartition} per
 * partition and {@code maxInFlight} per route. A record that waits for a successor transition
 * parks itself through its {@link OrderSlot}; then later records of its key may start, up to
 * {@code reorderWindow} started records per key, and every record of the key that finishes
 * nudges the parked ones, so a swapped pair heals at once instead of after a retry delay. A record
 * polled while its key is busy or the bounds are reached waits in memory. A partition is paused
 * once it holds {@code maxInFlightPerPartition} records (running plus waiting), all partitions once
 * the route holds {@code maxInFlight}; they resume below. As one poll returns at most {@code max.poll.records} (set to the per-partition
 * bound, see {@link ConsumerProperties}), memory stays below {@code maxInFlight + max.poll.records}
 * records. Nothing is dropped or skipped.
 *
 * <h2>Offsets</h2>
 * An {@link OffsetTracker} per partition yields the lowest unfinished offset (or, when nothing is
 * unfinished, the consumer's position, so idle partitions are committed too); that is committed
 * with {@code commitAsync} every {@code commitInterval}, and with {@code commitSync} when
 * partitions are revoked and at shutdown. A record whose processing failed with anything but
 * {@link CancelledException} is a processor bug: it is logged at ERROR and stays unfinished, so
 * nothing at or after it is committed (its key stays blocked) until a restart or rebalance.
 *
 * <h2>Rebalance and shutdown</h2>
 * On revocation: waiting records of those partitions are dropped, running ones are cancelled
 * ({@link Cancellation}) and awaited up to {@code revokeTimeout}, the finished prefix is committed
 * synchronously, and their state is forgotten (late completions are ignored). On loss: cancelled
 * and forgotten, nothing committed. On {@link #requestStop}: no new record starts, running ones get
 * up to {@code shutdownTimeout} to finish, the rest are cancelled, the prefix is committed, and the
 * consumer is closed.
 *
 * <p>Ownership: takes ownership of the consumer (closes it); uses, does not own, the processor.
 */
public final class RouteConsumer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(RouteConsumer.class);

  /** How long cancelled work gets to report back before it is abandoned. */
  static final Duration CANCEL_GRACE = Duration.ofSeconds(2);
  static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(10);
  static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);
  /** Longest poll: bounds how late a periodic commit can be when nothing else wakes the loop. */
  static final Duration MAX_POLL_WAIT = Duration.ofSeconds(1);

  /**
   * The pipeline's settings for one route.
   *
   * @param revokeTimeout how long revocation waits for cancelled work before abandoning it; the
   *     group's rebalance waits for it, so keep it short
   */
  public record Settings(
      String route,
      List<String> topics,
      int maxInFlightPerPartition,
      int maxInFlight,
      Duration commitInterval,
      Duration shutdownTimeout,
      Duration revokeTimeout,
      int reorderWindow) {
    public static final Duration DEFAULT_REVOKE_TIMEOUT = Duration.ofSeconds(5);

    public Settings {
      topics = List.copyOf(topics);
      if (maxInFlightPerPartition < 1 || maxInFlight < 1 || reorderWindow < 1) {
        throw new IllegalArgumentException("in-flight bounds and the reorder window must be positive");
      }
    }

    public static Settings of(SidecarConfig sidecar, RouteConfig route) {
      Duration revoke = DEFAULT_REVOKE_TIMEOUT.compareTo(sidecar.shutdownTimeout()) < 0
          ? DEFAULT_REVOKE_TIMEOUT
          : sidecar.shutdownTimeout();
      return new Settings(route.name(), route.topics(), route.maxInFlightPerPartition(), route.maxInFlight(),
          sidecar.commitInterval(), sidecar.shutdownTimeout(), revoke, route.reorderWindow());
    }
  }

  private final Settings settings;
  private final Consumer<byte[], byte[]> consumer;
  private final RecordProcessor processor;
  private final Clock clock;
  private final Thread thread;
  /** Completions and slot changes, from any thread to the poll thread. */
  private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();
  /** True while a wakeup is pending or unnecessary; completions wake the poll only when false. */
  private final AtomicBoolean wakeupRequested = new AtomicBoolean();
  private final CompletableFuture<Void> terminated = new CompletableFuture<>();
  private final AtomicBoolean started = new AtomicBoolean();
  private volatile boolean stopRequested;
  private volatile boolean consumerClosed;
  /** For metrics, written by the poll thread once per loop. */
  private volatile int statRunning;
  private volatile int statHeld;
  private volatile int statPaused;

  // ---- poll-thread state
  private final Map<TopicPartition, PartitionWork> partitions = new LinkedHashMap<>();
  /** Records started and not finished, summed over partitions (cancelled and failed ones count). */
  private int running;
  /** Records held (waiting plus running), summed over partitions. */
  private int outstanding;
  private long nextCommitAt;

  /**
   * @param consumer a consumer configured with {@link ConsumerProperties}, not yet subscribed; this
   *     object owns it from now on
   */
  public RouteConsumer(Settings settings, Consumer<byte[], byte[]> consumer, RecordProcessor processor, Clock clock) {
    this.settings = settings;
    this.consumer = consumer;
    this.processor = processor;
    this.clock = clock;
    this.thread = new Thread(this::run, "onceguard-route-" + settings.route());
  }

  /** Subscribes and starts the poll thread. Once only. */
  public void start() {
    if (!started.compareAndSet(false, true)) {
      throw new IllegalStateException("route " + settings.route() + ": already started");
    }
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
    Duration bound = settings.shutdownTimeout().plus(CANCEL_GRACE).plus(COMMIT_TIMEOUT).plus(CLOSE_TIMEOUT).plusSeconds(5);
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

  // ------------------------------------------------------------------------------------------
  // poll thread

  private void run() {
    Throwable failure = null;
    try {
      consumer.subscribe(settings.topics(), new Rebalance());
      log.info("route {}: consuming {} (in flight at most {} per partition, {} in total)",
          settings.route(), settings.topics(), settings.maxInFlightPerPartition(), settings.maxInFlight());
      nextCommitAt = clock.nowMillis() + settings.commitInterval().toMillis();
      while (!stopRequested) {
        wakeupRequested.set(false);
        drainCompletions();
        startReady();
        updatePauses();
        commitIfDue();
        ConsumerRecords<byte[], byte[]> polled;
        try {
          polled = consumer.poll(pollTimeout());
        } catch (WakeupException e) {
          continue;
        }
        accept(polled);
      }
      drainForShutdown();
    } catch (RuntimeException | Error e) {
      failure = e;
      log.error("route {}: consumer failed; the route stops consuming", settings.route(), e);
      abandonAfterFailure();
    } finally {
      closeConsumer();
      if (failure == null) {
        log.info("route {}: stopped", settings.route());
        terminated.complete(null);
      } else {
        terminated.completeExceptionally(failure);
      }
    }
  }

  private Duration pollTimeout() {
    long untilCommit = nextCommitAt - clock.nowMillis();
    return Duration.ofMillis(Math.max(1, Math.min(untilCommit, MAX_POLL_WAIT.toMillis())));
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
        w.offsets.track(r.offset());
        w.scheduler.submit(key, r.offset(), new Pending(r, key));
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
          start(w, w.scheduler.next());
          progress = true;
        }
      }
    }
  }

  private void start(PartitionWork w, Pending p) {
    InFlight f = new InFlight(w, p.record(), p.key());
    w.inFlight.put(p.record().offset(), f);
    running++;
    CompletionStage<Void> stage;
    try {
      stage = Objects.requireNonNull(processor.process(p.record(), f.cancel(), f), "process returned null");
    } catch (RuntimeException e) {
      stage = CompletableFuture.failedFuture(e);
    }
    stage.whenComplete((v, e) -> completed(f, e));
  }

  /** Any thread: hands a completion to the poll thread. */
  private void completed(InFlight f, Throwable error) {
    post(new Completion(f, error));
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
    PartitionWork w = f.work();
    long offset = f.record().offset();
    w.inFlight.remove(offset);
    if (partitions.get(w.tp) != w) {
      return; // the partition was revoked or lost meanwhile: its state is gone, nothing to record
    }
    Throwable e = c.error() instanceof CompletionException && c.error().getCause() != null ? c.error().getCause() : c.error();
    if (e == null) {
      w.offsets.complete(offset);
      List<Pending> others = w.scheduler.finished(f.key(), offset);
      running--;
      outstanding--;
      for (Pending p : others) {
        InFlight g = w.inFlight.get(p.record().offset());
        if (g == null) {
          continue;
        }
        if (g.nudge != null) {
          nudge(g);
        } else {
          // it may be about to park on a state this record just changed: nudge it when it does
          g.progressed = true;
        }
      }
    } else if (e instanceof CancelledException && f.cancel().isCancelled()) {
      log.debug("route {} {}@{}: cancelled; it stays uncommitted", settings.route(), w.tp, offset);
    } else {
      log.error("route {} {}@{}: processing failed, which processors must never do (a bug); the record stays "
          + "unfinished and its key blocked, so nothing from this offset on is committed until a restart or rebalance",
          settings.route(), w.tp, offset, e);
    }
  }

  private void applySlotChange(SlotChange sc) {
    InFlight f = sc.inFlight();
    PartitionWork w = f.work();
    if (partitions.get(w.tp) != w || w.inFlight.get(f.record().offset()) != f) {
      return; // revoked, or already finished: nothing to reorder any more
    }
    if (sc.nudge() == null) {
      f.nudge = null;
      w.scheduler.unpark(f.key(), f.record().offset());
    } else {
      f.nudge = sc.nudge();
      w.scheduler.park(f.key(), f.record().offset());
      if (f.progressed) {
        // a record of its key finished while it was deciding to wait: look again at once
        f.progressed = false;
        nudge(f);
      }
    }
  }

  private void nudge(InFlight f) {
    if (f == null || f.nudge == null) {
      return;
    }
    try {
      f.nudge.run();
    } catch (RuntimeException e) {
      log.error("route {} {}@{}: nudge of a parked record failed", settings.route(), f.work().tp, f.record().offset(), e);
    }
  }

  /** Records started and not finished (parked ones included), as of the poll loop's last turn. Any thread. */
  public int running() {
    return statRunning;
  }

  /** Records held in memory, started or waiting to start. Any thread. */
  public int held() {
    return statHeld;
  }

  /** Partitions paused because their in-flight bound (or the route's) is reached. Any thread. */
  public int pausedPartitions() {
    return statPaused;
  }

  private void updatePauses() {
    boolean routeFull = outstanding >= settings.maxInFlight();
    List<TopicPartition> pause = new ArrayList<>();
    List<TopicPartition> resume = new ArrayList<>();
    int paused = 0;
    for (PartitionWork w : partitions.values()) {
      boolean full = routeFull || w.scheduler.outstanding() >= settings.maxInFlightPerPartition();
      if (full != w.paused) {
        (full ? pause : resume).add(w.tp);
        w.paused = full;
      }
      paused += full ? 1 : 0;
    }
    if (!pause.isEmpty()) {
      consumer.pause(pause);
      log.debug("route {}: paused {} (route holds {} records)", settings.route(), pause, outstanding);
    }
    if (!resume.isEmpty()) {
      consumer.resume(resume);
      log.debug("route {}: resumed {} (route holds {} records)", settings.route(), resume, outstanding);
    }
    statRunning = running;
    statHeld = outstanding;
    statPaused = paused;
  }

  private void commitIfDue() {
    long now = clock.nowMillis();
    if (now < nextCommitAt) {
      return;
    }
    nextCommitAt = now + settings.commitInterval().toMillis();
    Map<TopicPartition, OffsetAndMetadata> offsets = commitCandidates(partitions.values(), false);
    if (!offsets.isEmpty()) {
      consumer.commitAsync(offsets, (done, error) -> {
        // runs on the poll thread, inside a later poll or commit
        if (error == null) {
          acknowledged(done);
          log.debug("route {}: committed {}", settings.route(), done);
          return;
        }
        log.warn("route {}: commit of {} failed ({}); retrying at the next interval", settings.route(), offsetsText(done), error.toString());
        forgetSent(done);
      });
    }
  }

  /**
   * The offsets to commit; marks them sent. Periodic commits skip what was already sent; final
   * (synchronous) commits only skip what the broker acknowledged, since an async commit still on
   * its way may yet fail.
   */
  private Map<TopicPartition, OffsetAndMetadata> commitCandidates(Collection<PartitionWork> ws, boolean sync) {
    Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
    for (PartitionWork w : ws) {
      long o = commitOffsetOf(w);
      if (o >= 0 && o > (sync ? w.lastCommitAcked : w.lastCommitSent)) {
        out.put(w.tp, new OffsetAndMetadata(o));
        w.lastCommitSent = o;
      }
    }
    return out;
  }

  /**
   * The lowest unfinished offset; or, when everything polled from the partition is finished, the
   * consumer's position. The position also covers a partition that never had a record (so the
   * group's position is pinned even for an idle partition) and offsets after the last record that
   * hold no record for us (transaction markers), which would otherwise show as lag forever.
   */
  private long commitOffsetOf(PartitionWork w) {
    long o = w.offsets.commitOffset();
    if (w.offsets.size() == 0) {
      try {
        // a local lookup once the position is initialised; zero timeout: never wait for it here
        o = Math.max(o, consumer.position(w.tp, Duration.ZERO));
      } catch (KafkaException e) {
        // position not known yet (still being reset): commit what the tracker knows, if anything
      }
    }
    return o;
  }

  private void acknowledged(Map<TopicPartition, OffsetAndMetadata> offsets) {
    offsets.forEach((tp, om) -> {
      PartitionWork w = partitions.get(tp);
      if (w != null) {
        w.lastCommitAcked = Math.max(w.lastCommitAcked, om.offset());
      }
    });
  }

  private void forgetSent(Map<TopicPartition, OffsetAndMetadata> offsets) {
    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
      PartitionWork w = partitions.get(e.getKey());
      if (w != null && w.lastCommitSent == e.getValue().offset()) {
        w.lastCommitSent = -1;
      }
    }
  }

  /** Commits the finished prefixes of {@code ws} and waits for the answer; never throws. */
  private void commitSync(Collection<PartitionWork> ws, String why) {
    Map<TopicPartition, OffsetAndMetadata> offsets = commitCandidates(ws, true);
    if (offsets.isEmpty()) {
      return;
    }
    for (int attempt = 1; ; attempt++) {
      try {
        consumer.commitSync(offsets, COMMIT_TIMEOUT);
        acknowledged(offsets);
        log.info("route {}: committed {} ({})", settings.route(), offsetsText(offsets), why);
        return;
      } catch (WakeupException e) {
        // a completion or a stop request woke the consumer; that is no reason to skip the commit
        if (attempt >= 3) {
          log.warn("route {}: commit of {} ({}) kept being woken up; giving up", settings.route(), offsetsText(offsets), why);
          forgetSent(offsets);
          return;
        }
      } catch (KafkaException e) {
        log.warn("route {}: commit of {} ({}) failed: {}; records after the last committed offsets will be delivered again",
            settings.route(), offsetsText(offsets), why, e.toString());
        forgetSent(offsets);
        return;
      }
    }
  }

  private static String offsetsText(Map<TopicPartition, OffsetAndMetadata> offsets) {
    StringBuilder sb = new StringBuilder("{");
    offsets.entrySet().stream()
        .sorted(Map.Entry.comparingByKey((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic())))
        .forEach(e -> sb.append(sb.length() > 1 ? ", " : "").append(e.getKey()).append('=').append(e.getValue().offset()));
    return sb.append('}').toString();
  }

  /**
   * Applies completions until no record of {@code ws} runs or the time is up.
   *
   * @return true if none runs any more
   */
  private boolean awaitInFlight(Collection<PartitionWork> ws, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (ws.stream().anyMatch(w -> !w.inFlight.isEmpty())) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      Event c;
      try {
        c = events.poll(left, TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
      if (c != null) {
        apply(c);
      }
    }
    return true;
  }

  private static int inFlight(Collection<PartitionWork> ws) {
    return ws.stream().mapToInt(w -> w.inFlight.size()).sum();
  }

  private int dropWaiting(PartitionWork w) {
    int n = w.scheduler.dropWaiting().size();
    outstanding -= n;
    return n;
  }

  private static void cancelAll(Collection<PartitionWork> ws) {
    for (PartitionWork w : ws) {
      // cancel listeners may complete stages synchronously, which only enqueues completions
      for (InFlight f : List.copyOf(w.inFlight.values())) {
        f.cancel().cancel();
      }
    }
  }

  private void forget(PartitionWork w) {
    partitions.remove(w.tp);
    running -= w.scheduler.running();
    outstanding -= w.scheduler.outstanding();
  }

  private void drainForShutdown() {
    // blocking from here on; completions need not wake anything
    wakeupRequested.set(true);
    List<PartitionWork> all = List.copyOf(partitions.values());
    int dropped = all.stream().mapToInt(this::dropWaiting).sum();
    log.info("route {}: stopping; waiting up to {} for {} records in flight ({} not started are left for redelivery)",
        settings.route(), settings.shutdownTimeout(), inFlight(all), dropped);
    if (!awaitInFlight(all, settings.shutdownTimeout())) {
      log.warn("route {}: {} records still in flight after {}; cancelling them (they will be delivered again)",
          settings.route(), inFlight(all), settings.shutdownTimeout());
      cancelAll(all);
      if (!awaitInFlight(all, CANCEL_GRACE)) {
        log.warn("route {}: abandoning {} records that did not stop within {}", settings.route(), inFlight(all), CANCEL_GRACE);
      }
    }
    commitSync(all, "shutdown");
    all.forEach(this::forget);
  }

  private void abandonAfterFailure() {
    List<PartitionWork> all = List.copyOf(partitions.values());
    try {
      cancelAll(all);
      // the finished prefix is still right to commit, if the consumer still can
      drainCompletions();
      commitSync(all, "after failure");
    } catch (RuntimeException e) {
      log.warn("route {}: could not commit after the failure: {}", settings.route(), e.toString());
    }
    all.forEach(this::forget);
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
      for (TopicPartition tp : assigned) {
        partitions.put(tp, new PartitionWork(tp));
      }
      if (!assigned.isEmpty()) {
        log.info("route {}: assigned {}", settings.route(), assigned);
      }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
      List<PartitionWork> ws = revoked.stream().map(partitions::get).filter(Objects::nonNull).toList();
      if (ws.isEmpty()) {
        return;
      }
      wakeupRequested.set(true); // we block here; a wakeup would only interrupt our own commit
      int dropped = ws.stream().mapToInt(RouteConsumer.this::dropWaiting).sum();
      int cancelled = inFlight(ws);
      cancelAll(ws);
      awaitInFlight(ws, settings.revokeTimeout());
      int abandoned = inFlight(ws);
      commitSync(ws, "revoked");
      ws.forEach(RouteConsumer.this::forget);
      log.info("route {}: revoked {}: cancelled {} in flight ({} abandoned after {}), left {} not started for the next owner",
          settings.route(), revoked, cancelled, abandoned, settings.revokeTimeout(), dropped);
      // completions of other partitions queued meanwhile must not wait for the poll's timeout
      wakeupRequested.set(false);
      if (!events.isEmpty() && !wakeupRequested.getAndSet(true)) {
        wakeConsumer();
      }
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> lost) {
      List<PartitionWork> ws = lost.stream().map(partitions::get).filter(Objects::nonNull).toList();
      if (ws.isEmpty()) {
        return;
      }
      int cancelled = inFlight(ws);
      cancelAll(ws);
      ws.forEach(RouteConsumer.this::forget);
      log.warn("route {}: lost {} (the group moved on without us): cancelled {} in flight, committed nothing",
          settings.route(), lost, cancelled);
    }
  }

  private final class PartitionWork {
    final TopicPartition tp;
    final OffsetTracker offsets = new OffsetTracker();
    final KeyOrderedScheduler<Pending> scheduler = new KeyOrderedScheduler<>(settings.reorderWindow());
    final Map<Long, InFlight> inFlight = new HashMap<>();
    boolean paused;
    /** Highest offset handed to a commit (async or sync); -1 after a failed commit. */
    long lastCommitSent = -1;
    /** Highest offset the broker confirmed as committed by us. */
    long lastCommitAcked = -1;

    PartitionWork(TopicPartition tp) {
      this.tp = tp;
    }
  }

  private record Pending(ConsumerRecord<byte[], byte[]> record, String key) {}

  /** A started record; its {@link OrderSlot} posts to the poll thread. */
  private final class InFlight implements OrderSlot {
    final PartitionWork work;
    final ConsumerRecord<byte[], byte[]> record;
    final String key;
    final Cancellation cancel = new Cancellation();
    /** Poll thread only: set while the record is parked. */
    Runnable nudge;
    /** Poll thread only: a record of the same key finished while this one was not parked. */
    boolean progressed;

    InFlight(PartitionWork work, ConsumerRecord<byte[], byte[]> record, String key) {
      this.work = work;
      this.record = record;
      this.key = key;
    }

    PartitionWork work() {
      return work;
    }

    ConsumerRecord<byte[], byte[]> record() {
      return record;
    }

    String key() {
      return key;
    }

    Cancellation cancel() {
      return cancel;
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
