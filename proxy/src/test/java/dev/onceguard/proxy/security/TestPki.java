package dev.onceguard.proxy.security;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Throwaway certificates for one test class, made by {@code scripts/test-pki.sh} (the openssl CLI):
 * a CA with a server (localhost, 127.0.0.1) and a client certificate, and an unrelated second CA
 * with the same two. See the script for the file names.
 */
public final class TestPki {
  private final Path dir;

  private TestPki(Path dir) {
    this.dir = dir;
  }

  /** Generates the files into {@code dir} (about a second). */
  public static TestPki create(Path dir) throws IOException, InterruptedException {
    Path script = Path.of("..", "scripts", "test-pki.sh").toAbsolutePath().normalize();
    Process p = new ProcessBuilder(script.toString(), dir.toString()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IOException(script + " failed: " + out);
    }
    return new TestPki(dir);
  }

  /** A file the script wrote, e.g. {@code server.crt}. */
  public Path file(String name) {
    Path f = dir.resolve(name);
    if (!Files.exists(f)) {
      throw new IllegalArgumentException("test-pki.sh writes no " + name);
    }
    return f;
  }

  public Path dir() {
    return dir;
  }
}
