package dev.onceguard.it.pods;

import dev.onceguard.proxy.config.RouteConfig.Mode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A running example business container (a child process, stderr to a log file). In push mode
 * {@link #start} waits for its {@code listening on <port>} line; SIGTERM on {@link #close}, then a
 * kill if it lingers.
 */
final class PodProcess implements AutoCloseable {
  private static final Pattern LISTENING = Pattern.compile("listening on (\\d+)");
  private final Process process;
  private final int port;
  private final Path log;

  private PodProcess(Process process, int port, Path log) {
    this.process = process;
    this.port = port;
    this.log = log;
  }

  /**
   * @param sidecar the sidecar's gRPC address (pull mode; ignored in push mode)
   */
  static PodProcess start(BusinessPod pod, Path out, Path log, String sidecar, String route) throws IOException {
    Process p = new ProcessBuilder(pod.command(out, sidecar, route))
        .directory(pod.dir().toFile())
        .redirectError(log.toFile())
        .start();
    CompletableFuture<Integer> port = new CompletableFuture<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = r.readLine()) != null; ) {
          Matcher m = LISTENING.matcher(line);
          if (m.find()) {
            port.complete(Integer.parseInt(m.group(1)));
          }
        }
      } catch (IOException e) {
        port.completeExceptionally(e);
      }
      port.completeExceptionally(new IllegalStateException(pod.name() + " exited before listening"));
    }, "business-pod-stdout");
    reader.setDaemon(true);
    reader.start();
    if (pod.mode() == Mode.PULL) {
      return new PodProcess(p, -1, log);
    }
    try {
      return new PodProcess(p, port.get(20, TimeUnit.SECONDS), log);
    } catch (Exception e) {
      p.destroyForcibly();
      throw new IllegalStateException(pod.name() + " did not print 'listening on <port>' within 20 s: " + e + "\n--- " + log + ":\n"
          + (Files.exists(log) ? Files.readString(log) : ""), e);
    }
  }

  /** The push-mode port; -1 in pull mode. */
  int port() {
    return port;
  }

  boolean isAlive() {
    return process.isAlive();
  }

  /** What the business wrote to stderr so far, for failure messages. */
  String log() throws IOException {
    return Files.exists(log) ? Files.readString(log) : "";
  }

  @Override
  public void close() throws InterruptedException {
    process.destroy(); // SIGTERM: the business drains and exits
    if (!process.waitFor(5, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      process.waitFor(5, TimeUnit.SECONDS);
    }
  }
}
