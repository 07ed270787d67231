package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import dev.onceguard.proxy.time.Clock;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.SslOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.async.RedisStringAsyncCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.codec.StringCodec;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * L1 on Redis through lettuce's async API. Fail-open by construction: every call has a short
 * timeout, every failure answers "not seen" and is counted, and a circuit breaker stops calling
 * Redis for {@code breaker-open-for} after a failure so that an outage costs one timeout per
 * interval, not one per record. An outage is logged once when it starts and once when it ends.
 *
 * <p>Keys are {@code <key-prefix><ledger id>:<route>:<dedup key>}. The ledger id is the identity of
 * the MySQL ledger this cache stands in front of ({@code <table-prefix>ledger_id}, drawn once by
 * the migration): a hit says "duplicate", which only this ledger may say, so deployments with
 * ledgers of their own never answer each other's records, even on one Redis with one key prefix;
 * sidecars on one ledger share their keys. The value is the record's fingerprint, so
 * that a hit is only a hit for the same content, and when it was confirmed
 * ({@code <fingerprint>@<epoch ms>}), so that a hit tells the duplicate's age, and which record
 * was confirmed ({@code #<topic>/<partition>@<offset>}), so that that very record consumed again
 * is told from a replay. Only single-key GET and SET are used, so a Redis
 * Cluster ({@code redis.mode: cluster}) works the same way: lettuce's cluster client sends each key
 * to the node that owns its slot, follows MOVED/ASK redirects and refreshes the topology when it
 * changes. The client and its one connection are created here and closed by {@link #close()}
 * (lettuce: a client is expensive, reuse it). Thread-safe.
 */
public final class RedisIdempotencyCache implements IdempotencyCache {
  private static final Logger log = LoggerFactory.getLogger(RedisIdempotencyCache.class);

  /** The least time a connect may take (see the constructor). */
  static final Duration CONNECT_BOUND = Duration.ofSeconds(2);

  private final RedisConfig cfg;
  private final Clock clock;
  /** {@code <key-prefix><ledger id>:}, the start of every key. */
  private volatile String scope;
  private final Link link;
  private final AtomicReference<Connection> conn = new AtomicReference<>();
  private final AtomicBoolean connecting = new AtomicBoolean();
  private final AtomicLong openUntil = new AtomicLong();
  private final AtomicBoolean down = new AtomicBoolean();
  /** Failed (re)connects; calls of a route are counted in its {@link Counts}. */
  private final AtomicLong connectFailures = new AtomicLong();
  private final Map<String, Counts> counts = new ConcurrentHashMap<>();
  private volatile boolean closed;

  /**
   * @param ledgerId the identity of the ledger behind this cache (see the class comment): keys of
   *     another ledger id are never read
   */
  public RedisIdempotencyCache(RedisConfig cfg, String ledgerId, Clock clock) {
    this.cfg = cfg;
    this.clock = clock;
    this.scope = scope(cfg, ledgerId);
    // lettuce bounds a whole (re)connect (TCP, TLS handshake, HELLO/AUTH) by the URI's timeout; at
    // redis.timeout (200 ms) a TLS handshake on a busy host did not fit. Commands stay bounded by
    // redis.timeout (TimeoutOptions below), and nothing waits for a connect (it runs on its own).
    List<RedisURI> uris = redisUris(cfg, cfg.timeout().compareTo(CONNECT_BOUND) > 0 ? cfg.timeout() : CONNECT_BOUND);
    SslOptions ssl = sslOptions(cfg);
    this.link = cfg.cluster() ? Link.cluster(uris, cfg.timeout(), ssl) : Link.standalone(uris.get(0), cfg.timeout(), ssl);
    connectAsync();
  }

  /**
   * The URIs of {@code redis.uri}, each with {@code timeout}. A {@code rediss://} URI means TLS,
   * with the server's certificate and host name checked (lettuce's default; {@code ?verifyPeer=CA}
   * or {@code NONE} in the URI weaken that).
   */
  public static List<RedisURI> redisUris(RedisConfig cfg, Duration timeout) {
    return cfg.uris().stream().map(u -> {
      RedisURI r = RedisURI.create(u);
      r.setTimeout(timeout);
      return r;
    }).toList();
  }

  /**
   * The trust of {@code redis.ssl-ca} (only that CA), or lettuce's default (the JVM's trust
   * store) without it.
   */
  public static SslOptions sslOptions(RedisConfig cfg) {
    SslOptions.Builder b = SslOptions.builder().jdkSslProvider();
    if (cfg.sslCa() != null) {
      b.trustManager(cfg.sslCa().toFile());
    }
    return b.build();
  }

  /** A connection of either client: what L1 needs of it. */
  private record Connection(StatefulConnection<String, String> connection, RedisStringAsyncCommands<String, String> commands) {}

  /** The client, standalone or cluster, and how it connects. */
  private record Link(AbstractRedisClient client, java.util.function.Supplier<CompletionStage<Connection>> connector) {

    static Link standalone(RedisURI uri, Duration timeout, SslOptions ssl) {
      RedisClient client = RedisClient.create(uri);
      // while disconnected, fail commands at once instead of queueing them: L1 must never wait
      client.setOptions(options(ClientOptions.builder(), timeout, ssl)
          .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
          .build());
      return new Link(client, () -> client.connectAsync(StringCodec.UTF8, uri).thenApply(c -> new Connection(c, c.async())));
    }

    /** Triggered topology refreshes at most this often (lettuce's default: 30 s). */
    static final Duration ADAPTIVE_REFRESH_EVERY = Duration.ofSeconds(2);

    static Link cluster(List<RedisURI> seeds, Duration timeout, SslOptions ssl) {
      RedisClusterClient client = RedisClusterClient.create(seeds);
      ClusterClientOptions.Builder b = ClusterClientOptions.builder()
          // follow slot moves and failovers without waiting for a failed command. A failover
          // triggers a refresh as soon as the master's link drops, before its replica is promoted;
          // lettuce's default then holds further triggered refreshes back for 30 s, leaving that
          // master's slots unanswered (L1 skipped) until the periodic one. One refresh per 2 s at
          // most follows the promotion within about the cluster-node-timeout.
          .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
              .enableAllAdaptiveRefreshTriggers()
              .adaptiveRefreshTriggersTimeout(ADAPTIVE_REFRESH_EVERY)
              .enablePeriodicRefresh(Duration.ofSeconds(30))
              .build());
      options(b, timeout, ssl)
          // The cluster client opens a node's connection when a key of that node is first used;
          // rejecting commands while disconnected would reject exactly those first commands. So
          // they queue (bounded), and the timeout (lettuce's and ours) still bounds every wait.
          .disconnectedBehavior(ClientOptions.DisconnectedBehavior.ACCEPT_COMMANDS)
          .requestQueueSize(10_000);
      client.setOptions(b.build());
      // connectAsync needs the slot map first (else "Partitions not initialized"); loading it
      // asynchronously keeps the constructor and every reconnect off the caller's thread
      return new Link(client, () -> client.refreshPartitionsAsync()
          .thenCompose(v -> client.connectAsync(StringCodec.UTF8))
          .thenApply(c -> new Connection(c, c.async())));
    }

    private static <B extends ClientOptions.Builder> B options(B b, Duration timeout, SslOptions ssl) {
      b.autoReconnect(true)
          .sslOptions(ssl)
          .socketOptions(SocketOptions.builder().connectTimeout(Duration.ofSeconds(1)).tcpNoDelay(true).build())
          .timeoutOptions(TimeoutOptions.enabled(timeout));
      return b;
    }
  }

  private void connectAsync() {
    if (closed || !connecting.compareAndSet(false, true)) {
      return;
    }
    link.connector().get().whenComplete((c, e) -> {
      connecting.set(false);
      if (e != null) {
        connectFailures.incrementAndGet();
        failed("connect", e);
      } else if (closed) {
        c.connection().closeAsync();
      } else {
        Connection old = conn.getAndSet(c);
        if (old != null) {
          old.connection().closeAsync(); // a reconnect of our own replaced it: don't leak the old one
        }
      }
    });
  }

  private static String scope(RedisConfig cfg, String ledgerId) {
    if (ledgerId == null || ledgerId.isEmpty()) {
      throw new IllegalArgumentException("a ledger id is required: L1 keys are scoped to the ledger");
    }
    return cfg.keyPrefix() + ledgerId + ":";
  }

  /**
   * Moves to the keys of another ledger id (the ledger's identity changed under a running process:
   * the database was created again, or an operator drew a new id after a restore). Keys of the old
   * id are never read again; they expire with their TTL.
   */
  public void ledgerId(String ledgerId) {
    this.scope = scope(cfg, ledgerId);
  }

  /** The ledger id the keys are scoped to. */
  public String ledgerId() {
    String s = scope;
    return s.substring(cfg.keyPrefix().length(), s.length() - 1);
  }

  private String key(String route, String dedupKey) {
    return scope + route + ":" + dedupKey;
  }

  /**
   * One route's L1 outcomes since start; each only grows. Thread-safe.
   */
  public static final class Counts {
    private final LongAdder hits = new LongAdder();
    private final LongAdder misses = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final LongAdder skipped = new LongAdder();

    /** Lookups that found the key with the same fingerprint. */
    public long hits() {
      return hits.sum();
    }

    /** Lookups that did not. */
    public long misses() {
      return misses.sum();
    }

    /** Calls (lookups and writes) that failed or timed out. */
    public long failures() {
      return failures.sum();
    }

    /** Calls not attempted because the breaker was open or no connection was up. */
    public long skipped() {
      return skipped.sum();
    }
  }

  /** The route's counts (zero until its first call). */
  public Counts counts(String route) {
    return counts.computeIfAbsent(route, r -> new Counts());
  }

  /** The connection to use now, or {@code null} when the breaker is open or Redis is unreachable. */
  private RedisStringAsyncCommands<String, String> usable(Counts n) {
    if (clock.nowMillis() < openUntil.get()) {
      n.skipped.increment();
      return null;
    }
    Connection c = conn.get();
    if (c == null || !c.connection().isOpen()) {
      n.skipped.increment();
      connectAsync();
      return null;
    }
    return c.commands();
  }

  @Override
  public CompletionStage<Hit> seen(String route, String dedupKey, String fingerprint) {
    Counts n = counts(route);
    RedisStringAsyncCommands<String, String> c = usable(n);
    if (c == null) {
      return CompletableFuture.completedFuture(null);
    }
    try {
      return c.get(key(route, dedupKey)).toCompletableFuture()
          .orTimeout(cfg.timeout().toMillis(), TimeUnit.MILLISECONDS)
          .handle((v, e) -> {
            if (e != null) {
              n.failures.increment();
              failed("GET", e);
              return null;
            }
            healthy();
            Hit hit = parse(v, fingerprint);
            if (hit != null) {
              n.hits.increment();
            } else {
              n.misses.increment();
            }
            return hit;
          });
    } catch (RuntimeException e) {
      n.failures.increment();
      failed("GET", e);
      return CompletableFuture.completedFuture(null);
    }
  }

  /**
   * A hit if {@code value} holds {@code fingerprint}: {@code <fingerprint>@<confirmed at>#<source>},
   * {@code <fingerprint>@<confirmed at>} (no source named), or the fingerprint alone (a hit of
   * unknown age).
   */
  static Hit parse(String value, String fingerprint) {
    if (value == null || !value.startsWith(fingerprint)) {
      return null;
    }
    if (value.length() == fingerprint.length()) {
      return new Hit(Hit.UNKNOWN_TIME);
    }
    if (value.charAt(fingerprint.length()) != '@') {
      return null;
    }
    int hash = value.indexOf('#', fingerprint.length() + 1);
    String source = hash < 0 ? null : value.substring(hash + 1);
    try {
      return new Hit(Long.parseLong(value, fingerprint.length() + 1, hash < 0 ? value.length() : hash, 10), source);
    } catch (NumberFormatException e) {
      return new Hit(Hit.UNKNOWN_TIME);
    }
  }

  @Override
  public CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, long confirmedAtMillis, Duration ttl,
      String source) {
    Counts n = counts(route);
    RedisStringAsyncCommands<String, String> c = usable(n);
    if (c == null) {
      return CompletableFuture.completedFuture(null);
    }
    try {
      String value = fingerprint + "@" + confirmedAtMillis + (source == null ? "" : "#" + source);
      return c.set(key(route, dedupKey), value, SetArgs.Builder.px(ttl.toMillis())).toCompletableFuture()
          .orTimeout(cfg.timeout().toMillis(), TimeUnit.MILLISECONDS)
          .handle((v, e) -> {
            if (e != null) {
              // counted, but it does not open the breaker: one write that missed its timeout must
              // not switch L1 off for every record; if Redis is really gone, the GETs open it
              n.failures.increment();
            } else {
              healthy();
            }
            return null;
          });
    } catch (RuntimeException e) {
      n.failures.increment();
      return CompletableFuture.completedFuture(null);
    }
  }

  /** Opens the breaker; the caller counted the failure. */
  private void failed(String op, Throwable e) {
    openUntil.set(clock.nowMillis() + cfg.breakerOpenFor().toMillis());
    if (down.compareAndSet(false, true) && !closed) {
      log.warn("Redis L1 cache unavailable ({} failed: {}); skipping L1 (results stay correct, only slower) and retrying every {} ms",
          op, e.toString(), cfg.breakerOpenFor().toMillis());
    }
  }

  private void healthy() {
    if (down.compareAndSet(true, false)) {
      log.info("Redis L1 cache available again after {} failed or skipped calls", failures() + skipped());
    }
  }

  /** Calls that failed (timeout, error), over all routes, and failed connects. */
  public long failures() {
    return connectFailures.get() + counts.values().stream().mapToLong(Counts::failures).sum();
  }

  /** Calls not attempted because the breaker was open or no connection was up, over all routes. */
  public long skipped() {
    return counts.values().stream().mapToLong(Counts::skipped).sum();
  }

  public long hits() {
    return counts.values().stream().mapToLong(Counts::hits).sum();
  }

  public long misses() {
    return counts.values().stream().mapToLong(Counts::misses).sum();
  }

  /**
   * False from a failed lookup or connect until the next call that succeeds: L1 is being skipped
   * (the breaker is open or Redis cannot be reached). A failed write alone does not change it.
   */
  public boolean available() {
    return !down.get();
  }

  @Override
  public void close() {
    closed = true;
    Connection c = conn.getAndSet(null);
    if (c != null) {
      c.connection().close();
    }
    link.client().shutdown(Duration.ZERO, Duration.ofSeconds(2));
  }
}
