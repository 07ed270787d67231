package dev.onceguard.proxy.security;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * A bearer token kept in a file (surrounding whitespace ignored), read again when the file changed
 * ({@link GrpcSecurity} watches it). Only the token's SHA-256 digest is kept, and
 * presented tokens are compared digest to digest with {@link MessageDigest#isEqual}, so that the
 * comparison takes the same time wherever a wrong token differs, whatever its length.
 *
 * <p>A reload that finds the file missing, unreadable or empty keeps the previous token (the
 * watch logs a warning, never the token). Threading: any thread.
 */
public final class TokenFile {
  private final Path file;
  private volatile byte[] digest;

  /** @throws IOException if the file cannot be read or holds no token */
  TokenFile(Path file) throws IOException {
    this.file = file;
    load();
  }

  /** True when {@code presented} is the current token. */
  public boolean matches(String presented) {
    return presented != null && MessageDigest.isEqual(digest, sha256(presented.trim()));
  }

  /** Reads the file (again); the previous token stays when it holds none. */
  void load() throws IOException {
    String token = Files.readString(file, StandardCharsets.UTF_8).trim();
    if (token.isEmpty()) {
      throw new IOException("bearer token file " + file + " is empty");
    }
    digest = sha256(token);
  }

  private static byte[] sha256(String s) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }
}
