package dev.onceguard.proxy.extract;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * SHA-256 for the digests of a record's keys and fields: one {@link MessageDigest} per thread,
 * since {@link MessageDigest#getInstance} looks the algorithm up among the security providers on
 * every call, about ten times per record.
 */
final class Sha256 {
  private static final ThreadLocal<MessageDigest> PER_THREAD = ThreadLocal.withInitial(Sha256::fresh);

  private Sha256() {}

  /** The digest of {@code bytes}; the thread's instance is reset by {@link MessageDigest#digest(byte[])}. */
  static byte[] of(byte[] bytes) {
    return PER_THREAD.get().digest(bytes);
  }

  /** An instance of its own, for a digest fed in several parts. */
  static MessageDigest fresh() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JVM", e);
    }
  }
}
