package dev.onceguard.bench.contention;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.time.Clock;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The sidecar's guard as one instance of the contention bench runs it: its {@link Guard} over its
 * {@link MysqlGuardStore} (the ledger INSERT and the entity's CAS, group commit, contention
 * retries), its {@link Extractor}, and the owner heartbeat every second, configured from sidecar
 * YAML. L1 is off: every transition is a new fact, which L1 never answers. Owns and closes all of it.
 *
 * <p>The machine has one state and a self-loop ({@code update: open → open}), so that a
 * transition is legal whenever its entity is free: every conflict between instances is a
 * conflict over the entity, never a state mismatch, as in the FOR UPDATE variant.
 */
final class ClaimSide implements AutoCloseable {
  static final String STATE = "open";
  static final String ROUTE = "contention";
  static final int POOL_SIZE = 4;

  private final SidecarConfig config;
  private final Guard guard;
  private final RouteConfig route;
  private final Extractor extractor;
  private final ScheduledExecutorService heartbeat;

  /** Where MySQL is and who connects: through the delaying proxy or straight to the server. */
  record Target(String host, int port, String database, String user, String password) {}

  ClaimSide(Target t, String instanceId) {
    this.config = config(t, instanceId);
    this.route = config.routes().get(0);
    this.extractor = new Extractor(route, config.machines().get(route.machine()));
    Db db = new Db(config.mysql());
    MysqlGuardStore store = new MysqlGuardStore(db, config.mysql().tablePrefix(), MysqlGuardStore.groupSlots(POOL_SIZE));
    this.guard = new Guard(store, IdempotencyCache.DISABLED, config.machines(), config.routes(), Clock.SYSTEM,
        instanceId + "/" + Long.toHexString(System.nanoTime()));
    this.heartbeat = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread th = new Thread(r, "contention-heartbeat");
      th.setDaemon(true);
      return th;
    });
    guard.heartbeat().toCompletableFuture().join();
    long every = Guard.HEARTBEAT_EVERY.toMillis();
    heartbeat.scheduleWithFixedDelay(() -> guard.heartbeat(), every, every, TimeUnit.MILLISECONDS);
  }

  private static SidecarConfig config(Target t, String instanceId) {
    return new ConfigReader(Map.of()).parse(yaml(t, instanceId), "contention bench");
  }

  /** The route's {@code early-arrival-retry}: how long a claim that found its entity busy waits before it is tried again. */
  static Duration earlyArrivalRetry() {
    return config(new Target("127.0.0.1", 3306, "unused", "root", ""), "any").routes().get(0).timings().earlyArrivalRetry();
  }

  private static String yaml(Target t, String instanceId) {
    return """
        sidecar: {instance-id: %s}
        kafka: {bootstrap-servers: 127.0.0.1:1}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: %d, migrate-on-start: false}
        machines:
          entity:
            states: [%s]
            events:
              create: {to: %s}
              update: {from: [%s], to: %s}
        routes:
          - name: %s
            topics: [contention]
            machine: entity
            entity-id: /id
            event: /event
            business-key: [/id, /fact]
            target: 127.0.0.1:1
        """.formatted(instanceId, t.host(), t.port(), t.user(), t.password().replace("'", "''"), t.database(), POOL_SIZE, STATE,
        STATE, STATE, STATE, ROUTE);
  }

  /** OnceGuard's schema in {@code t.database()}, and {@code entities} entities created through the guard. */
  static void createSchemaAndEntities(Target t, int entities) {
    ClaimSide side = null;
    try (Db db = new Db(new SidecarConfig.MysqlConfig(t.host(), t.port(), t.database(), t.user(), t.password(), "og_", 1, true,
        Duration.ofDays(1)))) {
      new Migrations(db, "og_").migrate();
      side = new ClaimSide(t, "setup");
      for (int i = 0; i < entities; i++) {
        ClaimResult r = side.guard.claimInStore(side.route, side.event(i, "create", "create-" + i), new Source("setup", 0, i))
            .toCompletableFuture().join();
        if (!(r instanceof ClaimResult.Accepted a) || !side.guard.confirm(side.route, a.claim(), false).toCompletableFuture().join()) {
          throw new IllegalStateException("could not create entity " + i + ": " + r);
        }
      }
    } finally {
      if (side != null) {
        side.close();
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

  /** A record of {@code event} on entity {@code i}, read by the route's extractor; {@code fact} makes it distinct. */
  ExtractedEvent event(int i, String event, String fact) {
    String json = "{\"id\":\"" + entityId(i) + "\",\"event\":\"" + event + "\",\"fact\":\"" + fact + "\"}";
    Extraction x = extractor.extract(null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders());
    if (!(x instanceof Extraction.Ok ok)) {
      throw new IllegalStateException("not extracted: " + x);
    }
    return ok.event();
  }

  Guard guard() {
    return guard;
  }

  RouteConfig route() {
    return route;
  }

  @Override
  public void close() {
    heartbeat.shutdownNow();
    try {
      guard.retire().toCompletableFuture().get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      System.err.println("[contention] retire: " + e);
    }
    guard.close();
  }
}
