package dev.onceguard.it.ops;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The shipped monitoring files ({@code deploy/prometheus}, {@code deploy/grafana}) and the real
 * {@code promtool} / {@code prometheus} binaries, which tests need installed: a missing binary fails
 * the test and says how to install it, it never skips.
 */
public final class PrometheusTools {
  private PrometheusTools() {}

  public static final String INSTALL_HINT = "install Debian's package: apt-get install -y prometheus (README, set-up)";

  /** The repository's {@code deploy} folder, found from the working directory upwards. */
  public static Path deployDir() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.isRegularFile(p.resolve("deploy/prometheus/alerts.yaml"))) {
        return p.resolve("deploy");
      }
    }
    throw new AssertionError("deploy/prometheus/alerts.yaml not found above " + Path.of("").toAbsolutePath());
  }

  public static Path rules() {
    return deployDir().resolve("prometheus/alerts.yaml");
  }

  public static Path ruleTests() {
    return deployDir().resolve("prometheus/alerts.test.yaml");
  }

  public static Path dashboard() {
    return deployDir().resolve("grafana/onceguard.json");
  }

  /** {@code name} on the PATH; fails the test with {@link #INSTALL_HINT} when it is not there. */
  public static Path executable(String name) {
    String path = System.getenv("PATH");
    for (String dir : (path == null ? "" : path).split(File.pathSeparator)) {
      Path p = Path.of(dir.isEmpty() ? "." : dir, name);
      if (Files.isExecutable(p)) {
        return p;
      }
    }
    throw new AssertionError("'" + name + "' is not on the PATH (" + path + "): " + INSTALL_HINT);
  }

  /** What a finished command printed (stdout and stderr) and its exit code. */
  public record Result(int exit, String output) {}

  /** Runs {@code cmd} in {@code dir} to its end; fails the test if it takes longer than {@code timeout}. */
  public static Result run(Path dir, Duration timeout, String... cmd) {
    Path out = null;
    try {
      out = Files.createTempFile("onceguard-cmd-", ".out");
      Process p = new ProcessBuilder(List.of(cmd)).directory(dir.toFile()).redirectErrorStream(true)
          .redirectOutput(out.toFile()).start();
      p.getOutputStream().close();
      if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        p.destroyForcibly();
        throw new AssertionError(String.join(" ", cmd) + " did not finish within " + timeout + ":\n" + Files.readString(out));
      }
      return new Result(p.exitValue(), Files.readString(out));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + String.join(" ", cmd), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    } finally {
      if (out != null) {
        out.toFile().delete();
      }
    }
  }
}
