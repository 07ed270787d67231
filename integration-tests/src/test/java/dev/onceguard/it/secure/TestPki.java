package dev.onceguard.it.secure;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Certificates made at test time with the openssl CLI, in a temporary folder (private keys are
 * never part of the repository): a CA, and server certificates it signs.
 */
public final class TestPki {
  private final Path dir;

  public TestPki(Path dir) {
    this.dir = dir;
  }

  /** A self-signed CA: {@code <name>.pem} (its key is {@code <name>.key}). */
  public Path ca(String name) {
    Tools.run(dir, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=" + name,
        "-keyout", name + ".key", "-out", name + ".pem");
    return dir.resolve(name + ".pem");
  }

  /**
   * A server certificate signed by {@code ca} for the subject alternative names {@code san}
   * (e.g. {@code IP:127.0.0.1}); returns {@code [certificate, key]}.
   */
  public Path[] server(Path ca, String name, String san) throws java.io.IOException {
    String caName = ca.getFileName().toString().replace(".pem", "");
    Tools.run(dir, "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout", name + ".key",
        "-out", name + ".csr");
    Files.writeString(dir.resolve(name + ".ext"), "subjectAltName=" + san + "\n");
    Tools.run(dir, "openssl", "x509", "-req", "-in", name + ".csr", "-CA", caName + ".pem", "-CAkey", caName + ".key",
        "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem");
    return new Path[] {dir.resolve(name + ".pem"), dir.resolve(name + ".key")};
  }

  /** A PKCS12 key store {@code <name>.p12} with the key and certificate of {@link #server}'s {@code [cert, key]}. */
  public Path pkcs12(Path[] certAndKey, String name, String password) throws java.io.IOException {
    Path pass = dir.resolve(name + ".pass");
    Files.writeString(pass, password + "\n");
    Tools.run(dir, "openssl", "pkcs12", "-export", "-in", certAndKey[0].toString(), "-inkey", certAndKey[1].toString(),
        "-name", name, "-passout", "file:" + pass, "-out", name + ".p12");
    return dir.resolve(name + ".p12");
  }
}
