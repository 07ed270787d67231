package dev.onceguard.bench.contention;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.bench.seed.BenchArgs;
import dev.onceguard.bench.seed.DelayProxy;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Q3 of docs/answers.md: does {@code SELECT … FOR UPDATE} or OnceGuard's claim have the better
 * p99 when four consumer instances (separate processes) transition the same hot entities, with a
 * business call of 0 to 20 ms and 0 to 10 ms of round-trip time to MySQL? Each cell is measured
 * with all instances and with one, for contrast; the variants are {@link ForUpdateLoop} and
 * {@link ClaimLoop}.
 *
 * <pre>
 * java -cp bench/target/onceguard-bench.jar dev.onceguard.bench.contention.ContentionBench
 *   [--out bench/target/contention.md] [--plan 0:0,2:0,10:0,2:1,2:5,2:20] [--retry-cell 2:20:20|none]
 *   [--instances 4] [--entities 64] [--seconds 5] [--warmup 1] [--quick]
 * </pre>
 *
 * {@code --plan} lists the settings as {@code rtt-ms:business-call-ms}; {@code --retry-cell} runs the
 * claim once more with all instances at one setting with a shorter {@code early-arrival-retry}
 * ({@code rtt-ms:business-call-ms:retry-ms}). MySQL is this environment's
 * ({@code ONCEGUARD_MYSQL_HOST}, {@code _PORT}, {@code _USER}, {@code _PASSWORD}; 127.0.0.1:3306,
 * root by default), reached through a {@link DelayProxy} in this JVM. The orchestrator makes a
 * database {@code og_contention_<random>} (OnceGuard's schema, the FOR UPDATE table, the entities),
 * starts the worker JVMs once, and for each cell tells the cell's workers what to run, then to go
 * together. The database is dropped and the workers stopped at the end, also on failure or Ctrl-C.
 * Writes the markdown fragment to {@code --out} and prints it.
 */
public final class ContentionBench {
  static final String DEFAULT_PLAN = "0:0,2:0,10:0,2:1,2:5,2:20";
  static final String DEFAULT_RETRY_CELL = "2:20:20";

  private final Object cleanupLock = new Object();
  private final List<WorkerProcess> workers = new ArrayList<>();
  private DelayProxy proxy;
  private String database;
  private String adminUrl;
  private String user;
  private String password;
  private boolean cleaned;

  private ContentionBench() {}

  public static void main(String[] args) throws Exception {
    System.setProperty("ONCEGUARD_LOG_LEVEL", System.getProperty("ONCEGUARD_LOG_LEVEL", "WARN"));
    Map<String, String> a = BenchArgs.parse(args, Set.of("quick"));
    new ContentionBench().run(a);
  }

  private void run(Map<String, String> a) throws Exception {
    boolean quick = a.containsKey("quick");
    double seconds = Double.parseDouble(a.getOrDefault("seconds", quick ? "2" : "5"));
    double warmup = Double.parseDouble(a.getOrDefault("warmup", quick ? "0.5" : "1"));
    int instances = Integer.parseInt(a.getOrDefault("instances", "4"));
    int entities = Integer.parseInt(a.getOrDefault("entities", "64"));
    List<ContentionReport.Setting> plan = plan(a.getOrDefault("plan", DEFAULT_PLAN));
    String retrySpec = a.getOrDefault("retry-cell", DEFAULT_RETRY_CELL);
    RetryCell retryCell = retrySpec.equals("none") ? null : retryCell(retrySpec);
    Path out = Path.of(a.getOrDefault("out", "bench/target/contention.md"));
    String host = env("ONCEGUARD_MYSQL_HOST", "127.0.0.1");
    int port = Integer.parseInt(env("ONCEGUARD_MYSQL_PORT", "3306"));
    user = env("ONCEGUARD_MYSQL_USER", "root");
    password = System.getenv().getOrDefault("ONCEGUARD_MYSQL_PASSWORD", "");

    Runtime.getRuntime().addShutdownHook(new Thread(this::cleanup, "contention-cleanup"));
    long t0 = System.nanoTime();
    String loadBefore = BenchArgs.loadavg();
    List<ContentionReport.Result> results = new ArrayList<>();
    Map<Double, Double> probes = new LinkedHashMap<>();
    ContentionReport.Retuned retuned = null;
    try {
      database = "og_contention_" + String.format("%06x", ThreadLocalRandom.current().nextInt(1 << 24));
      adminUrl = "jdbc:mariadb://" + host + ":" + port + "/";
      try (Connection c = DriverManager.getConnection(adminUrl, user, password); Statement s = c.createStatement()) {
        s.execute("CREATE DATABASE " + database);
        ForUpdateLoop.createTable(c, database, entities);
      }
      ClaimSide.createSchemaAndEntities(new ClaimSide.Target(host, port, database, user, password), entities);
      for (int i = 0; i < instances; i++) {
        workers.add(WorkerProcess.start(i));
      }
      proxy = new DelayProxy(host, port);
      ClaimSide.Target viaProxy = new ClaimSide.Target("127.0.0.1", proxy.port(), database, user, password);
      System.out.printf(Locale.ROOT, "[contention] database %s, %d entities, %d instance processes, plan %s, %s s per cell after %s s"
          + " of warm-up; MySQL through a user-space delaying proxy on 127.0.0.1:%d; load %s%n", database, entities, instances,
          a.getOrDefault("plan", DEFAULT_PLAN), seconds, warmup, proxy.port(), loadBefore);
      int cell = 0;
      // JIT warm-up of every worker on both variants, not reported: the first setting measured would
      // otherwise meet colder code than the others
      proxy.setRtt(0);
      for (Variant v : Variant.values()) {
        runCell(new Order(v, viaProxy, entities, 0, 0, Math.round(Math.max(warmup, 1) * 2000), 0, cell++, 0), instances);
      }
      for (ContentionReport.Setting st : plan) {
        proxy.setRtt(st.rttMs());
        probes.computeIfAbsent(st.rttMs(), r -> probe(viaProxy));
        for (int n : instances == 1 ? new int[] {1} : new int[] {1, instances}) {
          // alternate which variant goes first, so that drift in the machine's load does not always favour the same one
          Variant[] order = cell % 2 == 0 ? Variant.values() : new Variant[] {Variant.CLAIM, Variant.FOR_UPDATE};
          for (Variant v : order) {
            Cell c = new Cell(v, st.rttMs(), st.holdMs(), n);
            Order o = new Order(v, viaProxy, entities, st.holdMs(), Math.round(warmup * 1000), Math.round(seconds * 1000), 0, cell++,
                0);
            Figures f = runCell(o, n).figures();
            results.add(new ContentionReport.Result(c, f));
            print(v.toString(), st, n, f);
          }
        }
      }
      if (retryCell != null) {
        ContentionReport.Setting st = retryCell.setting();
        proxy.setRtt(st.rttMs());
        probes.computeIfAbsent(st.rttMs(), r -> probe(viaProxy));
        Order o = new Order(Variant.CLAIM, viaProxy, entities, st.holdMs(), Math.round(warmup * 1000), Math.round(seconds * 1000), 0,
            cell++, retryCell.retryMs());
        Figures f = runCell(o, instances).figures();
        retuned = new ContentionReport.Retuned(st, retryCell.retryMs(), f);
        print("CLAIM, early-arrival-retry " + retryCell.retryMs() + " ms", st, instances, f);
      }
    } finally {
      cleanup();
    }
    ContentionReport.Setup setup = new ContentionReport.Setup(entities, instances, seconds, warmup,
        ClaimSide.defaultEarlyArrivalRetry().toMillis(), ClaimSide.POOL_SIZE, Runtime.getRuntime().availableProcessors(), loadBefore,
        BenchArgs.loadavg());
    String page = ContentionReport.render(setup, probes, results, retuned);
    if (out.getParent() != null) {
      Files.createDirectories(out.getParent());
    }
    Files.writeString(out, page);
    System.out.println();
    System.out.println(page);
    System.out.printf(Locale.ROOT, "[contention] %.0f s in all; wrote %s%n", (System.nanoTime() - t0) / 1e9, out);
  }

  /** One cell on workers 0..n-1: each prepares, then all go together; their samples merged. */
  private Samples runCell(Order o, int n) throws Exception {
    ObjectMapper json = new ObjectMapper();
    for (int i = 0; i < n; i++) {
      workers.get(i).send("cell " + json.writeValueAsString(o.forInstance(i)));
    }
    for (int i = 0; i < n; i++) {
      workers.get(i).await("ready", 120_000);
    }
    for (int i = 0; i < n; i++) {
      workers.get(i).send("go");
    }
    List<Samples> parts = new ArrayList<>();
    long timeout = o.warmupMs() + o.measureMs() + 120_000;
    for (int i = 0; i < n; i++) {
      parts.add(json.readValue(workers.get(i).await("result", timeout), Samples.class));
    }
    return Samples.merge(parts);
  }

  /** Median of {@code SELECT 1} through the proxy at its current RTT, so the page shows the RTT really added. */
  private static double probe(ClaimSide.Target t) {
    try (Connection c = DriverManager.getConnection("jdbc:mariadb://" + t.host() + ":" + t.port() + "/" + t.database(), t.user(),
        t.password()); Statement s = c.createStatement()) {
      long[] lat = new long[40];
      for (int i = 0; i < lat.length; i++) {
        long start = System.nanoTime();
        try (ResultSet rs = s.executeQuery("SELECT 1")) {
          rs.next();
        }
        lat[i] = System.nanoTime() - start;
      }
      long[] kept = Arrays.copyOfRange(lat, 10, lat.length);
      Arrays.sort(kept);
      return kept[kept.length / 2] / 1e6;
    } catch (SQLException e) {
      throw new IllegalStateException("probe through the proxy failed: " + e, e);
    }
  }

  /** Idempotent: from the finally block and from the shutdown hook (Ctrl-C). */
  private void cleanup() {
    synchronized (cleanupLock) {
      if (cleaned) {
        return;
      }
      cleaned = true;
      workers.forEach(WorkerProcess::close);
      if (proxy != null) {
        try {
          proxy.close();
        } catch (IOException ignored) {
          // best effort
        }
      }
      if (database != null) {
        try (Connection c = DriverManager.getConnection(adminUrl, user, password); Statement s = c.createStatement()) {
          s.execute("DROP DATABASE IF EXISTS " + database);
        } catch (SQLException e) {
          System.err.println("[contention] could not drop " + database + ": " + e);
        }
      }
    }
  }

  private static void print(String what, ContentionReport.Setting st, int n, Figures f) {
    System.out.printf(Locale.ROOT, "[contention] %-10s %s, %d instance(s): %.0f/s, p50 %s p99 %s ms, wait p50 %s p99 %s ms,"
            + " met busy %s (n=%d)%n", what, st.text(), n, f.perSecond(), ContentionReport.ms(f.p50Ms()),
        ContentionReport.ms(f.p99Ms()), ContentionReport.ms(f.waitP50Ms()), ContentionReport.ms(f.waitP99Ms()),
        ContentionReport.pct(f.metBusyShare()), f.count());
  }

  /** The claim once more, with all instances, at one setting and a shorter {@code early-arrival-retry}. */
  record RetryCell(ContentionReport.Setting setting, long retryMs) {}

  static RetryCell retryCell(String spec) {
    String[] f = spec.trim().split(":");
    if (f.length != 3) {
      throw new IllegalArgumentException("--retry-cell: '" + spec + "' is not rtt-ms:business-call-ms:early-arrival-retry-ms (or none)");
    }
    return new RetryCell(new ContentionReport.Setting(Double.parseDouble(f[0]), Integer.parseInt(f[1])), Long.parseLong(f[2]));
  }

  static List<ContentionReport.Setting> plan(String spec) {
    List<ContentionReport.Setting> out = new ArrayList<>();
    for (String part : spec.split(",")) {
      String[] f = part.trim().split(":");
      if (f.length != 2) {
        throw new IllegalArgumentException("--plan: '" + part + "' is not rtt-ms:business-call-ms");
      }
      out.add(new ContentionReport.Setting(Double.parseDouble(f[0]), Integer.parseInt(f[1])));
    }
    return out;
  }

  private static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? def : v.trim();
  }
}
