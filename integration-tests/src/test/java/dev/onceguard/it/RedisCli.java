package dev.onceguard.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One redis-cli command against a node on 127.0.0.1, for tests that look at a Redis node itself
 * (its keys, its role). Bounded by {@code timeout 5}: a paused node (SIGSTOP) accepts the
 * connection and never answers. Answers the command's output, or "" when it could not run.
 */
public final class RedisCli {
  private RedisCli() {}

  public static String run(int port, String... args) {
    List<String> cmd = new ArrayList<>(List.of("timeout", "5", "redis-cli", "-h", "127.0.0.1", "-p", Integer.toString(port)));
    cmd.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      p.waitFor(10, TimeUnit.SECONDS);
      return out;
    } catch (IOException e) {
      return "";
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "";
    }
  }
}
