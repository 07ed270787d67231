package dev.onceguard.bench.seed;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * A network namespace joined to the host by a veth pair, with {@code netem delay rtt/2} on both
 * ends, and a socat forwarder on the host side of the pair to MariaDB on 127.0.0.1 (MariaDB binds
 * to 127.0.0.1 only here). Every name carries a random suffix so that parallel runs do not collide.
 * Nothing is put on {@code lo}.
 */
final class NetLab implements AutoCloseable {

    final String ns;
    final String vethHost;
    final String vethNs;
    final String hostIp;
    final String nsIp;
    final int port = 13306;
    private Process socat;
    private boolean nsCreated;
    private boolean vethCreated;

    private NetLab() {
        String sfx = String.format("%04x", ThreadLocalRandom.current().nextInt(0x10000));
        ns = "og-seed-" + sfx;
        vethHost = "ogs" + sfx + "h";
        vethNs = "ogs" + sfx + "n";
        int octet = freeOctet();
        hostIp = "10.77." + octet + ".1";
        nsIp = "10.77." + octet + ".2";
    }

    /** Builds the namespace, veth pair and forwarder; throws (after undoing what it did) if it cannot. */
    static NetLab create(String dbHost, int dbPort) throws IOException, InterruptedException {
        NetLab n = new NetLab();
        try {
            n.setUp(dbHost, dbPort);
            return n;
        } catch (IOException | InterruptedException | RuntimeException e) {
            n.close();
            throw e;
        }
    }

    private static int freeOctet() {
        String addrs;
        try {
            addrs = run(List.of("ip", "-o", "addr")).out;
        } catch (Exception e) {
            addrs = "";
        }
        for (int i = 0; i < 50; i++) {
            int o = 1 + ThreadLocalRandom.current().nextInt(254);
            if (!addrs.contains("10.77." + o + ".")) {
                return o;
            }
        }
        return 77;
    }

    private void setUp(String dbHost, int dbPort) throws IOException, InterruptedException {
        must(List.of("ip", "netns", "add", ns));
        nsCreated = true;
        must(List.of("ip", "link", "add", vethHost, "type", "veth", "peer", "name", vethNs));
        vethCreated = true;
        must(List.of("ip", "link", "set", vethNs, "netns", ns));
        must(List.of("ip", "addr", "add", hostIp + "/24", "dev", vethHost));
        must(List.of("ip", "link", "set", vethHost, "up"));
        must(inNs("ip", "addr", "add", nsIp + "/24", "dev", vethNs));
        must(inNs("ip", "link", "set", vethNs, "up"));
        must(inNs("ip", "link", "set", "lo", "up"));
        // some kernels are built without sch_netem (CONFIG_NET_SCH_NETEM): find out before anything runs
        Result probe = run(List.of("tc", "qdisc", "replace", "dev", vethHost, "root", "netem", "delay", "1000us"));
        if (probe.rc != 0) {
            throw new IOException("tc netem unavailable on this kernel: " + probe.out.strip());
        }
        run(List.of("tc", "qdisc", "del", "dev", vethHost, "root"));
        socat = new ProcessBuilder("socat",
                "TCP-LISTEN:" + port + ",bind=" + hostIp + ",fork,reuseaddr,nodelay",
                "TCP:" + dbHost + ":" + dbPort + ",nodelay")
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(ProcessBuilder.Redirect.INHERIT)
                .start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (true) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(hostIp, port), 500);
                break;
            } catch (IOException e) {
                if (!socat.isAlive() || System.nanoTime() > deadline) {
                    throw new IOException("socat forwarder on " + hostIp + ":" + port + " did not come up", e);
                }
                Thread.sleep(50);
            }
        }
    }

    /** netem delay of rtt/2 on both ends of the pair, or no qdisc at all for 0. */
    void setRtt(double rttMs) throws IOException, InterruptedException {
        if (rttMs <= 0) {
            run(List.of("tc", "qdisc", "del", "dev", vethHost, "root"));
            run(inNs("tc", "qdisc", "del", "dev", vethNs, "root"));
            return;
        }
        String half = Math.round(rttMs * 1000 / 2) + "us";
        must(List.of("tc", "qdisc", "replace", "dev", vethHost, "root", "netem", "delay", half, "limit", "100000"));
        must(inNs("tc", "qdisc", "replace", "dev", vethNs, "root", "netem", "delay", half, "limit", "100000"));
    }

    String describe() {
        return String.format(Locale.ROOT,
                "netns %s, veth %s (%s) <-> %s (%s), netem delay rtt/2 on both ends, socat %s:%d -> MariaDB",
                ns, vethHost, hostIp, vethNs, nsIp, hostIp, port);
    }

    List<String> inNs(String... cmd) {
        List<String> l = new ArrayList<>(List.of("ip", "netns", "exec", ns));
        l.addAll(List.of(cmd));
        return l;
    }

    @Override
    public synchronized void close() {
        if (socat != null) {
            List<ProcessHandle> kids = socat.toHandle().descendants().toList();
            socat.destroy();
            kids.forEach(ProcessHandle::destroy);
            try {
                if (!socat.waitFor(3, TimeUnit.SECONDS)) {
                    socat.destroyForcibly();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            kids.stream().filter(ProcessHandle::isAlive).forEach(ProcessHandle::destroyForcibly);
            socat = null;
        }
        try {
            if (nsCreated) {
                run(List.of("ip", "netns", "del", ns)); // takes the namespace's end of the pair with it
                nsCreated = false;
            }
            if (vethCreated) {
                run(List.of("ip", "link", "del", vethHost)); // normally already gone with its peer
                vethCreated = false;
            }
        } catch (IOException e) {
            System.err.println("[seed] cleanup: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    record Result(int rc, String out) {}

    static Result run(List<String> cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out;
        try (InputStream in = p.getInputStream()) {
            out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return new Result(-1, out);
        }
        return new Result(p.exitValue(), out);
    }

    static void must(List<String> cmd) throws IOException, InterruptedException {
        Result r = run(cmd);
        if (r.rc != 0) {
            throw new IOException(String.join(" ", cmd) + " -> exit " + r.rc + ": " + r.out.strip());
        }
    }
}
