package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.api.GuardService;
import dev.onceguard.proxy.api.PullHub;
import dev.onceguard.proxy.dispatch.Dispatcher;
import io.grpc.BindableService;
import java.util.List;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.escalate.Escalator;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.guard.GuardedProcessor;
import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.RedisIdempotencyCache;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.time.ExecutorScheduler;
import dev.onceguard.proxy.trace.Tracing;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Verdict;
import java.util.HexFormat;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The guard's resources for one sidecar process: the MySQL pool (schema migrated on start when
 * enabled), the Redis L1 client, the {@link Guard}, and the escalation producer. Owns and closes
 * all of them; close it after the sidecar's consumers stopped.
 *
 * <p>The owner id is {@code <instance-id>/<random>}: unique per process run, so a restarted pod
 * never mistakes its predecessor's claims for its own.
 */
public final class GuardRuntime implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(GuardRuntime.class);

  private final SidecarConfig config;
  private final Guard guard;
  private final MysqlGuardStore store;
  /** The store's connections (owned through {@link #store}). */
  private final Db db;
  private final Escalator escalator;
  private final PullHub pullHub;
  /** Pull-mode handler timeouts and Guard API lease ends. */
  private final ExecutorScheduler apiTimer;
  private final IdempotencyCache cache;
  private final java.util.concurrent.ScheduledExecutorService housekeeping;
  private final GuardService guardService;
  private final Tracing tracing;
  private final java.util.concurrent.atomic.AtomicLong heartbeatFailures = new java.util.concurrent.atomic.AtomicLong();

  /** Without tracing. */
  public GuardRuntime(SidecarConfig config, Clock clock) {
    this(config, clock, Tracing.off());
  }

  /** With {@code tracing} for the guarded processors; it stays the caller's to close (after this). */
  public GuardRuntime(SidecarConfig config, Clock clock, Tracing tracing) {
    this.config = config;
    this.tracing = tracing;
    String owner = config.instanceId() + "/" + HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong()).substring(0, 10);
    Db d = new Db(config.mysql(), storeQueueBound(config));
    try {
      if (config.mysql().migrateOnStart()) {
        int v = new Migrations(d, config.mysql().tablePrefix()).migrate();
        log.info("MySQL schema at version {} ({})", v, config.mysql());
      } else {
        new Migrations(d, config.mysql().tablePrefix()).requireCurrent();
      }
    } catch (RuntimeException e) {
      d.close();
      throw e;
    }
    this.store = new MysqlGuardStore(d, config.mysql().tablePrefix(), MysqlGuardStore.groupSlots(config.mysql().poolSize()));
    this.cache = config.redis().enabled() ? new RedisIdempotencyCache(config.redis(), ledgerId(store, config), clock)
        : IdempotencyCache.DISABLED;
    if (!config.redis().enabled()) {
      log.info("redis.uri not set: L1 cache disabled (correct, but every replay costs a MySQL round trip)");
    }
    this.db = d;
    this.guard = new Guard(store, this.cache, config.machines(), config.routes(), clock, owner);
    this.escalator = new Escalator(config.kafka().bootstrapServers(), config.kafka().properties(), "onceguard-escalator-" + config.instanceId());
    this.apiTimer = new ExecutorScheduler("onceguard-api-timer");
    this.pullHub = new PullHub(config, apiTimer);
    // the decision log is bounded: rows older than mysql.decision-retention go, in small batches
    this.housekeeping = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "onceguard-housekeeping");
      t.setDaemon(true);
      return t;
    });
    // liveness per owner: a crash is noticed Guard.OWNER_TTL after the last heartbeat
    awaitFirstHeartbeat();
    housekeeping.scheduleWithFixedDelay(this::heartbeat, Guard.HEARTBEAT_EVERY.toMillis(), Guard.HEARTBEAT_EVERY.toMillis(),
        java.util.concurrent.TimeUnit.MILLISECONDS);
    long retention = config.mysql().decisionRetention().toMillis();
    housekeeping.scheduleWithFixedDelay(() -> purge(clock.nowMillis() - retention, 0), 1, 10, java.util.concurrent.TimeUnit.MINUTES);
    if (cache instanceof RedisIdempotencyCache redis) {
      housekeeping.scheduleWithFixedDelay(() -> followLedgerId(redis), LEDGER_ID_CHECK_SECONDS, LEDGER_ID_CHECK_SECONDS,
          java.util.concurrent.TimeUnit.SECONDS);
    }
    this.guardService = new GuardService(config, guard, apiTimer);
    log.info("guard ready: owner {}", owner);
  }

  /**
   * Store steps that may wait at once (each of the store's queues holds at most this many): the
   * worst case of every bounded caller together, so that a step is refused only when a caller's own
   * bound failed. A pipeline record has at most two steps queued (a lease renewal beside its claim,
   * confirm or abort), an admitted Guard API call one, the decision log one per slot, housekeeping
   * one, and a few more for the readiness probe and margin.
   */
  static int storeQueueBound(SidecarConfig config) {
    long records = config.routes().stream().mapToLong(r -> r.intake().maxInFlight()).sum();
    long steps = 2 * records + 2L * GuardService.callBound(config) + Guard.DECISION_LOG_SLOTS + config.mysql().poolSize() + 16;
    return (int) Math.min(Integer.MAX_VALUE, steps);
  }

  /** How often the ledger id is read again, so that L1 follows a database created again under a running process. */
  static final long LEDGER_ID_CHECK_SECONDS = 10;

  /**
   * The ledger id that scopes the L1 keys, read at start. Without it no L1 key can be told to be
   * this ledger's, so the process does not start (the schema predates it: run the migration).
   */
  private static String ledgerId(MysqlGuardStore store, SidecarConfig config) {
    try {
      String id = store.ledgerId().toCompletableFuture().get(30, java.util.concurrent.TimeUnit.SECONDS);
      log.info("ledger id {}: L1 keys are {}{}:<route>:<dedup key>", id, config.redis().keyPrefix(), id);
      return id;
    } catch (Exception e) {
      store.close();
      Throwable cause = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null ? e.getCause() : e;
      throw new IllegalStateException("could not read the ledger id from " + config.mysql().tablePrefix() + "ledger_id, which scopes "
          + "the Redis L1 keys (schema version 4; run the migration: mysql.migrate-on-start or `onceguard.jar migrate`): " + cause, cause);
    }
  }

  private void followLedgerId(RedisIdempotencyCache redis) {
    store.ledgerId().whenComplete((id, e) -> {
      if (e == null && !id.equals(redis.ledgerId())) {
        log.warn("the ledger id changed from {} to {} (the database was created again, or a new id was drawn after a restore): "
            + "L1 now reads and writes the keys of the new one only", redis.ledgerId(), id);
        redis.ledgerId(id);
      }
    });
  }

  private void awaitFirstHeartbeat() {
    try {
      guard.heartbeat().toCompletableFuture().get(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (Exception e) {
      // not fatal: without a live owner row, this process's claims are judged by their leases alone
      log.warn("first owner heartbeat failed (retried every {}): {}", Guard.HEARTBEAT_EVERY, e.toString());
    }
  }

  private void heartbeat() {
    guard.heartbeat().whenComplete((x, e) -> {
      if (e != null && heartbeatFailures.incrementAndGet() % 30 == 1) {
        log.warn("owner heartbeat failed ({} so far; claims of a process that cannot heartbeat may be taken over): {}",
            heartbeatFailures.get(), e.toString());
      }
    });
  }

  /** Deletes old decisions in batches until a batch comes back short (or 100 batches ran). */
  private void purge(long before, int batches) {
    guard.store().purgeDecisions(before).whenComplete((n, e) -> {
      if (e != null) {
        log.warn("decision log purge failed (retried later): {}", e.toString());
      } else if (n >= 10_000 && batches < 100) {
        purge(before, batches + 1);
      } else if (n > 0 || batches > 0) {
        log.info("purged decision log rows older than {} ({} batches)", config.mysql().decisionRetention(), batches + 1);
      }
    });
  }

  /**
   * The guard's counters: per route L1 outcomes (and whether L1 is available) and failed writes to
   * the escalation and verdict topics; for the process, MySQL round trips, claim and confirm groups,
   * contention retries, queued and refused store steps, and Guard API calls in flight and refused.
   */
  public void registerMetrics(Metrics m) {
    for (RouteConfig rc : config.routes()) {
      String route = rc.name();
      if (cache instanceof RedisIdempotencyCache r) {
        RedisIdempotencyCache.Counts n = r.counts(route);
        m.counter("onceguard.l1.hits", "L1 lookups that found the key with the same fingerprint", n::hits, "route", route);
        m.counter("onceguard.l1.misses", "L1 lookups that did not", n::misses, "route", route);
        m.counter("onceguard.l1.failures", "L1 calls that failed or timed out (the layer was skipped)", n::failures, "route", route);
        m.counter("onceguard.l1.skipped", "L1 calls not attempted: breaker open or Redis unreachable", n::skipped, "route", route);
      }
      for (Escalator.Kind kind : Escalator.Kind.values()) {
        m.counter("onceguard.escalation.send.failures",
            "failed writes to the route's escalation topic (kind ESCALATION) or verdict topic (VERDICT); each is retried, "
                + "and its record stays unfinished meanwhile",
            () -> escalator.failedWrites(route, kind), "route", route, "kind", kind.name());
      }
    }
    if (cache instanceof RedisIdempotencyCache r) {
      m.gauge("onceguard.l1.available", "1 while L1 is used, 0 from a failed Redis call until one succeeds (L1 skipped)",
          () -> r.available() ? 1 : 0);
    }
    m.counter("onceguard.mysql.round.trips", "round trips to MySQL: statements sent, BEGIN/COMMIT included, statements sent together counted once", db::roundTrips);
    m.counter("onceguard.mysql.claim.groups", "claim transactions (group commit: claims ready together share one)", () -> store.groupCounts()[0]);
    m.counter("onceguard.mysql.claim.grouped", "claims written by those transactions", () -> store.groupCounts()[1]);
    m.counter("onceguard.mysql.confirm.groups", "confirm transactions (group commit)", () -> store.groupCounts()[2]);
    m.counter("onceguard.mysql.confirm.grouped", "confirms written by those transactions", () -> store.groupCounts()[3]);
    m.counter("onceguard.mysql.contention.retries", "store steps run again after a deadlock or lock-wait timeout (not an outage)",
        guard::contentionRetries);
    m.gauge("onceguard.mysql.queued.steps", "store steps waiting: claims, confirms and decision-log entries waiting for a group,"
        + " and steps waiting for a connection", store::queuedSteps);
    m.counter("onceguard.mysql.refused.steps", "store steps refused at a queue's bound (each failed as an outage and was retried"
        + " by its caller); 0 unless a caller's own bound failed", store::refusedSteps);
    m.gauge("onceguard.api.in.flight", "Guard API calls admitted and not answered yet (Submit, Explain and Complete)",
        guardService::inFlight);
    String[] methods = {"Submit", "Complete", "Explain"};
    for (int i = 0; i < methods.length; i++) {
      int k = i;
      m.counter("onceguard.api.refused.calls", "Guard API calls answered RESOURCE_EXHAUSTED (with a retry-after) because the"
          + " bound of calls in flight was reached", () -> guardService.refusedCalls()[k], "method", methods[i]);
    }
  }

  /**
   * One statement to MySQL, for readiness: the owner heartbeat, which runs on the store's control
   * connection (claims cannot starve it) and only refreshes this live process's owner row. Not to
   * be called after {@link #close()}: it would make a retired owner look alive again for a while.
   */
  public synchronized java.util.concurrent.CompletionStage<Void> pingMysql() {
    // one at a time: probes and the health timer ask every few seconds, and during a MySQL stall
    // each ping waits up to the socket timeout on the heartbeat's own connection; queued up, they
    // would delay the real heartbeat behind them
    if (ping == null || ping.isDone()) {
      ping = guard.heartbeat().toCompletableFuture();
    }
    return ping.copy();
  }

  private java.util.concurrent.CompletableFuture<Void> ping;

  public Guard guard() {
    return guard;
  }

  public Escalator escalator() {
    return escalator;
  }

  /**
   * Guarded processors, reporting verdicts to {@code listener}: push routes call the business
   * through the route's dispatcher, pull routes through the {@link PullHub}.
   */
  public ProcessorFactory processors(VerdictListener listener) {
    return ctx -> {
      RouteConfig route = ctx.route();
      // pull routes: escalations also reach subscribers that asked for notices, once written
      VerdictListener withNotices = new VerdictListener() {
        @Override
        public void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict verdict, boolean forwarded) {
          if (verdict.getDisposition() == Disposition.ILLEGAL_TRANSITION_ESCALATE) {
            pullHub.escalated(route.name(), record, verdict);
          }
          listener.onVerdict(record, verdict, forwarded);
        }

        @Override
        public void onStep(String routeName, Step step, long nanos) {
          listener.onStep(routeName, step, nanos);
        }
      };
      Dispatcher d = route.delivery().mode() == RouteConfig.Mode.PULL ? pullHub.dispatcher(route.name()) : ctx.dispatcher();
      return new GuardedProcessor(route, route.machine() == null ? null : config.machines().get(route.machine()), guard,
          d, escalator, ctx.scheduler(), Backoff.of(route.name(), route.delivery().retry()), ctx.deliveryIds(),
          route.delivery().mode() == RouteConfig.Mode.PULL ? withNotices : listener, tracing);
    };
  }

  /** The sidecar's own gRPC services: {@code Guard} and {@code Deliveries}. */
  public List<BindableService> services() {
    return List.of(guardService, pullHub);
  }

  public PullHub pullHub() {
    return pullHub;
  }

  @Override
  public void close() {
    housekeeping.shutdownNow();
    try {
      // claims left behind (a drain that ran out of time) may be taken over at once
      guard.retire().toCompletableFuture().get(5, java.util.concurrent.TimeUnit.SECONDS);
    } catch (Exception e) {
      log.warn("could not retire owner {} (its claims expire with its heartbeat instead): {}", guard.owner(), e.toString());
    }
    try {
      pullHub.close();
      apiTimer.close();
      escalator.close();
    } finally {
      guard.close(); // closes the cache and the store (and with it the pool)
    }
  }
}
