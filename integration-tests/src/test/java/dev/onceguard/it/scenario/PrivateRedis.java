package dev.onceguard.it.scenario;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A redis-server of the test's own on a loopback port, no persistence, so that a test may stop
 * and restart it without touching the machine's shared Redis on 6379. Output is appended to
 * {@code log}. Not thread-safe.
 */
final class PrivateRedis implements AutoCloseable {
  final int port;
  private final Path log;
  private Process process;

  PrivateRedis(int port, Path log) {
    this.port = port;
    this.log = log;
  }

  String uri() {
    return "redis://127.0.0.1:" + port;
  }

  /** Starts the server and waits until it accepts connections. */
  void start() throws InterruptedException {
    try {
      Files.createDirectories(log.getParent());
      process = new ProcessBuilder(List.of("redis-server", "--bind", "127.0.0.1", "--port", Integer.toString(port), "--save", "",
          "--appendonly", "no", "--daemonize", "no"))
          .redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
          .start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start redis-server (is it installed? scripts/stack.sh installs it)", e);
    }
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (!accepts()) {
      if (!process.isAlive() || System.nanoTime() > deadline) {
        throw new AssertionError("private redis-server on port " + port + " did not come up; see " + log);
      }
      TimeUnit.MILLISECONDS.sleep(50);
    }
  }

  /** SIGKILL (an abrupt loss: every connection drops, every key is gone), and wait until it is gone. */
  void kill() throws InterruptedException {
    if (process != null && process.isAlive()) {
      process.destroyForcibly();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        throw new AssertionError("private redis-server on port " + port + " survived SIGKILL");
      }
    }
  }

  private boolean accepts() {
    try (Socket s = new Socket("127.0.0.1", port)) {
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  @Override
  public void close() throws InterruptedException {
    kill();
  }
}
