package dev.onceguard.it;

import dev.onceguard.it.client.TcpGate;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A TCP relay ({@link TcpGate}) as a process of its own, in front of a server of the test JVM,
 * that the test can SIGSTOP and SIGCONT. Put in front of the business container, it makes the
 * business look to a sidecar as a stopped process does: connections stay open, the kernel keeps
 * accepting bytes, and nothing answers, not even an HTTP/2 PING; what was sent meanwhile arrives
 * at once after SIGCONT. The business's handler stays in the test JVM, so every call it receives
 * is still in the history the checker reads.
 */
public final class RelayProcess implements AutoCloseable {
  private final Process process;
  private final int port;

  private RelayProcess(Process process, int port) {
    this.process = process;
    this.port = port;
  }

  /** Starts a relay to {@code host:port} (a small JVM on this test's classpath) and returns once it listens. */
  public static RelayProcess start(String host, int targetPort) {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process p;
    try {
      p = new ProcessBuilder(List.of(java, "-Xmx32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
          System.getProperty("java.class.path"), RelayProcess.class.getName(), host, Integer.toString(targetPort)))
          .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    } catch (IOException e) {
      throw new UncheckedIOException("could not start the relay process", e);
    }
    BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
    CompletableFuture<String> first = CompletableFuture.supplyAsync(() -> {
      try {
        return out.readLine();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    });
    try {
      String line = first.get(30, TimeUnit.SECONDS);
      if (line == null || !line.startsWith("PORT ")) {
        throw new IllegalStateException("the relay process did not report its port: " + line);
      }
      return new RelayProcess(p, Integer.parseInt(line.substring(5).trim()));
    } catch (Exception e) {
      p.destroyForcibly();
      throw new IllegalStateException("the relay process to " + host + ":" + targetPort + " did not start", e);
    }
  }

  /** Where to connect instead of the target: {@code 127.0.0.1:port}. */
  public String address() {
    return "127.0.0.1:" + port;
  }

  public long pid() {
    return process.pid();
  }

  /** SIGSTOP: the relay freezes with every connection open. */
  public void pause() {
    signal("STOP");
  }

  /** SIGCONT: it relays again, what was sent meanwhile first. */
  public void resume() {
    signal("CONT");
  }

  private void signal(String name) {
    try {
      Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).redirectErrorStream(true).start();
      String out = new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        throw new IllegalStateException("kill -" + name + " " + process.pid() + " failed: " + out);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** kill -9 (a stopped process too). */
  @Override
  public void close() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(10, TimeUnit.SECONDS);
  }

  /** The relay process: {@code host port}; prints {@code PORT <n>} once it listens, then relays until killed. */
  public static void main(String[] args) throws InterruptedException {
    TcpGate gate = new TcpGate(args[0], Integer.parseInt(args[1]));
    System.out.println("PORT " + gate.port());
    System.out.flush();
    Thread.currentThread().join();
  }
}
