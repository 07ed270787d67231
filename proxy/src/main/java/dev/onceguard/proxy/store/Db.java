package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.trace.RecordTimeline;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLNonTransientConnectionException;
import java.sql.SQLTimeoutException;
import java.sql.SQLTransientConnectionException;
import java.sql.Statement;
import java.sql.Types;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * MySQL/MariaDB through JDBC (MariaDB Connector/J): a fixed set of worker threads, each owning one
 * connection, that run units of work in a transaction or in autocommit, plus the helpers the store
 * needs to bind parameters and read rows. Every driver failure is mapped to
 * {@link DuplicateKeyException} (a unique index said no: data), {@link ContentionException}
 * (deadlock or lock-wait timeout: a lost race, retry at once) or
 * {@link StoreUnavailableException} (anything else: the store is down or broken).
 *
 * <p><b>Threading.</b> The asynchronous methods queue the work and return at once; the work runs
 * on a worker thread, blocking on its own connection, and the returned stage completes on that
 * thread. A connection is only ever used by the thread that owns it, so there is no pool to borrow
 * from and no validation query per use. Work must not wait for other work of the same {@code Db}
 * (every worker could be waiting). Expensive; one per sidecar.
 *
 * <p><b>Bounded.</b> At most {@link #queueBound()} units of work wait for a worker, and
 * {@link #CONTROL_QUEUE_BOUND} for the control connection; work beyond either fails at once with
 * {@link StoreUnavailableException} (and is counted, {@link #refused()}) instead of piling up in
 * the heap while MySQL is slow. The callers bound their own work first (the pipeline its records in
 * flight, the Guard API its calls in flight), and the sidecar sizes the queue for all of them, so
 * the bound is a backstop that a caller reaches only when its own bound failed.
 *
 * <p>Why JDBC on threads and not a reactive driver: the guard's steps are short dependent
 * statements; measured on this project's bench, the same claim statements took about half the
 * latency through blocking JDBC that they took through r2dbc-mysql, whose event-loop threads
 * were the largest consumer of the guarded JVM's CPU.
 */
public final class Db implements AutoCloseable {
  /**
   * Upper bound on one statement's wait for the server (the driver's socket timeout), so a hung
   * server fails the step (and pauses work) instead of hanging it.
   */
  static final Duration WORK_TIMEOUT = Duration.ofSeconds(15);
  /** A connection idle this long is pinged before use: the server or a proxy may have dropped it. */
  private static final long IDLE_CHECK_NANOS = TimeUnit.SECONDS.toNanos(30);
  /** Units of work queued per worker connection by default (tools and tests; the sidecar sizes its own). */
  static final int DEFAULT_QUEUE_PER_CONNECTION = 256;
  /**
   * Heartbeats queued for the control connection at most: one runs every second, and while a hung
   * server holds one for the socket timeout, the rest would pile up.
   */
  static final int CONTROL_QUEUE_BOUND = 8;

  private final JdbcTarget target;
  private final ThreadPoolExecutor workers;
  /**
   * One connection of its own for liveness (the owner heartbeat): queued behind claims on busy
   * workers, a heartbeat would arrive late and make a busy process look dead.
   */
  private final ThreadPoolExecutor control;
  private final int queueBound;
  /** Work refused at a queue bound. */
  private final LongAdder refused = new LongAdder();
  /**
   * Round trips: statements sent, BEGIN/COMMIT/ROLLBACK and connection opens included, where
   * statements sent together ({@link #together}) count once.
   */
  private final LongAdder roundTrips;

  /** Round trips to MySQL made through this {@code Db} so far (for metrics, benchmarks and tests). */
  public long roundTrips() {
    return roundTrips.sum();
  }

  /** A unit of work on one connection. */
  @FunctionalInterface
  public interface Work<T> {
    T run(Connection c) throws SQLException;
  }

  /** Reads one row of a result. */
  @FunctionalInterface
  public interface Row<T> {
    T read(ResultSet r) throws SQLException;
  }

  /** With {@value #DEFAULT_QUEUE_PER_CONNECTION} queued units of work per connection at most. */
  public Db(MysqlConfig cfg) {
    this(cfg, DEFAULT_QUEUE_PER_CONNECTION * cfg.poolSize());
  }

  /**
   * @param queueBound units of work that may wait for a worker; more fail at once with
   *     {@link StoreUnavailableException}
   */
  public Db(MysqlConfig cfg, int queueBound) {
    this(cfg, queueBound, new LongAdder());
  }

  /**
   * @param roundTrips counts the statements this {@code Db} sends (several may share one counter)
   */
  public Db(MysqlConfig cfg, int queueBound, LongAdder roundTrips) {
    this.roundTrips = roundTrips;
    if (queueBound < 1) {
      throw new IllegalArgumentException("queueBound must be at least 1: " + queueBound);
    }
    this.target = JdbcTarget.of(cfg, WORK_TIMEOUT);
    this.queueBound = queueBound;
    this.workers = executor("onceguard-mysql-", cfg.poolSize(), queueBound);
    this.control = executor("onceguard-mysql-control-", 1, CONTROL_QUEUE_BOUND);
  }

  private ThreadPoolExecutor executor(String name, int threads, int queued) {
    AtomicInteger n = new AtomicInteger();
    return new ThreadPoolExecutor(threads, threads, 0, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(queued),
        r -> new Worker(r, name + n.incrementAndGet()));
  }

  /** Units of work that may wait for a worker at most. */
  public int queueBound() {
    return queueBound;
  }

  /** Units of work waiting for a worker now (the control connection's not included). */
  public int queued() {
    return workers.getQueue().size();
  }

  /** Units of work refused so far because their queue was at its bound. */
  public long refused() {
    return refused.sum();
  }

  /** A thread that owns one connection, opened on first use and again after a failure. */
  private final class Worker extends Thread {
    private Connection conn;
    private long lastUsed;
    /** Statements the current unit of work has sent so far. */
    private int sent;

    Worker(Runnable r, String name) {
      super(r, name);
      setDaemon(true);
    }

    void counted() {
      roundTrips.increment();
      sent++;
    }

    Connection connection() throws SQLException {
      if (conn != null && System.nanoTime() - lastUsed > IDLE_CHECK_NANOS && !conn.isValid(2)) {
        discard();
      }
      if (conn == null) {
        roundTrips.increment();
        conn = target.open();
      }
      lastUsed = System.nanoTime();
      return conn;
    }

    /** Closes the connection after a failure that may have left it broken or inside a transaction. */
    void discard() {
      Connection c = conn;
      conn = null;
      if (c != null) {
        try {
          c.close();
        } catch (SQLException ignored) {
          // it is broken already; nothing to keep
        }
      }
    }

    @Override
    public void run() {
      try {
        super.run();
      } finally {
        discard();
      }
    }
  }

  /** Raised inside work when an INSERT hit a unique key; a transaction is rolled back. */
  public static final class DuplicateKeyException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    DuplicateKeyException(Throwable cause) {
      super(cause.getMessage(), cause, false, false);
    }
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

  /** Runs {@code work} in one transaction; commits when it returns, rolls back when it throws. */
  public <T> CompletableFuture<T> inTransaction(Work<T> work) {
    return submit(workers, c -> transaction(c, work));
  }

  /**
   * Runs {@code work} as one transaction on {@code c}, inside a unit of work that continues on the
   * same connection afterwards (e.g. reads what refused a claim once the others are committed).
   */
  static <T> T transaction(Connection c, Work<T> work) throws SQLException {
    exec(c, "START TRANSACTION");
    T v = rollingBack(c, work);
    RecordTimeline.beforeCommit();
    exec(c, "COMMIT");
    return v;
  }

  /**
   * Runs {@code work}, which begins a transaction on {@code c} (its START TRANSACTION may travel
   * with its first statements, see {@link #together}), and rolls the transaction back if
   * {@code work} throws; the work commits it itself.
   */
  static <T> T rollingBack(Connection c, Work<T> work) throws SQLException {
    try {
      return work.run(c);
    } catch (Throwable e) {
      if (isConnectionLoss(e)) {
        // nothing to roll back on a lost connection (the server rolls back what it leaves open),
        // and a unit whose first round trip failed so runs again on a new connection (Task)
        throw e;
      }
      try {
        exec(c, "ROLLBACK");
      } catch (SQLException x) {
        // the connection's state is unknown now: report an outage, so that it is discarded
        x.addSuppressed(e);
        throw x;
      }
      throw e;
    }
  }

  /**
   * Statements sent as one: one round trip where each alone costs one (the connections allow
   * multi-statements, see {@link JdbcTarget}). {@code args} holds the first statement's values,
   * then the second's, and so on. The server runs them in order and stops at the first that fails:
   * that failure is thrown (a duplicate key as {@link DuplicateKeyException}) and the statements
   * before it have taken effect, so inside a transaction the caller rolls back
   * ({@link #rollingBack}).
   *
   * @return each statement's update count, in order (0 for START TRANSACTION and COMMIT)
   */
  static long[] together(Connection c, List<String> statements, Object... args) throws SQLException {
    try (PreparedStatement s = prepare(c, String.join(";\n", statements), args)) {
      long[] counts = new long[statements.size()];
      int i = 0;
      boolean resultSet = s.execute();
      while (true) {
        long n = resultSet ? 0 : s.getLargeUpdateCount();
        if (!resultSet && n == -1) {
          break;
        }
        if (i < counts.length) {
          counts[i] = n;
        }
        i++;
        resultSet = s.getMoreResults();
      }
      if (i != counts.length) {
        throw new SQLException(counts.length + " statements sent together answered " + i + " results");
      }
      return counts;
    } catch (SQLException e) {
      if (isDuplicateKey(e)) {
        throw new DuplicateKeyException(e);
      }
      throw e;
    }
  }

  /** {@link #transaction} when {@code work} issues several dependent statements, else {@code work} alone. */
  static <T> T atomically(Connection c, boolean severalStatements, Work<T> work) throws SQLException {
    return severalStatements ? transaction(c, work) : work.run(c);
  }

  /**
   * Runs {@code work} as one transaction when it issues several dependent statements, or in
   * autocommit when it issues one: a single statement is atomic by itself, and BEGIN and COMMIT
   * would cost two more round trips.
   */
  public <T> CompletableFuture<T> atomically(boolean severalStatements, Work<T> work) {
    return severalStatements ? inTransaction(work) : autocommit(work);
  }

  /** Runs {@code work} on a connection in autocommit mode. */
  public <T> CompletableFuture<T> autocommit(Work<T> work) {
    return submit(workers, work);
  }

  /** Runs {@code work} in autocommit on the control connection, which busy workers cannot delay. */
  public <T> CompletableFuture<T> control(Work<T> work) {
    return submit(control, work);
  }

  /**
   * Runs {@code work} in autocommit and waits for it: for start-up, migrations and tests, never
   * on a worker thread. Failures are thrown as the mapped runtime exceptions.
   */
  public <T> T blocking(Work<T> work) {
    try {
      return autocommit(work).join();
    } catch (CompletionException e) {
      throw e.getCause() instanceof RuntimeException r ? r : e;
    }
  }

  /** One statement in autocommit, waited for: every row as its column values in order (for tools and tests). */
  public List<List<Object>> select(String sql, Object... args) {
    return blocking(c -> query(c, sql, r -> {
      List<Object> row = new ArrayList<>();
      for (int i = 1; i <= r.getMetaData().getColumnCount(); i++) {
        row.add(r.getObject(i));
      }
      return row;
    }, args));
  }

  /** One statement in autocommit, waited for: the rows it changed (for tools and tests). */
  public long execute(String sql, Object... args) {
    return blocking(c -> update(c, sql, args));
  }

  private <T> CompletableFuture<T> submit(ThreadPoolExecutor pool, Work<T> work) {
    Task<T> task = new Task<>(work);
    try {
      pool.execute(task);
    } catch (RejectedExecutionException e) {
      if (pool.isShutdown()) {
        task.abandon();
      } else {
        refused.increment();
        task.result.completeExceptionally(new StoreUnavailableException("MySQL store saturated: " + pool.getQueue().size()
            + " steps already wait for " + pool.getMaximumPoolSize() + " connection(s); retry later", null));
      }
    }
    return task.result;
  }

  /** One unit of work queued for a worker; {@link #abandon} fails it if the store closes first. */
  private static final class Task<T> implements Runnable {
    final Work<T> work;
    final CompletableFuture<T> result = new CompletableFuture<>();

    Task(Work<T> work) {
      this.work = work;
    }

    @Override
    public void run() {
      Worker w = (Worker) Thread.currentThread();
      boolean reused = w.conn != null;
      long started = System.nanoTime();
      w.sent = 0;
      try {
        result.complete(work.run(w.connection()));
      } catch (Throwable e) {
        if (reused && w.sent <= 1 && isConnectionLoss(e) && System.nanoTime() - started < STALE_FAILS_WITHIN_NANOS) {
          // A kept connection that the server or the network closed while it was idle fails at
          // once, on the unit's first statement: run the unit again on a new connection. The
          // server may still have run that statement (the connection broke after sending it), so
          // every unit must be safe to run twice: the store's steps are fenced on (owner, attempt)
          // and read back what an unanswered confirm or abort did (MysqlGuardStore). A failure
          // later in a unit is left to the caller, which knows whether the step can run again.
          w.discard();
          w.sent = 0;
          try {
            result.complete(work.run(w.connection()));
          } catch (Throwable again) {
            fail(w, again, result);
          }
        } else {
          fail(w, e, result);
        }
      }
    }

    void abandon() {
      result.completeExceptionally(new StoreUnavailableException("MySQL store closed before this step ran", null));
    }
  }

  private static <T> void fail(Worker w, Throwable e, CompletableFuture<T> result) {
    Throwable mapped = classify(e);
    if (mapped instanceof StoreUnavailableException) {
      // the connection may be broken, or still inside the failed transaction
      w.discard();
    }
    result.completeExceptionally(mapped);
  }

  /** A stale connection fails within this; a hung server takes the socket timeout. */
  private static final long STALE_FAILS_WITHIN_NANOS = TimeUnit.SECONDS.toNanos(1);

  /** The connection is gone (closed, reset, refused), as opposed to a statement the server refused. */
  private static boolean isConnectionLoss(Throwable e) {
    return e instanceof SQLNonTransientConnectionException || e instanceof SQLTransientConnectionException
        || e instanceof SQLException s && s.getSQLState() != null && s.getSQLState().startsWith("08");
  }

  private static Throwable classify(Throwable e) {
    if (e instanceof Signal || e instanceof DuplicateKeyException || e instanceof StoreUnavailableException
        || e instanceof ContentionException) {
      return e;
    }
    if (isDuplicateKey(e)) {
      return new DuplicateKeyException(e);
    }
    int code = e instanceof SQLException s ? s.getErrorCode() : 0;
    if (code == ER_LOCK_DEADLOCK || code == ER_LOCK_WAIT_TIMEOUT) {
      // a lost race (Galera's certification conflicts arrive as 1213 at COMMIT too): the work
      // was rolled back and may run again at once; nothing is down
      return new ContentionException("MySQL " + code + ": " + e.getMessage(), e);
    }
    String what = e instanceof SQLTimeoutException
        ? "MySQL did not answer within " + WORK_TIMEOUT.toSeconds() + "s: " + e.getMessage()
        : "MySQL failed: " + (e instanceof JdbcTarget.TlsFailure ? e.getMessage() : withCauses(e));
    return new StoreUnavailableException(what, e);
  }

  /**
   * {@code e} and the causes under it: the driver wraps the server's answer ("Initialization
   * command fail" around the error of the failing statement, say), and an operator needs the latter.
   */
  static String withCauses(Throwable e) {
    StringBuilder sb = new StringBuilder(String.valueOf(e));
    int depth = 0;
    for (Throwable c = e.getCause(); c != null && c != e && depth < 4; c = c.getCause(), depth++) {
      sb.append("; caused by ").append(c);
    }
    return sb.toString();
  }

  static final int ER_DUP_ENTRY = 1062;
  static final int ER_LOCK_WAIT_TIMEOUT = 1205;
  static final int ER_LOCK_DEADLOCK = 1213;

  /** MySQL error 1062 (ER_DUP_ENTRY) only: other integrity violations are not "already there". */
  private static boolean isDuplicateKey(Throwable e) {
    return e instanceof SQLException s && s.getErrorCode() == ER_DUP_ENTRY;
  }

  /** A typed null for binding. */
  record Null(int sqlType) {}

  static final Null NULL_LONG = new Null(Types.BIGINT);
  static final Null NULL_INT = new Null(Types.INTEGER);
  static final Null NULL_STRING = new Null(Types.VARCHAR);

  /** Work runs on a {@link Worker}, which counts the statement for its {@code Db} and its unit of work. */
  private static void counted() {
    if (Thread.currentThread() instanceof Db.Worker w) {
      w.counted();
    }
  }

  private static PreparedStatement prepare(Connection c, String sql, Object... args) throws SQLException {
    counted();
    PreparedStatement s = c.prepareStatement(sql);
    for (int i = 0; i < args.length; i++) {
      Object a = args[i];
      if (a instanceof Null n) {
        s.setNull(i + 1, n.sqlType());
      } else if (a == null) {
        s.setNull(i + 1, Types.VARCHAR);
      } else {
        s.setObject(i + 1, a);
      }
    }
    return s;
  }

  /** Rows changed by one statement. A duplicate key throws {@link DuplicateKeyException}. */
  static long update(Connection c, String sql, Object... args) throws SQLException {
    try (PreparedStatement s = prepare(c, sql, args)) {
      return s.executeLargeUpdate();
    } catch (SQLException e) {
      if (isDuplicateKey(e)) {
        throw new DuplicateKeyException(e);
      }
      throw e;
    }
  }

  /** Rows changed by one statement; 0 where a duplicate key refused it (nothing was written). */
  static long insertUnlessDuplicate(Connection c, String sql, Object... args) throws SQLException {
    try {
      return update(c, sql, args);
    } catch (DuplicateKeyException e) {
      return 0;
    }
  }

  static <T> List<T> query(Connection c, String sql, Row<T> row, Object... args) throws SQLException {
    try (PreparedStatement s = prepare(c, sql, args); ResultSet r = s.executeQuery()) {
      List<T> out = new ArrayList<>();
      while (r.next()) {
        out.add(row.read(r));
      }
      return out;
    }
  }

  /** Plain SQL without parameters (DDL, transaction control). */
  static void exec(Connection c, String sql) throws SQLException {
    counted();
    try (Statement s = c.createStatement()) {
      s.execute(sql);
    }
  }

  /** A nullable BIGINT column. */
  static Long longOrNull(ResultSet r, int column) throws SQLException {
    long v = r.getLong(column);
    return r.wasNull() ? null : v;
  }

  /** A nullable BIGINT column. */
  static Long longOrNull(ResultSet r, String column) throws SQLException {
    long v = r.getLong(column);
    return r.wasNull() ? null : v;
  }

  /** A nullable INT column. */
  static Integer intOrNull(ResultSet r, String column) throws SQLException {
    int v = r.getInt(column);
    return r.wasNull() ? null : v;
  }

  @Override
  public void close() {
    shutdown(control, 5);
    shutdown(workers, 10);
  }

  /**
   * Lets queued work finish within the bound (each worker closes its connection as it ends); work
   * still queued after it fails with {@link StoreUnavailableException}, so no caller waits forever.
   */
  private static void shutdown(ThreadPoolExecutor pool, int seconds) {
    pool.shutdown();
    try {
      if (!pool.awaitTermination(seconds, TimeUnit.SECONDS)) {
        abandon(pool.shutdownNow());
      }
    } catch (InterruptedException e) {
      abandon(pool.shutdownNow());
      Thread.currentThread().interrupt();
    }
  }

  private static void abandon(List<Runnable> queued) {
    for (Runnable r : queued) {
      if (r instanceof Task<?> t) {
        t.abandon();
      }
    }
  }
}
