package dev.onceguard.it.secure;

import java.nio.file.Path;

/**
 * A private {@code redis-server} for one test class that only speaks TLS ({@code --port 0
 * --tls-port P}), with a password, on 127.0.0.1; no persistence. {@link #close()} stops it.
 */
public final class TlsRedis implements AutoCloseable {
  public final int port;
  private final Process process;

  public TlsRedis(Path dir, Path ca, Path cert, Path key, String password) throws Exception {
    this.port = dev.onceguard.it.RecordingBusiness.freePort();
    Path log = dir.resolve("redis.log");
    this.process = new ProcessBuilder("redis-server", "--bind", "127.0.0.1", "--port", "0", "--tls-port", String.valueOf(port),
        "--tls-cert-file", cert.toString(), "--tls-key-file", key.toString(), "--tls-ca-cert-file", ca.toString(),
        "--tls-auth-clients", "no", "--requirepass", password, "--save", "", "--appendonly", "no", "--dir", dir.toString())
        .redirectErrorStream(true).redirectOutput(log.toFile()).start();
    try {
      Tools.awaitPort(port, process, log, 30);
    } catch (Exception | AssertionError e) {
      close();
      throw e;
    }
  }

  @Override
  public void close() {
    Tools.stop(process, 10);
  }
}
