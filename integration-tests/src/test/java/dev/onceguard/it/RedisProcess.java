package dev.onceguard.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A private {@code redis-server} (the machine's binary) on a free loopback port, keeping nothing
 * on disk, that a test can kill and start again on the same port: an L1 outage and a restart
 * that lost every key, without touching the stack's shared Redis.
 */
public final class RedisProcess implements AutoCloseable {
  private final int port;
  private final Path log;
  private Process process;

  private RedisProcess(int port, Path log) {
    this.port = port;
    this.log = log;
  }

  /** Starts one (output in a temporary file) and returns once it answers PING. */
  public static RedisProcess start() {
    try {
      return start(Files.createTempFile("og-redis-", ".log"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Starts one, its output appended to {@code log} across restarts, and returns once it answers PING. */
  public static RedisProcess start(Path log) {
    try {
      Files.createDirectories(log.toAbsolutePath().getParent());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    RedisProcess r = new RedisProcess(RecordingBusiness.freePort(), log.toAbsolutePath());
    r.restart();
    return r;
  }

  public String uri() {
    return "redis://127.0.0.1:" + port;
  }

  public synchronized boolean running() {
    return process != null && process.isAlive();
  }

  /** kill -9: clients see the connection reset, the keys are gone. */
  public synchronized void kill() throws InterruptedException {
    if (process != null) {
      process.destroyForcibly();
      process.waitFor(10, TimeUnit.SECONDS);
      process = null;
    }
  }

  /** Starts it again on the same port (empty) and waits until it answers PING. */
  public synchronized void restart() {
    if (running()) {
      return;
    }
    try {
      process = new ProcessBuilder(List.of("redis-server", "--port", Integer.toString(port), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--dir", log.getParent().toString()))
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
    } catch (IOException e) {
      throw new UncheckedIOException("could not start redis-server (is it installed? scripts/stack.sh installs it)", e);
    }
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (!answersPing()) {
      if (System.nanoTime() > deadline || !process.isAlive()) {
        throw new IllegalStateException("redis-server on port " + port + " did not answer PING; see " + log);
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
  }

  private boolean answersPing() {
    try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
      s.setSoTimeout(1000);
      s.getOutputStream().write("PING\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      byte[] buf = new byte[7];
      int n = s.getInputStream().read(buf);
      return n > 0 && new String(buf, 0, n, java.nio.charset.StandardCharsets.US_ASCII).startsWith("+PONG");
    } catch (IOException e) {
      return false;
    }
  }

  @Override
  public void close() throws InterruptedException {
    kill();
  }
}
