package dev.onceguard.it.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A TCP relay on a loopback port in front of a real server, that the test can {@link #cut()}
 * (every relayed connection is closed at once and new ones are accepted and closed immediately,
 * as a crashed or partitioned database looks to a client) and {@link #restore()}. Lets a test
 * make MySQL unreachable for one sidecar only, without touching the shared server. Threads are
 * daemons; {@link #close()} stops everything.
 */
public final class TcpGate implements AutoCloseable {
  private final ServerSocket server;
  private final String targetHost;
  private final int targetPort;
  private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
  private volatile boolean open = true;
  private volatile boolean closed;
  private volatile long delayMillis;

  public TcpGate(String targetHost, int targetPort) {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    try {
      this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    daemon("tcp-gate-accept", this::acceptLoop).start();
  }

  public int port() {
    return server.getLocalPort();
  }

  /** Drops every relayed connection; until {@link #restore()}, new ones are closed on accept. */
  public void cut() {
    open = false;
    for (Socket s : sockets) {
      closeQuietly(s);
    }
    sockets.clear();
  }

  public void restore() {
    open = true;
  }

  /**
   * Holds every chunk this long before relaying it, each way (a slow or distant link: a round trip
   * gains twice the delay); {@link Duration#ZERO} relays at once again.
   */
  public void delay(java.time.Duration d) {
    delayMillis = d.toMillis();
  }

  private void acceptLoop() {
    while (!closed) {
      Socket client;
      try {
        client = server.accept();
      } catch (IOException e) {
        return; // closed
      }
      if (!open) {
        closeQuietly(client);
        continue;
      }
      Socket upstream = new Socket();
      try {
        upstream.connect(new InetSocketAddress(targetHost, targetPort), 5000);
      } catch (IOException e) {
        closeQuietly(client);
        closeQuietly(upstream);
        continue;
      }
      sockets.add(client);
      sockets.add(upstream);
      daemon("tcp-gate-up", () -> pump(client, upstream)).start();
      daemon("tcp-gate-down", () -> pump(upstream, client)).start();
    }
  }

  private void pump(Socket from, Socket to) {
    byte[] buf = new byte[16 * 1024];
    try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
      for (int n; (n = in.read(buf)) >= 0; ) {
        long d = delayMillis;
        if (d > 0) {
          Thread.sleep(d);
        }
        out.write(buf, 0, n);
        out.flush();
      }
    } catch (IOException e) {
      // one side went away: end both
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      closeQuietly(from);
      closeQuietly(to);
      sockets.remove(from);
      sockets.remove(to);
    }
  }

  @Override
  public void close() {
    closed = true;
    closeQuietly(server);
    cut();
  }

  private static Thread daemon(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  private static void closeQuietly(AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      // already closed
    }
  }
}
