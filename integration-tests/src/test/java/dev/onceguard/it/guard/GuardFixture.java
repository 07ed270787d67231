package dev.onceguard.it.guard;

import dev.onceguard.it.ItEnv;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.RedisIdempotencyCache;
import dev.onceguard.proxy.time.Clock;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * A guard on the machine's real MariaDB and Redis, in a database and a Redis key prefix of its
 * own (dropped / deleted on close), with a settable clock.
 */
final class GuardFixture implements AutoCloseable {
  static final String HOST = ItEnv.mysqlHost();
  static final int PORT = ItEnv.mysqlPort();
  static final String USER = ItEnv.mysqlUser();
  static final String PASSWORD = ItEnv.mysqlPassword();
  static final String REDIS = ItEnv.redisUri();

  /** A clock the test moves by hand; starts at the real time. */
  static final class ManualClock implements Clock {
    final AtomicLong now = new AtomicLong(System.currentTimeMillis());

    @Override
    public long nowMillis() {
      return now.get();
    }

    void advance(long ms) {
      now.addAndGet(ms);
    }
  }

  final String database = "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  final String redisPrefix = "ogit:" + database + ":";
  final SidecarConfig config;
  final ManualClock clock = new ManualClock();
  final Db db;
  final MysqlGuardStore store;
  /** The ledger id of this fixture's database (what its guards' L1 keys are scoped to). */
  final String ledgerId;
  /** Redis key prefixes other than {@link #redisPrefix} that guards of this fixture used (deleted on close). */
  private final List<String> otherPrefixes = new java.util.concurrent.CopyOnWriteArrayList<>();
  /** The configuration as a sidecar would read it (for the command line). */
  final String yaml;
  private final List<Guard> guards = new java.util.ArrayList<>();

  GuardFixture(String routesAndMachinesYaml) {
    this(routesAndMachinesYaml, 20);
  }

  GuardFixture(String routesAndMachinesYaml, int poolSize) {
    yaml = "kafka:\n  bootstrap-servers: 127.0.0.1:1\n"
        + "mysql:\n  host: " + HOST + "\n  port: " + PORT + "\n  user: " + USER + "\n  password: '" + PASSWORD + "'\n"
        + "  database: " + database + "\n  pool-size: " + poolSize + "\n"
        // The breaker reopens by this fixture's manual clock, which tests rarely move: one slow
        // answer (a loaded machine) would switch L1 off for the rest of a test that expects hits.
        + "redis:\n  uri: " + REDIS + "\n  key-prefix: '" + redisPrefix + "'\n  timeout: 2s\n  breaker-open-for: 1s\n"
        + routesAndMachinesYaml;
    config = new ConfigReader(Map.of()).parse(yaml, "fixture");
    db = new Db(config.mysql());
    new Migrations(db, config.mysql().tablePrefix()).migrate();
    store = new MysqlGuardStore(db, config.mysql().tablePrefix());
    ledgerId = store.ledgerId().toCompletableFuture().join();
  }

  /** A guard (its own owner id) on the shared store, with Redis L1 at {@code redisUri} (null: none). */
  Guard guard(String owner, String redisUri) {
    return guard(owner, redisUri, clock);
  }

  /** The same, on a clock of its own (a pod whose clock is off). */
  Guard guard(String owner, String redisUri, Clock clock) {
    return guard(owner, redisUri, clock, redisPrefix);
  }

  /**
   * A guard with L1 on the machine's Redis under {@code keyPrefix} (another deployment may use the
   * same one); its keys are deleted on close.
   */
  Guard guardWithKeyPrefix(String owner, String keyPrefix) {
    otherPrefixes.add(keyPrefix);
    return guard(owner, REDIS, clock, keyPrefix);
  }

  private Guard guard(String owner, String redisUri, Clock clock, String keyPrefix) {
    IdempotencyCache cache = redisUri == null ? IdempotencyCache.DISABLED
        : new RedisIdempotencyCache(new SidecarConfig.RedisConfig(redisUri, config.redis().timeout(), keyPrefix, config.redis().breakerOpenFor()),
            ledgerId, clock);
    if (REDIS.equals(redisUri)) {
      try {
        awaitConnected((RedisIdempotencyCache) cache);
      } catch (RuntimeException e) {
        ((RedisIdempotencyCache) cache).close();
        throw e;
      }
    }
    Guard g = new Guard(new NonClosingStore(store), cache, config.machines(), config.routes(), clock, owner);
    guards.add(g);
    return g;
  }

  /**
   * The cache connects in the background and, until connected, answers "not seen" and writes
   * nothing: a test that expects an L1 hit must not start before. Waits for a first real answer
   * (a GET of a key nobody writes).
   */
  private static void awaitConnected(RedisIdempotencyCache cache) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (cache.hits() + cache.misses() == 0) {
      if (cache.failures() > 0) {
        throw new IllegalStateException("Redis L1 at " + REDIS + " failed while connecting (see the log)");
      }
      if (System.nanoTime() - deadline > 0) {
        throw new IllegalStateException("Redis L1 at " + REDIS + " not connected within 10 s");
      }
      cache.seen("og-fixture-probe", "probe", "probe").toCompletableFuture().join();
      if (cache.hits() + cache.misses() == 0) {
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
      }
    }
  }

  Guard guard(String owner) {
    return guard(owner, REDIS);
  }

  RouteConfig route(String name) {
    return config.routes().stream().filter(r -> r.name().equals(name)).findFirst().orElseThrow();
  }

  Extraction extract(String route, String json) {
    RouteConfig r = route(route);
    return new Extractor(r, r.machine() == null ? null : config.machines().get(r.machine()))
        .extract(null, json == null ? null : json.getBytes(StandardCharsets.UTF_8), new RecordHeaders());
  }

  ExtractedEvent event(String route, String json) {
    Extraction x = extract(route, json);
    if (x instanceof Extraction.Ok ok) {
      return ok.event();
    }
    throw new AssertionError("extraction failed: " + x);
  }

  /** Deletes every Redis key this fixture's guards wrote (a targeted "flush"). */
  long flushRedis() {
    return ItEnv.deleteRedisKeys(redisPrefix);
  }


  long scalar(String sql, Object... args) {
    return ((Number) db.select(sql, args).get(0).get(0)).longValue();
  }

  long update(String sql, Object... args) {
    return db.execute(sql, args);
  }

  String string(String sql, Object... args) {
    List<List<Object>> rows = db.select(sql, args);
    return rows.isEmpty() ? null : String.valueOf(rows.get(0).get(0));
  }

  @Override
  public void close() {
    guards.forEach(Guard::close);
    try {
      db.execute("DROP DATABASE IF EXISTS " + database);
    } finally {
      db.close();
      flushRedis();
      otherPrefixes.forEach(ItEnv::deleteRedisKeys);
    }
  }

  /** The guards share one store; only the fixture closes it. */
  private static final class NonClosingStore implements dev.onceguard.proxy.store.GuardStore {
    private final dev.onceguard.proxy.store.GuardStore d;

    NonClosingStore(dev.onceguard.proxy.store.GuardStore d) {
      this.d = d;
    }

    @Override
    public CompletionStage<ClaimOutcome> claim(ClaimCommand cmd) {
      return d.claim(cmd);
    }

    @Override
    public CompletionStage<ClaimOutcome> takeOver(ClaimCommand cmd, LedgerRow row, boolean force) {
      return d.takeOver(cmd, row, force);
    }

    @Override
    public CompletionStage<List<LedgerRow>> pendingRows(String entityId, String pendingKey) {
      return d.pendingRows(entityId, pendingKey);
    }

    @Override
    public CompletionStage<Boolean> releaseAbandonedApiClaim(String machine, String entityId, String pendingKey, long graceMillis) {
      return d.releaseAbandonedApiClaim(machine, entityId, pendingKey, graceMillis);
    }

    @Override
    public CompletionStage<List<LedgerRow>> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit) {
      return d.appliedRows(routes, entityId, event, fingerprint, limit);
    }

    @Override
    public CompletionStage<Boolean> confirm(dev.onceguard.proxy.store.Claim c, long now, dev.onceguard.proxy.store.StoredResponse r) {
      return d.confirm(c, now, r);
    }

    @Override
    public CompletionStage<dev.onceguard.proxy.store.StoredResponse> storedResponse(String route, String dedupKey) {
      return d.storedResponse(route, dedupKey);
    }

    @Override
    public CompletionStage<Boolean> abort(dev.onceguard.proxy.store.Claim c, boolean maySeen, long now) {
      return d.abort(c, maySeen, now);
    }

    @Override
    public CompletionStage<Void> heartbeat(String owner, long ttlMillis) {
      return d.heartbeat(owner, ttlMillis);
    }

    @Override
    public CompletionStage<Void> retire(String owner) {
      return d.retire(owner);
    }

    @Override
    public CompletionStage<Boolean> renew(dev.onceguard.proxy.store.Claim c, long until) {
      return d.renew(c, until);
    }

    @Override
    public java.util.concurrent.CompletionStage<Void> recordDecision(dev.onceguard.v1.Verdict v, dev.onceguard.proxy.store.Source s, long now) {
      return d.recordDecision(v, s, now);
    }

    @Override
    public java.util.concurrent.CompletionStage<Long> purgeDecisions(long before) {
      return d.purgeDecisions(before);
    }

    @Override
    public java.util.concurrent.CompletionStage<dev.onceguard.v1.ExplainResponse> explain(String route, String machine, String key, String entity, int limit) {
      return d.explain(route, machine, key, entity, limit);
    }

    @Override
    public void close() {}
  }
}
