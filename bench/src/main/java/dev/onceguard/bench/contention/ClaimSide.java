package dev.onceguard.bench.contention;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.ContentionException;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.GuardStore.ClaimCommand;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.Source;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The sidecar's claim and confirm as one instance of the contention bench runs them: the
 * sidecar's {@link MysqlGuardStore} (the ledger INSERT and the entity's CAS in one transaction,
 * group commit, the confirm's one UPDATE), its {@link Extractor}, and the owner heartbeat every
 * second, configured from sidecar YAML. L1 is not involved: every transition is a new fact, which
 * L1 never answers. Owns and closes all of it. Blocking calls, for one thread.
 *
 * <p>The machine has one state and a self-loop ({@code update: open → open}), so that a
 * transition is legal whenever its entity is free and every conflict between instances is over
 * the entity, as in the FOR UPDATE variant. The store is driven directly rather than through
 * {@link Guard}, so that the bench holds no pipeline of its own: every lost CAS is parked for
 * {@code early-arrival-retry} and claimed again, as the guard answers a lost CAS that finds the
 * entity busy, or free again in its from-state (see {@link ClaimLoop}).
 */
final class ClaimSide implements AutoCloseable {
  static final String STATE = "open";
  static final String ROUTE = "contention";
  static final int POOL_SIZE = 4;
  private static final String MACHINE = "entity";

  private final MysqlGuardStore store;
  private final RouteConfig route;
  private final Map<String, EventConfig> events;
  private final Extractor extractor;
  private final String owner;
  private final ScheduledExecutorService heartbeat;
  private long contentionRetries;

  /** Where MySQL is and who connects: through the delaying proxy or straight to the server. */
  record Target(String host, int port, String database, String user, String password) {}

  /** With the route's default {@code early-arrival-retry}. */
  ClaimSide(Target t, String instanceId) {
    this(t, instanceId, null);
  }

  /** @param earlyArrivalRetry the route's {@code early-arrival-retry}; {@code null}: its default */
  ClaimSide(Target t, String instanceId, Duration earlyArrivalRetry) {
    SidecarConfig config = config(t, instanceId, earlyArrivalRetry);
    this.route = config.routes().get(0);
    this.events = config.machines().get(MACHINE).events();
    this.extractor = new Extractor(route, config.machines().get(MACHINE));
    this.store = new MysqlGuardStore(new Db(config.mysql()), config.mysql().tablePrefix(), MysqlGuardStore.groupSlots(POOL_SIZE));
    this.owner = instanceId + "/" + Long.toHexString(ThreadLocalRandom.current().nextLong());
    this.heartbeat = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread th = new Thread(r, "contention-heartbeat");
      th.setDaemon(true);
      return th;
    });
    store.heartbeat(owner, Guard.OWNER_TTL.toMillis()).toCompletableFuture().join();
    long every = Guard.HEARTBEAT_EVERY.toMillis();
    heartbeat.scheduleWithFixedDelay(() -> store.heartbeat(owner, Guard.OWNER_TTL.toMillis()), every, every, TimeUnit.MILLISECONDS);
  }

  private static SidecarConfig config(Target t, String instanceId, Duration earlyArrivalRetry) {
    return new ConfigReader(Map.of()).parse(yaml(t, instanceId, earlyArrivalRetry), "contention bench");
  }

  /** The route's default {@code early-arrival-retry}: how long a record whose claim lost its CAS waits before it is claimed again. */
  static Duration defaultEarlyArrivalRetry() {
    return config(new Target("127.0.0.1", 3306, "unused", "root", ""), "any", null).routes().get(0).timings().earlyArrivalRetry();
  }

  /** This instance's {@code early-arrival-retry}. */
  Duration earlyArrivalRetry() {
    return route.timings().earlyArrivalRetry();
  }

  private static String yaml(Target t, String instanceId, Duration earlyArrivalRetry) {
    return """
        sidecar: {instance-id: %s}
        kafka: {bootstrap-servers: 127.0.0.1:1}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: %d, migrate-on-start: false}
        machines:
          %s:
            states: [%s]
            events:
              create: {to: %s}
              update: {from: [%s], to: %s}
        routes:
          - name: %s
            topics: [contention]
            machine: %s
            entity-id: /id
            event: /event
            business-key: [/id, /fact]
            target: 127.0.0.1:1
        """.formatted(instanceId, t.host(), t.port(), t.user(), t.password().replace("'", "''"), t.database(), POOL_SIZE, MACHINE,
        STATE, STATE, STATE, STATE, ROUTE, MACHINE)
        + (earlyArrivalRetry == null ? "" : "    early-arrival-retry: " + earlyArrivalRetry.toMillis() + "ms\n");
  }

  /** OnceGuard's schema in {@code t.database()}, and {@code entities} entities created by claim and confirm. */
  static void createSchemaAndEntities(Target t, int entities) throws Exception {
    try (Db db = new Db(new SidecarConfig.MysqlConfig(t.host(), t.port(), t.database(), t.user(), t.password(), "og_", 1, true,
        Duration.ofDays(1)))) {
      new Migrations(db, "og_").migrate();
    }
    try (ClaimSide side = new ClaimSide(t, "setup")) {
      for (int i = 0; i < entities; i++) {
        ClaimCommand cmd = side.command(i, "create", "create-" + i, new Source("setup", 0, i));
        if (!(side.claim(cmd) instanceof ClaimOutcome.Claimed c) || !side.confirm(side.claimOf(cmd, c))) {
          throw new IllegalStateException("could not create entity " + entityId(i));
        }
      }
    }
  }

  static String entityId(int i) {
    return "e" + i;
  }

  /** The business call: {@code holdMs} of waiting (0: none). */
  static void businessCall(int holdMs) throws InterruptedException {
    if (holdMs > 0) {
      Thread.sleep(holdMs);
    }
  }

  /** A claim of {@code event} on entity {@code i}, read by the route's extractor from a record; {@code fact} makes it distinct. */
  ClaimCommand command(int i, String event, String fact, Source source) {
    String json = "{\"id\":\"" + entityId(i) + "\",\"event\":\"" + event + "\",\"fact\":\"" + fact + "\"}";
    Extraction x = extractor.extract(null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders());
    if (!(x instanceof Extraction.Ok ok)) {
      throw new IllegalStateException("not extracted: " + x);
    }
    return new ClaimCommand(route.name(), route.machine(), events.get(event), ok.event(), source, owner, System.currentTimeMillis(),
        route.timings().lease().toMillis());
  }

  ClaimOutcome claim(ClaimCommand cmd) throws Exception {
    return retryingContention(() -> store.claim(cmd));
  }

  /** The claim the store granted, as the guard hands it to the pipeline. */
  Claim claimOf(ClaimCommand cmd, ClaimOutcome.Claimed c) {
    ExtractedEvent e = cmd.extracted();
    return new Claim(cmd.route(), e.dedupKey(), e.businessKey(), e.fingerprint(), cmd.machine(), e.entityId(), e.event(),
        c.fromState(), cmd.event().to(), owner, c.leaseUntilMillis(), c.attempts(), c.takenOver(), cmd.source());
  }

  boolean confirm(Claim claim) throws Exception {
    return retryingContention(() -> store.confirm(claim, System.currentTimeMillis()));
  }

  /** Store steps run again after losing a race to another transaction (deadlock, lock-wait timeout). */
  long contentionRetries() {
    return contentionRetries;
  }

  /** As the guard does: a step that lost a race runs again after 1 to 5 × attempt ms, up to {@link Guard#MAX_CONTENTION_RETRIES} runs. */
  private <T> T retryingContention(Supplier<CompletionStage<T>> step) throws Exception {
    for (int attempt = 1; ; attempt++) {
      try {
        return step.get().toCompletableFuture().get(60, TimeUnit.SECONDS);
      } catch (ExecutionException | CompletionException e) {
        if (!(e.getCause() instanceof ContentionException) || attempt >= Guard.MAX_CONTENTION_RETRIES) {
          throw e;
        }
        contentionRetries++;
        Thread.sleep(1 + ThreadLocalRandom.current().nextLong(5L * attempt));
      }
    }
  }

  @Override
  public void close() {
    heartbeat.shutdownNow();
    try {
      store.retire(owner).toCompletableFuture().get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      System.err.println("[contention] retire " + owner + ": " + e);
    }
    store.close();
  }
}
