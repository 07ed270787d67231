package dev.onceguard.it.secure;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs the command-line tools the secure-store fixtures need (openssl, keytool, mariadb-install-db). */
final class Tools {
  private Tools() {}

  /** Runs {@code cmd} in {@code dir} and waits; an error with its output when it fails. */
  static void run(Path dir, String... cmd) {
    try {
      Path out = Files.createTempFile(dir, "tool-", ".log");
      Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(out.toFile()).start();
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new AssertionError(List.of(cmd) + " still running after 120 s");
      }
      if (p.exitValue() != 0) {
        throw new AssertionError(List.of(cmd) + " exited " + p.exitValue() + ":\n" + Files.readString(out));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + cmd[0] + " (is it installed?)", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** SIGTERM, then SIGKILL after {@code seconds}. */
  static void stop(Process p, int seconds) {
    if (p == null || !p.isAlive()) {
      return;
    }
    p.destroy();
    try {
      if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  /** Until something accepts TCP connections on 127.0.0.1:{@code port}, or {@code process} ended. */
  static void awaitPort(int port, Process process, Path log, int seconds) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new AssertionError("process exited with " + process.exitValue() + " before listening on " + port + "; " + tail(log));
      }
      try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
        return;
      } catch (IOException notYet) {
        TimeUnit.MILLISECONDS.sleep(100);
      }
    }
    throw new AssertionError("nothing listens on " + port + " after " + seconds + " s; " + tail(log));
  }

  static String tail(Path log) {
    try {
      List<String> lines = Files.readAllLines(log);
      return log + ":\n" + String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    } catch (IOException e) {
      return "(no " + log + ")";
    }
  }
}
