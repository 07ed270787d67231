package dev.onceguard.bench.seed;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The measuring side: runs every (workers, entities, variant) cell for one RTT setting and prints
 * one JSON line per cell on stdout. It runs in its own JVM, inside the network namespace when
 * there is one, so that every statement crosses the delayed link.
 *
 * <p>Both variants advance one entity by one step: {@code state = (state + 1) % STATES},
 * {@code version = version + 1}.
 * <ul>
 *   <li>{@code for_update}: the connection is in autocommit=0 (so BEGIN is implicit and costs no
 *       round trip); {@code SELECT state, version … FOR UPDATE}, a check in the client,
 *       {@code UPDATE … WHERE id=?}, {@code COMMIT}: 3 round trips, the row lock is held from the
 *       SELECT until the COMMIT reaches the server, i.e. across 2 round trips.</li>
 *   <li>{@code cas}: autocommit; {@code UPDATE … SET state=?, version=? WHERE id=? AND state=? AND
 *       version=?} with the state/version the worker last saw for that entity; on 0 rows it re-reads
 *       the row (plain SELECT) and tries again. A worker's view is stale whenever another worker
 *       advanced the entity since, so at N workers about (N-1)/N of transitions pay
 *       UPDATE + SELECT + UPDATE (3 round trips), the rest 1.</li>
 * </ul>
 * Latency is per logical transition, retries included.
 */
final class SeedWorker {

    static final int STATES = 5;

    private final String url;
    private final double rttMs;
    private final long durationMs;
    private final long warmupMs;

    SeedWorker(String url, double rttMs, long durationMs, long warmupMs) {
        this.url = url;
        this.rttMs = rttMs;
        this.durationMs = durationMs;
        this.warmupMs = warmupMs;
    }

    void run(int[] workerCounts, int[] entityCounts) throws Exception {
        probe();
        // JIT warm-up, not reported (on the largest entity count: the table has just that many rows)
        int warmEntities = Arrays.stream(entityCounts).max().orElse(1);
        runCell("for_update", 4, warmEntities, 300, 700);
        runCell("cas", 4, warmEntities, 300, 700);
        int cell = 0;
        for (int w : workerCounts) {
            for (int e : entityCounts) {
                // alternate which variant goes first, so that drift in the machine's load
                // does not always favour the same one
                String[] order = (cell++ % 2 == 0)
                        ? new String[] {"for_update", "cas"} : new String[] {"cas", "for_update"};
                for (String v : order) {
                    CellResult r = runCell(v, w, e, warmupMs, durationMs);
                    System.out.println(r.json(rttMs));
                    System.out.flush();
                }
            }
        }
    }

    /** Round trip of {@code SELECT 1} over this transport, so the output shows the RTT really added. */
    private void probe() throws SQLException {
        try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
            long[] lat = new long[60];
            for (int i = 0; i < lat.length; i++) {
                long t0 = System.nanoTime();
                try (ResultSet rs = s.executeQuery("SELECT 1")) {
                    rs.next();
                }
                lat[i] = System.nanoTime() - t0;
            }
            long[] m = Arrays.copyOfRange(lat, 10, lat.length);
            Arrays.sort(m);
            System.out.printf(Locale.ROOT, "{\"probe\":\"select1\",\"rtt_ms\":%s,\"p50_ms\":%.3f,\"min_ms\":%.3f}%n",
                    num(rttMs), m[m.length / 2] / 1e6, m[0] / 1e6);
            System.out.flush();
        }
    }

    record CellResult(String variant, int workers, int entities, long count, double seconds,
                      double p50Ms, double p99Ms, long retries, long rowLockWaits) {
        String json(double rttMs) {
            return String.format(Locale.ROOT,
                    "{\"variant\":\"%s\",\"workers\":%d,\"entities\":%d,\"rtt_ms\":%s,\"tx_per_s\":%.1f,"
                            + "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"retries_per_tx\":%.3f,\"n\":%d,\"row_lock_waits\":%d}",
                    variant, workers, entities, num(rttMs), count / seconds, p50Ms, p99Ms,
                    count == 0 ? 0.0 : (double) retries / count, count, rowLockWaits);
        }
    }

    static String num(double d) {
        return d == Math.rint(d) ? String.format(Locale.ROOT, "%.1f", d) : String.format(Locale.ROOT, "%s", d);
    }

    private CellResult runCell(String variant, int workers, int entities, long warmMs, long measureMs)
            throws Exception {
        CyclicBarrier ready = new CyclicBarrier(workers + 1);
        Loop[] loops = new Loop[workers];
        Thread[] threads = new Thread[workers];
        for (int i = 0; i < workers; i++) {
            loops[i] = new Loop(variant, entities, ready);
            threads[i] = new Thread(loops[i], "seed-" + variant + "-" + i);
            threads[i].start();
        }
        long waitsBefore = rowLockWaits();
        ready.await(); // all connected and prepared
        long start = System.nanoTime();
        long mStart = start + warmMs * 1_000_000L;
        long mEnd = mStart + measureMs * 1_000_000L;
        for (Loop l : loops) {
            l.window(mStart, mEnd);
        }
        ready.await(); // go
        for (Thread t : threads) {
            t.join();
        }
        long waitsAfter = rowLockWaits();
        long count = 0;
        long retries = 0;
        int total = 0;
        for (Loop l : loops) {
            if (l.failure != null) {
                throw new IllegalStateException(variant + " worker failed", l.failure);
            }
            count += l.count;
            retries += l.retries;
            total += l.latN;
        }
        long[] all = new long[total];
        int off = 0;
        for (Loop l : loops) {
            System.arraycopy(l.lat, 0, all, off, l.latN);
            off += l.latN;
        }
        Arrays.sort(all);
        return new CellResult(variant, workers, entities, count, measureMs / 1000.0,
                pct(all, 0.50), pct(all, 0.99), retries, waitsAfter - waitsBefore);
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1e6;
    }

    /** Server-wide counter (other clients of the shared MariaDB add to it too). */
    private long rowLockWaits() {
        try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")) {
            return rs.next() ? rs.getLong(2) : 0;
        } catch (SQLException e) {
            return 0;
        }
    }

    private final class Loop implements Runnable {
        final String variant;
        final int entities;
        final CyclicBarrier ready;
        volatile long mStart;
        volatile long mEnd;
        long count;
        long retries;
        long[] lat = new long[4096];
        int latN;
        volatile Throwable failure;

        Loop(String variant, int entities, CyclicBarrier ready) {
            this.variant = variant;
            this.entities = entities;
            this.ready = ready;
        }

        void window(long s, long e) {
            mStart = s;
            mEnd = e;
        }

        @Override
        public void run() {
            try (Connection c = DriverManager.getConnection(url)) {
                if (variant.equals("for_update")) {
                    c.setAutoCommit(false);
                    try (PreparedStatement sel = c.prepareStatement(
                                 "SELECT state, version FROM entity WHERE id = ? FOR UPDATE");
                         PreparedStatement upd = c.prepareStatement(
                                 "UPDATE entity SET state = ?, version = ? WHERE id = ?")) {
                        ready.await();
                        ready.await();
                        loop(id -> forUpdate(c, sel, upd, id));
                    }
                } else {
                    c.setAutoCommit(true);
                    int[] st = new int[entities + 1];
                    long[] ver = new long[entities + 1];
                    try (PreparedStatement all = c.prepareStatement(
                            "SELECT id, state, version FROM entity WHERE id <= ?")) {
                        all.setInt(1, entities);
                        try (ResultSet rs = all.executeQuery()) {
                            while (rs.next()) {
                                st[rs.getInt(1)] = rs.getInt(2);
                                ver[rs.getInt(1)] = rs.getLong(3);
                            }
                        }
                    }
                    try (PreparedStatement upd = c.prepareStatement(
                                 "UPDATE entity SET state = ?, version = ? WHERE id = ? AND state = ? AND version = ?");
                         PreparedStatement sel = c.prepareStatement(
                                 "SELECT state, version FROM entity WHERE id = ?")) {
                        ready.await();
                        ready.await();
                        loop(id -> cas(upd, sel, st, ver, id));
                    }
                }
            } catch (Throwable t) {
                failure = t;
                ready.reset();
            }
        }

        interface Tx {
            int run(int id) throws SQLException;
        }

        private void loop(Tx tx) throws SQLException {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            long end = mEnd;
            long begin = mStart;
            while (true) {
                int id = 1 + rnd.nextInt(entities);
                long t0 = System.nanoTime();
                if (t0 >= end) {
                    return;
                }
                int r = tx.run(id);
                long t1 = System.nanoTime();
                if (t0 >= begin) {
                    count++;
                    retries += r;
                    if (latN == lat.length) {
                        lat = Arrays.copyOf(lat, lat.length * 2);
                    }
                    lat[latN++] = t1 - t0;
                }
            }
        }
    }

    private static int forUpdate(Connection c, PreparedStatement sel, PreparedStatement upd, int id)
            throws SQLException {
        int retries = 0;
        while (true) {
            try {
                sel.setInt(1, id);
                int state;
                long version;
                try (ResultSet rs = sel.executeQuery()) {
                    if (!rs.next()) {
                        throw new SQLException("entity " + id + " missing");
                    }
                    state = rs.getInt(1);
                    version = rs.getLong(2);
                }
                if (state < 0 || state >= STATES) { // the check in the client
                    throw new IllegalStateException("entity " + id + " in state " + state);
                }
                upd.setInt(1, (state + 1) % STATES);
                upd.setLong(2, version + 1);
                upd.setInt(3, id);
                if (upd.executeUpdate() != 1) {
                    throw new IllegalStateException("entity " + id + " not updated under its lock");
                }
                c.commit();
                return retries;
            } catch (SQLException e) {
                // 1213 deadlock, 1205 lock wait timeout: roll back and run the transaction again
                if (e.getErrorCode() == 1213 || e.getErrorCode() == 1205) {
                    c.rollback();
                    retries++;
                } else {
                    throw e;
                }
            }
        }
    }

    private static int cas(PreparedStatement upd, PreparedStatement sel, int[] st, long[] ver, int id)
            throws SQLException {
        int retries = 0;
        while (true) {
            int next = (st[id] + 1) % STATES;
            upd.setInt(1, next);
            upd.setLong(2, ver[id] + 1);
            upd.setInt(3, id);
            upd.setInt(4, st[id]);
            upd.setLong(5, ver[id]);
            if (upd.executeUpdate() == 1) {
                st[id] = next;
                ver[id] = ver[id] + 1;
                return retries;
            }
            retries++;
            sel.setInt(1, id);
            try (ResultSet rs = sel.executeQuery()) {
                if (!rs.next()) {
                    throw new SQLException("entity " + id + " missing");
                }
                st[id] = rs.getInt(1);
                ver[id] = rs.getLong(2);
            }
        }
    }
}
