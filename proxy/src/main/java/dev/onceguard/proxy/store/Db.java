package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.guard.ContentionException;
import dev.onceguard.proxy.guard.StoreUnavailableException;
import io.asyncer.r2dbc.mysql.MySqlConnectionConfiguration;
import io.asyncer.r2dbc.mysql.MySqlConnectionFactory;
import io.r2dbc.pool.ConnectionPool;
import io.r2dbc.pool.ConnectionPoolConfiguration;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.R2dbcDataIntegrityViolationException;
import io.r2dbc.spi.R2dbcException;
import io.r2dbc.spi.Readable;
import io.r2dbc.spi.Statement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A pooled r2dbc-mysql connection factory plus the few helpers the store needs: run work in a
 * transaction or in autocommit, bind parameters positionally, and map every driver failure to
 * {@link DuplicateKeyException} (a unique index said no: data), {@link ContentionException}
 * (deadlock or lock-wait timeout: a lost race, retry at once) or
 * {@link StoreUnavailableException} (anything else: the store is down or broken). Expensive; one per sidecar.
 */
public final class Db implements AutoCloseable {
  /** Upper bound on one unit of work, so a hung server pauses work instead of hanging it. */
  static final Duration WORK_TIMEOUT = Duration.ofSeconds(15);

  private final ConnectionPool pool;
  /**
   * One connection of its own for liveness (the owner heartbeat): queued behind claims in a
   * saturated pool, a heartbeat would arrive late and make a busy process look dead.
   */
  private final ConnectionPool control;
  /** Statements sent, BEGIN/COMMIT/ROLLBACK included: the round trips the guard costs. */
  private static final java.util.concurrent.atomic.LongAdder ROUND_TRIPS = new java.util.concurrent.atomic.LongAdder();

  /** Round trips to MySQL made by every store in this JVM so far (for benchmarks and tests). */
  public static long roundTrips() {
    return ROUND_TRIPS.sum();
  }

  public Db(MysqlConfig cfg) {
    MySqlConnectionConfiguration.Builder b = MySqlConnectionConfiguration.builder()
        .host(cfg.host())
        .port(cfg.port())
        .user(cfg.user())
        .database(cfg.database())
        .createDatabaseIfNotExist(true)
        .connectTimeout(Duration.ofSeconds(5))
        .lockWaitTimeout(Duration.ofSeconds(10))
        .tcpNoDelay(true)
        .tcpKeepAlive(true);
    if (!cfg.password().isEmpty()) {
      b.password(cfg.password());
    }
    MySqlConnectionFactory factory = MySqlConnectionFactory.from(b.build());
    this.pool = new ConnectionPool(poolConfig(factory, "onceguard-mysql", cfg.poolSize()));
    this.control = new ConnectionPool(poolConfig(factory, "onceguard-mysql-control", 1));
  }

  private static ConnectionPoolConfiguration poolConfig(MySqlConnectionFactory factory, String name, int size) {
    return ConnectionPoolConfiguration.builder(factory)
        .name(name)
        .initialSize(0)
        .maxSize(size)
        .maxIdleTime(Duration.ofMinutes(5))
        .maxAcquireTime(Duration.ofSeconds(10))
        .maxCreateConnectionTime(Duration.ofSeconds(5))
        .maxValidationTime(Duration.ofSeconds(2))
        // A local check (is the socket open), not a query: a `SELECT 1` per acquire doubled the
        // round trips of a confirm. A connection the server dropped while idle fails its first
        // statement instead; nothing was written by it, so the step is retried like any outage.
        // maxIdleTime keeps idle connections well inside the server's wait_timeout.
        .validationDepth(io.r2dbc.spi.ValidationDepth.LOCAL)
        // READ COMMITTED: the claim's CAS must not take gap locks, and each statement must see
        // the latest committed row (the classification read after a lost CAS).
        // UTC: leases are computed from the database's NOW(3) through UNIX_TIMESTAMP, which is
        // ambiguous in a session time zone with daylight saving time.
        .postAllocate(c -> Mono.from(c.createStatement("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED").execute())
            .flatMap(r -> Mono.from(r.getRowsUpdated()))
            .then(Mono.from(c.createStatement("SET SESSION time_zone = '+00:00'").execute()))
            .flatMap(r -> Mono.from(r.getRowsUpdated())).then())
        .build();
  }

  /** Raised inside work when an INSERT hit a unique key; the transaction is rolled back. */
  public static final class DuplicateKeyException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    DuplicateKeyException(Throwable cause) {
      super(cause.getMessage(), cause, false, false);
    }
  }

  /** Runs {@code work} in one transaction; commits when it completes, rolls back on error. */
  public <T> Mono<T> inTransaction(Function<Connection, Mono<T>> work) {
    return Mono.usingWhen(
            pool.create(),
            c -> Mono.fromRunnable(ROUND_TRIPS::increment).then(Mono.from(c.beginTransaction()))
                .then(Mono.defer(() -> work.apply(c)))
                .flatMap(v -> Mono.fromRunnable(ROUND_TRIPS::increment).then(Mono.from(c.commitTransaction())).thenReturn(v))
                .switchIfEmpty(Mono.defer(() -> Mono.from(c.commitTransaction()).then(Mono.empty())))
                .onErrorResume(e -> Mono.fromRunnable(ROUND_TRIPS::increment).then(Mono.from(c.rollbackTransaction()))
                    .onErrorResume(x -> Mono.empty()).then(Mono.error(e))),
            Connection::close)
        .timeout(WORK_TIMEOUT)
        .onErrorMap(Db::classify);
  }

  /**
   * Runs {@code work} as one transaction when it issues several dependent statements, or in
   * autocommit when it issues one: a single statement is atomic by itself, and BEGIN and COMMIT
   * would cost two more round trips.
   */
  public <T> Mono<T> atomically(boolean severalStatements, Function<Connection, Mono<T>> work) {
    return severalStatements ? inTransaction(work) : autocommit(work);
  }

  /** Runs {@code work} in autocommit on the control connection, which the work pool cannot starve. */
  public <T> Mono<T> control(Function<Connection, Mono<T>> work) {
    return Mono.usingWhen(control.create(), c -> Mono.defer(() -> work.apply(c)), Connection::close)
        .timeout(WORK_TIMEOUT)
        .onErrorMap(Db::classify);
  }

  /** Runs {@code work} on a connection in autocommit mode. */
  public <T> Mono<T> autocommit(Function<Connection, Mono<T>> work) {
    return Mono.usingWhen(pool.create(), c -> Mono.defer(() -> work.apply(c)), Connection::close)
        .timeout(WORK_TIMEOUT)
        .onErrorMap(Db::classify);
  }

  /**
   * Control flow raised by the caller's own work (not a driver failure): rolls the transaction
   * back and passes through unchanged.
   */
  public abstract static class Signal extends RuntimeException {
    private static final long serialVersionUID = 1L;

    protected Signal() {
      super(null, null, false, false);
    }
  }

  private static Throwable classify(Throwable e) {
    if (e instanceof Signal || e instanceof DuplicateKeyException || e instanceof StoreUnavailableException
        || e instanceof ContentionException) {
      return e;
    }
    if (isDuplicateKey(e)) {
      return new DuplicateKeyException(e);
    }
    int code = errorCode(e);
    if (code == ER_LOCK_DEADLOCK || code == ER_LOCK_WAIT_TIMEOUT) {
      // a lost race (Galera's certification conflicts arrive as 1213 at COMMIT too): the work
      // was rolled back and may run again at once; nothing is down
      return new ContentionException("MySQL " + code + ": " + e.getMessage(), e);
    }
    String what = e instanceof TimeoutException ? "MySQL did not answer within " + WORK_TIMEOUT.toSeconds() + "s" : "MySQL failed: " + e;
    return new StoreUnavailableException(what, e);
  }

  static Statement bind(Connection c, String sql, Object... args) {
    ROUND_TRIPS.increment();
    Statement s = c.createStatement(sql);
    for (int i = 0; i < args.length; i++) {
      Object a = args[i];
      if (a instanceof Null n) {
        s.bindNull(i, n.type());
      } else if (a == null) {
        s.bindNull(i, String.class);
      } else {
        s.bind(i, a);
      }
    }
    return s;
  }

  /** A typed null for binding. */
  record Null(Class<?> type) {}

  static final Null NULL_LONG = new Null(Long.class);
  static final Null NULL_STRING = new Null(String.class);

  /** Rows changed by one statement. Duplicate keys surface as {@link DuplicateKeyException}. */
  static Mono<Long> update(Connection c, String sql, Object... args) {
    return Flux.from(bind(c, sql, args).execute())
        .flatMap(r -> r.getRowsUpdated())
        .reduce(0L, Long::sum)
        .onErrorMap(Db::isDuplicateKey, DuplicateKeyException::new);
  }

  static final int ER_LOCK_WAIT_TIMEOUT = 1205;
  static final int ER_LOCK_DEADLOCK = 1213;

  /** The MySQL error code of the first R2DBC exception in the cause chain; 0 if none. */
  private static int errorCode(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof R2dbcException r) {
        return r.getErrorCode();
      }
    }
    return 0;
  }

  /** MySQL error 1062 (ER_DUP_ENTRY) only: other integrity violations are not "already there". */
  private static boolean isDuplicateKey(Throwable e) {
    return e instanceof R2dbcDataIntegrityViolationException v && v.getErrorCode() == 1062;
  }

  static <T> Mono<List<T>> query(Connection c, String sql, Function<Readable, T> mapper, Object... args) {
    return Flux.from(bind(c, sql, args).execute()).flatMap(r -> r.map(mapper)).collectList();
  }

  /** Plain SQL without parameters (DDL, locks). */
  static Mono<Void> exec(Connection c, String sql) {
    return Flux.from(c.createStatement(sql).execute()).flatMap(r -> r.getRowsUpdated()).then();
  }

  @Override
  public void close() {
    try {
      control.disposeLater().block(Duration.ofSeconds(5));
    } finally {
      pool.disposeLater().block(Duration.ofSeconds(10));
    }
  }
}
