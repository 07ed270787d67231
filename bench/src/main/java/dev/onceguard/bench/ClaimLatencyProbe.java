package dev.onceguard.bench;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.time.Clock;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * How long a claim takes when several are in flight, the shape of one poll batch: bursts of
 * {@code --burst} claims of new entities every 60 ms, first through the guard (its store: JDBC
 * worker threads, group commit, the full ledger and entity rows), then a floor: the same
 * statements on two narrow tables (BEGIN, INSERT ledger, INSERT entity, COMMIT) through plain
 * JDBC with a thread per connection. Prints p50/p90/p99 of each, after the first 100 bursts.
 *
 * <pre>
 * java -cp bench/target/onceguard-bench.jar dev.onceguard.bench.ClaimLatencyProbe [--bursts 300] [--burst 6] [--pool 8]
 * </pre>
 *
 * Uses this environment's MySQL (the {@code ONCEGUARD_MYSQL_*} variables) in databases of its own,
 * dropped at the end; Redis is not used.
 */
public final class ClaimLatencyProbe {
  private ClaimLatencyProbe() {}

  public static void main(String[] args) throws Exception {
    System.setProperty("ONCEGUARD_LOG_LEVEL", System.getProperty("ONCEGUARD_LOG_LEVEL", "WARN"));
    int bursts = 300;
    int burst = 6;
    int pool = 8;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--bursts" -> bursts = Integer.parseInt(args[i + 1]);
        case "--burst" -> burst = Integer.parseInt(args[i + 1]);
        case "--pool" -> pool = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i] + " (known: --bursts, --burst, --pool)");
      }
    }
    Env env = Env.fromEnvironment();
    report("the guard's store", guardStore(env, bursts, burst, pool));
    report("plain JDBC floor", jdbc(env, bursts, burst, pool));
  }

  private static List<Long> guardStore(Env env, int bursts, int burst, int pool) throws Exception {
    String db = Bench.newDatabaseName();
    String yaml = """
        kafka: {bootstrap-servers: 127.0.0.1:1}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: %d}
        machines:
          order:
            states: [created]
            events:
              create: {to: created}
        routes:
          - name: probe
            topics: [probe]
            machine: order
            entity-id: /id
            event: /event
            business-key: [/id]
            target: 127.0.0.1:1
        """.formatted(env.mysqlHost(), env.mysqlPort(), env.mysqlUser(), env.mysqlPassword().replace("'", "''"), db, pool);
    SidecarConfig cfg = new ConfigReader(Map.of()).parse(yaml, "probe");
    List<Long> lat = Collections.synchronizedList(new ArrayList<>());
    try (GuardRuntime rt = new GuardRuntime(cfg, Clock.SYSTEM)) {
      Guard g = rt.guard();
      RouteConfig r = cfg.routes().get(0);
      Extractor x = new Extractor(r, cfg.machines().get("order"));
      for (int b = 0; b < bursts; b++) {
        List<CompletableFuture<?>> fs = new ArrayList<>();
        for (int k = 0; k < burst; k++) {
          String json = "{\"id\":\"o" + b + "-" + k + "-" + System.nanoTime() + "\",\"event\":\"create\"}";
          var e = ((Extraction.Ok) x.extract(null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders())).event();
          long t0 = System.nanoTime();
          boolean counted = b >= 100;
          fs.add(g.claimInStore(r, e, new Source("probe", k, b)).toCompletableFuture().thenRun(() -> {
            if (counted) {
              lat.add(System.nanoTime() - t0);
            }
          }));
        }
        for (CompletableFuture<?> f : fs) {
          f.join();
        }
        Thread.sleep(60);
      }
    } finally {
      env.dropDatabase(db);
    }
    return lat;
  }

  private static List<Long> jdbc(Env env, int bursts, int burst, int pool) throws Exception {
    String db = Bench.newDatabaseName();
    String url = env.jdbcUrl(env.mysqlDatabase());
    try (Connection c = DriverManager.getConnection(url, env.mysqlUser(), env.mysqlPassword())) {
      c.createStatement().execute("CREATE DATABASE " + db);
      c.createStatement().execute("CREATE TABLE " + db + ".l (route VARCHAR(64), dedup_key CHAR(64), owner VARCHAR(64),"
          + " lease_until BIGINT, PRIMARY KEY (route, dedup_key)) ENGINE=InnoDB");
      c.createStatement().execute("CREATE TABLE " + db + ".e (machine VARCHAR(64), entity_id VARCHAR(255), state VARCHAR(64),"
          + " pending_key CHAR(64), PRIMARY KEY (machine, entity_id)) ENGINE=InnoDB");
    }
    BlockingQueue<Connection> conns = new LinkedBlockingQueue<>();
    ExecutorService threads = Executors.newFixedThreadPool(pool);
    List<Long> lat = Collections.synchronizedList(new ArrayList<>());
    try {
      for (int i = 0; i < pool; i++) {
        Connection c = DriverManager.getConnection(url, env.mysqlUser(), env.mysqlPassword());
        c.setTransactionIsolation(Connection.TRANSACTION_READ_COMMITTED);
        conns.add(c);
      }
      for (int b = 0; b < bursts; b++) {
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        for (int k = 0; k < burst; k++) {
          String id = "o" + b + "-" + k + "-" + System.nanoTime();
          long t0 = System.nanoTime();
          boolean counted = b >= 100;
          fs.add(threads.submit(() -> {
            Connection c = conns.take();
            try {
              c.setAutoCommit(false);
              try (PreparedStatement p = c.prepareStatement("INSERT INTO " + db + ".l VALUES ('probe', SHA2(?, 256), 'me', 1)")) {
                p.setString(1, id);
                p.executeUpdate();
              }
              try (PreparedStatement p = c.prepareStatement("INSERT INTO " + db + ".e VALUES ('order', ?, 'created', SHA2(?, 256))")) {
                p.setString(1, id);
                p.setString(2, id);
                p.executeUpdate();
              }
              c.commit();
              c.setAutoCommit(true);
            } finally {
              conns.add(c);
            }
            if (counted) {
              lat.add(System.nanoTime() - t0);
            }
            return null;
          }));
        }
        for (java.util.concurrent.Future<?> f : fs) {
          f.get();
        }
        Thread.sleep(60);
      }
    } finally {
      threads.shutdownNow();
      for (Connection c : conns) {
        c.close();
      }
      env.dropDatabase(db);
    }
    return lat;
  }

  private static void report(String what, List<Long> nanos) {
    long[] s = nanos.stream().mapToLong(Long::longValue).sorted().toArray();
    System.out.printf(Locale.ROOT, "%-28s p50 %6.2f ms  p90 %6.2f ms  p99 %6.2f ms  (%d claims)%n", what, s[s.length / 2] / 1e6,
        s[s.length * 9 / 10] / 1e6, s[Math.min(s.length - 1, s.length * 99 / 100)] / 1e6, s.length);
  }
}
