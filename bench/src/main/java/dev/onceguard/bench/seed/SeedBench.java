package dev.onceguard.bench.seed;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
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
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * Does {@code SELECT … FOR UPDATE} (row lock held across the client's round trips) blow up
 * in p99 at 4+ consumer instances while a one-statement CAS {@code UPDATE … WHERE state=? AND
 * version=?} stays flat, once there is network round-trip time between the workers and MySQL?
 *
 * <pre>
 * java -cp bench/target/onceguard-bench.jar dev.onceguard.bench.seed.SeedBench [--quick]
 *   [--rtts 0,0.5,2] [--workers 1,4,16] [--entities 64,1024] [--seconds 4] [--no-netns]
 *   [--db-host 127.0.0.1] [--db-port 3306] [--out bench/target/seed.json]
 * </pre>
 *
 * The parent makes a database {@code og_seed_<random>}, a network namespace with a veth pair and
 * {@code netem delay rtt/2} on both ends, and for each RTT re-executes this class with
 * {@code --worker} inside the namespace ({@code ip netns exec}); the worker prints one JSON line per
 * cell. Without a namespace (not root) or without {@code sch_netem} in the kernel (some VM kernels
 * are built without CONFIG_NET_SCH_NETEM) it falls back to {@link DelayProxy}, a delaying TCP
 * proxy in this JVM, runs the worker JVM outside any namespace, and says so on stdout.
 * Everything it made (namespace, veth, socat, database) is removed at the end, also on failure or
 * Ctrl-C. Writes a table to stdout and a JSON array to {@code seed.json} beside the jar.
 */
public final class SeedBench {

    private SeedBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> a = BenchArgs.parse(args, Set.of("quick", "worker", "no-netns"));
        if (a.containsKey("worker")) {
            String url = a.get("url");
            new SeedWorker(url, Double.parseDouble(a.get("rtt")), Long.parseLong(a.get("duration-ms")),
                    Long.parseLong(a.get("warmup-ms")))
                    .run(ints(a.get("workers")), ints(a.get("entities")));
            return;
        }
        System.exit(new SeedBench().orchestrate(a));
    }

    // ---------------------------------------------------------------- parent

    private final Object cleanupLock = new Object();
    private NetLab lab;
    private DelayProxy proxy;
    private Process child;
    private String db;
    private String adminUrl;
    private boolean cleaned;

    private int orchestrate(Map<String, String> a) throws Exception {
        boolean quick = a.containsKey("quick");
        double[] rtts = doubles(a.getOrDefault("rtts", quick ? "0,2" : "0,0.5,2"));
        int[] workers = ints(a.getOrDefault("workers", "1,4,16"));
        int[] entities = ints(a.getOrDefault("entities", "64,1024"));
        double seconds = Double.parseDouble(a.getOrDefault("seconds", quick ? "2" : "4"));
        long durationMs = Math.round(seconds * 1000);
        long warmupMs = quick ? 300 : 500;
        String dbHost = a.getOrDefault("db-host", "127.0.0.1");
        int dbPort = Integer.parseInt(a.getOrDefault("db-port", "3306"));
        Path out = Path.of(a.getOrDefault("out", defaultOut().toString()));

        Runtime.getRuntime().addShutdownHook(new Thread(this::cleanup, "seed-cleanup"));
        long t0 = System.nanoTime();
        String loadBefore = BenchArgs.loadavg();
        List<Map<String, String>> rows = new ArrayList<>();
        List<String> notes = new ArrayList<>();
        try {
            db = "og_seed_" + String.format("%06x", ThreadLocalRandom.current().nextInt(1 << 24));
            adminUrl = "jdbc:mariadb://" + dbHost + ":" + dbPort + "/?user=root&password=";
            int maxEntities = Arrays.stream(entities).max().orElse(1024);
            createSchema(maxEntities);

            String host;
            int port;
            List<String> prefix = new ArrayList<>();
            String transport;
            if (a.containsKey("no-netns")) {
                transport = null;
                notes.add("netns skipped (--no-netns)");
            } else {
                try {
                    lab = NetLab.create(dbHost, dbPort);
                    transport = "netns+netem: " + lab.describe();
                } catch (IOException e) {
                    transport = null;
                    notes.add("netns/netem unavailable (" + e.getMessage() + ")");
                }
            }
            if (lab != null) {
                host = lab.hostIp;
                port = lab.port;
                prefix.addAll(List.of("ip", "netns", "exec", lab.ns));
            } else {
                proxy = new DelayProxy(dbHost, dbPort);
                host = "127.0.0.1";
                port = proxy.port();
                transport = "FALLBACK user-space Java delay proxy 127.0.0.1:" + port
                        + " in the parent JVM (each chunk held rtt/2 per direction, also a user-space hop at"
                        + " rtt 0), workers in a child JVM outside any namespace";
            }
            System.out.println("[seed] database " + db + ", transport: " + transport);
            notes.forEach(n -> System.out.println("[seed] note: " + n));
            System.out.println("[seed] load average before: " + loadBefore + " (" + Runtime.getRuntime().availableProcessors()
                    + " cpus)");

            String url = "jdbc:mariadb://" + host + ":" + port + "/" + db + "?user=root&password=";
            for (double rtt : rtts) {
                if (lab != null) {
                    lab.setRtt(rtt);
                } else {
                    proxy.setRtt(rtt);
                }
                List<String> cmd = new ArrayList<>(prefix);
                cmd.addAll(List.of(BenchArgs.javaBin(), "-Xms128m", "-Xmx256m", "-cp", System.getProperty("java.class.path"),
                        SeedBench.class.getName(), "--worker", "--url", url, "--rtt", SeedWorker.num(rtt),
                        "--duration-ms", Long.toString(durationMs), "--warmup-ms", Long.toString(warmupMs),
                        "--workers", join(workers), "--entities", join(entities)));
                System.out.printf(Locale.ROOT, "[seed] rtt %s ms: %d cells, load %s%n", SeedWorker.num(rtt),
                        workers.length * entities.length * 2, BenchArgs.loadavg());
                runChild(cmd, rows, workers.length * entities.length * 2L * (durationMs + warmupMs) + 60_000);
            }
        } finally {
            cleanup();
        }
        String loadAfter = BenchArgs.loadavg();
        List<Map<String, String>> cells = rows.stream().filter(r -> r.containsKey("variant")).toList();
        printTable(rows, cells);
        writeJson(out, cells);
        System.out.printf(Locale.ROOT, "[seed] load average after: %s; %.0f s in all; wrote %s%n", loadAfter,
                (System.nanoTime() - t0) / 1e9, out);
        return 0;
    }

    private void runChild(List<String> cmd, List<Map<String, String>> rows, long timeoutMs)
            throws IOException, InterruptedException {
        synchronized (cleanupLock) {
            if (cleaned) {
                throw new IllegalStateException("shutting down");
            }
            child = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        }
        Process p = child;
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.startsWith("{")) {
                        Map<String, String> m = flatJson(line);
                        synchronized (rows) {
                            rows.add(m);
                        }
                        System.out.println("[seed]   " + line);
                    } else {
                        System.out.println("[seed worker] " + line);
                    }
                }
            } catch (IOException e) {
                System.err.println("[seed] reading worker: " + e);
            }
        }, "seed-child-out");
        reader.start();
        if (!p.waitFor(timeoutMs, TimeUnit.MILLISECONDS)) {
            p.destroy();
            p.waitFor(5, TimeUnit.SECONDS);
            p.destroyForcibly();
            throw new IllegalStateException("worker did not finish in " + timeoutMs + " ms");
        }
        reader.join(5000);
        if (p.exitValue() != 0) {
            throw new IllegalStateException("worker exited with " + p.exitValue() + ": " + String.join(" ", cmd));
        }
    }

    private void createSchema(int maxEntities) throws SQLException {
        try (Connection c = DriverManager.getConnection(adminUrl); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + db);
            s.execute("CREATE TABLE " + db + ".entity (id INT NOT NULL PRIMARY KEY, state TINYINT NOT NULL,"
                    + " version BIGINT NOT NULL, payload VARCHAR(100) NOT NULL) ENGINE=InnoDB");
            c.setAutoCommit(false);
            try (PreparedStatement ins = c.prepareStatement(
                    "INSERT INTO " + db + ".entity (id, state, version, payload) VALUES (?, 0, 0, ?)")) {
                for (int i = 1; i <= maxEntities; i++) {
                    ins.setInt(1, i);
                    ins.setString(2, "entity-" + i);
                    ins.addBatch();
                }
                ins.executeBatch();
            }
            c.commit();
        }
    }

    /** Idempotent: from the finally block and from the shutdown hook (Ctrl-C). */
    private void cleanup() {
        synchronized (cleanupLock) {
            if (cleaned) {
                return;
            }
            cleaned = true;
            if (child != null && child.isAlive()) {
                child.destroy();
                try {
                    if (!child.waitFor(5, TimeUnit.SECONDS)) {
                        child.destroyForcibly();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            if (lab != null) {
                lab.close();
            }
            if (proxy != null) {
                try {
                    proxy.close();
                } catch (IOException ignored) {
                    // best effort
                }
            }
            if (db != null) {
                try (Connection c = DriverManager.getConnection(adminUrl); Statement s = c.createStatement()) {
                    s.execute("DROP DATABASE IF EXISTS " + db);
                } catch (SQLException e) {
                    System.err.println("[seed] could not drop " + db + ": " + e);
                }
            }
        }
    }

    // ---------------------------------------------------------------- output

    private static void printTable(List<Map<String, String>> rows, List<Map<String, String>> cells) {
        System.out.println();
        System.out.println("Measured round trip (SELECT 1 through the transport, p50 / min):");
        for (Map<String, String> r : rows) {
            if (r.containsKey("probe")) {
                System.out.printf(Locale.ROOT, "  added rtt %-4s ms -> SELECT 1 p50 %s ms, min %s ms%n",
                        r.get("rtt_ms"), r.get("p50_ms"), r.get("min_ms"));
            }
        }
        System.out.println();
        System.out.println("per logical transition; retries = CAS re-read+retry (or FOR UPDATE deadlock retries) per"
                + " success; lockw = InnoDB row lock waits in the cell (server-wide counter)");
        String h = String.format(Locale.ROOT, "%6s %3s %5s | %-33s | %-33s | %s", "rtt_ms", "w", "ents",
                "FOR UPDATE  tx/s   p50   p99  lockw", "CAS  tx/s   p50   p99 retries", "p99 FU/CAS");
        System.out.println(h);
        System.out.println("-".repeat(h.length()));
        Map<String, Map<String, String>> fu = new LinkedHashMap<>();
        Map<String, Map<String, String>> cas = new LinkedHashMap<>();
        for (Map<String, String> c : cells) {
            String k = c.get("rtt_ms") + "|" + c.get("workers") + "|" + c.get("entities");
            ("for_update".equals(c.get("variant")) ? fu : cas).put(k, c);
        }
        for (String k : fu.keySet()) {
            Map<String, String> f = fu.get(k);
            Map<String, String> c = cas.get(k);
            if (c == null) {
                continue;
            }
            double ratio = Double.parseDouble(f.get("p99_ms")) / Double.parseDouble(c.get("p99_ms"));
            System.out.printf(Locale.ROOT, "%6s %3s %5s | %8.0f %6.2f %6.2f %6s | %8.0f %6.2f %6.2f %6.2f | %5.2fx%n",
                    f.get("rtt_ms"), f.get("workers"), f.get("entities"),
                    d(f, "tx_per_s"), d(f, "p50_ms"), d(f, "p99_ms"), f.get("row_lock_waits"),
                    d(c, "tx_per_s"), d(c, "p50_ms"), d(c, "p99_ms"), d(c, "retries_per_tx"), ratio);
        }
        System.out.println();
        System.out.println("p99 growth from the smallest to the larger worker counts (same rtt, same entities):");
        Map<String, List<Map<String, String>>> groups = new LinkedHashMap<>();
        for (Map<String, String> c : cells) {
            groups.computeIfAbsent(c.get("variant") + "|" + c.get("rtt_ms") + "|" + c.get("entities"),
                    x -> new ArrayList<>()).add(c);
        }
        for (Map.Entry<String, List<Map<String, String>>> g : groups.entrySet()) {
            List<Map<String, String>> l = g.getValue();
            l.sort((x, y) -> Integer.compare(Integer.parseInt(x.get("workers")), Integer.parseInt(y.get("workers"))));
            double base = d(l.get(0), "p99_ms");
            String[] p = g.getKey().split("\\|");
            System.out.printf(Locale.ROOT, "  %-10s rtt %-4s ents %-5s %s%n", p[0], p[1], p[2],
                    l.stream().map(c -> String.format(Locale.ROOT, "w%s p99 %.2f ms (%.1fx)", c.get("workers"),
                            d(c, "p99_ms"), d(c, "p99_ms") / base)).collect(Collectors.joining(", ")));
        }
        System.out.println();
    }

    private static void writeJson(Path out, List<Map<String, String>> cells) throws IOException {
        String[] keys = {"variant", "workers", "entities", "rtt_ms", "tx_per_s", "p50_ms", "p99_ms", "retries_per_tx"};
        StringBuilder sb = new StringBuilder("[\n");
        for (int i = 0; i < cells.size(); i++) {
            Map<String, String> c = cells.get(i);
            sb.append("  {");
            for (int k = 0; k < keys.length; k++) {
                String v = c.get(keys[k]);
                sb.append('"').append(keys[k]).append("\": ");
                sb.append(keys[k].equals("variant") ? "\"" + v + "\"" : v);
                if (k < keys.length - 1) {
                    sb.append(", ");
                }
            }
            sb.append(i < cells.size() - 1 ? "},\n" : "}\n");
        }
        sb.append("]\n");
        Files.createDirectories(out.toAbsolutePath().getParent());
        Files.writeString(out, sb.toString());
    }

    // ---------------------------------------------------------------- helpers

    private static double d(Map<String, String> m, String k) {
        return Double.parseDouble(m.get(k));
    }

    private static final Pattern FIELD = Pattern.compile("\"(\\w+)\":(\"[^\"]*\"|[-+0-9.eEaNInfity]+)");

    static Map<String, String> flatJson(String line) {
        Map<String, String> m = new LinkedHashMap<>();
        Matcher mm = FIELD.matcher(line);
        while (mm.find()) {
            String v = mm.group(2);
            m.put(mm.group(1), v.startsWith("\"") ? v.substring(1, v.length() - 1) : v);
        }
        return m;
    }

    /** seed.json beside the jar (bench/target), whatever the working directory. */
    private static Path defaultOut() {
        try {
            File src = new File(SeedBench.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            if (src.isFile()) {
                return src.toPath().toAbsolutePath().getParent().resolve("seed.json");
            }
            // classes directory: bench/target/classes
            return src.toPath().toAbsolutePath().getParent().resolve("seed.json");
        } catch (Exception e) {
            return Path.of("bench", "target", "seed.json");
        }
    }

    private static int[] ints(String s) {
        return Arrays.stream(s.split(",")).map(String::trim).mapToInt(Integer::parseInt).toArray();
    }

    private static double[] doubles(String s) {
        return Arrays.stream(s.split(",")).map(String::trim).mapToDouble(Double::parseDouble).toArray();
    }

    private static String join(int[] a) {
        return Arrays.stream(a).mapToObj(Integer::toString).collect(Collectors.joining(","));
    }
}
