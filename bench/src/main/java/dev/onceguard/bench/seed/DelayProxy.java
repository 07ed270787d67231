package dev.onceguard.bench.seed;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Arrays;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * Fallback when no network namespace or no netem can be had (not root, or a kernel without
 * CONFIG_NET_SCH_NETEM): a user-space TCP forwarder on
 * 127.0.0.1 that holds every chunk for rtt/2 in each direction before passing it on, keeping order.
 * Coarser than netem (thread wake-ups add tens of microseconds) but the same shape.
 */
public final class DelayProxy implements AutoCloseable {

    private final ServerSocket server;
    private final String targetHost;
    private final int targetPort;
    private volatile long halfDelayNanos;
    private volatile boolean closed;
    /** Whether {@link #setRtt} reaches the connections already open (see {@link #live}). */
    private volatile boolean live;

    public DelayProxy(String targetHost, int targetPort) throws IOException {
        this(targetHost, targetPort, 0);
    }

    /**
     * Listening on {@code listenPort} of 127.0.0.1 (0: a free one), for a peer that announces the
     * proxy's address to its clients, such as a Kafka broker's advertised listener.
     */
    public DelayProxy(String targetHost, int targetPort, int listenPort) throws IOException {
        this.targetHost = targetHost;
        this.targetPort = targetPort;
        server = new ServerSocket();
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), listenPort));
        Thread t = new Thread(this::accept, "seed-proxy-accept");
        t.setDaemon(true);
        t.start();
    }

    public int port() {
        return server.getLocalPort();
    }

    /**
     * Makes {@link #setRtt} apply to every chunk read from then on, on the connections already open
     * too (a pooled client keeps its connections across RTT changes). Every connection accepted
     * afterwards goes through the delaying queue, at an RTT of 0 as well. Without it, a connection
     * keeps the RTT set when it was accepted, and one accepted at 0 is copied straight through.
     */
    public DelayProxy live() {
        live = true;
        return this;
    }

    public void setRtt(double rttMs) {
        halfDelayNanos = (long) (rttMs * 1_000_000 / 2);
    }

    private void accept() {
        while (!closed) {
            try {
                Socket client = server.accept();
                Socket db = new Socket(targetHost, targetPort);
                client.setTcpNoDelay(true);
                db.setTcpNoDelay(true);
                AtomicInteger open = new AtomicInteger(2);
                // unless live, the delay only changes between RTT blocks, when no connection is open
                long fixed = halfDelayNanos;
                LongSupplier delay = live ? () -> halfDelayNanos : () -> fixed;
                boolean direct = !live && fixed == 0;
                pump(client, db, "up", open, delay, direct);
                pump(db, client, "down", open, delay, direct);
            } catch (IOException e) {
                if (!closed) {
                    System.err.println("[seed] proxy: " + e);
                }
            }
        }
    }

    private record Chunk(long due, byte[] data) {}

    private static final Chunk EOF = new Chunk(0, null);

    private void pump(Socket from, Socket to, String dir, AtomicInteger open, LongSupplier delay, boolean direct) {
        if (direct) { // no delay: one thread copies straight through, no hand-off
            Thread t = new Thread(() -> {
                byte[] buf = new byte[65536];
                try {
                    InputStream in = from.getInputStream();
                    OutputStream out = to.getOutputStream();
                    int n;
                    while ((n = in.read(buf)) > 0) {
                        out.write(buf, 0, n);
                        out.flush();
                    }
                } catch (IOException ignored) {
                    // closed
                } finally {
                    done(from, to, open);
                }
            }, "seed-proxy-" + dir);
            t.setDaemon(true);
            t.start();
            return;
        }
        LinkedBlockingQueue<Chunk> q = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            byte[] buf = new byte[65536];
            try {
                InputStream in = from.getInputStream();
                int n;
                while ((n = in.read(buf)) > 0) {
                    q.add(new Chunk(System.nanoTime() + delay.getAsLong(), Arrays.copyOf(buf, n)));
                }
            } catch (IOException ignored) {
                // closed
            }
            q.add(EOF);
        }, "seed-proxy-" + dir + "-r");
        Thread writer = new Thread(() -> {
            try {
                OutputStream out = to.getOutputStream();
                while (true) {
                    Chunk c = q.take();
                    if (c == EOF) {
                        break;
                    }
                    long wait;
                    while ((wait = c.due - System.nanoTime()) > 0) {
                        LockSupport.parkNanos(wait);
                    }
                    out.write(c.data);
                    out.flush();
                }
            } catch (IOException | InterruptedException ignored) {
                // closed
            } finally {
                done(from, to, open);
            }
        }, "seed-proxy-" + dir + "-w");
        reader.setDaemon(true);
        writer.setDaemon(true);
        reader.start();
        writer.start();
    }

    private static void done(Socket from, Socket to, AtomicInteger open) {
        try {
            to.shutdownOutput();
        } catch (IOException ignored) {
            // already closed
        }
        if (open.decrementAndGet() == 0) { // both directions done
            try {
                to.close();
                from.close();
            } catch (IOException ignored) {
                // already closed
            }
        }
    }

    @Override
    public void close() throws IOException {
        closed = true;
        server.close();
    }
}
