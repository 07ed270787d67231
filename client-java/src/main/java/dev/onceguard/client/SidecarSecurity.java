package dev.onceguard.client;

import java.nio.file.Path;

/**
 * How this library's own channel to the sidecar is secured: TLS (a CA to trust, optionally a
 * client certificate for mTLS, optionally the name to expect instead of the target's host) and
 * the bearer token the sidecar's {@code sidecar.auth.token-file} holds. Immutable; each
 * {@code with…} returns a copy. {@link #plaintext()} is what the sidecar expects by default (it
 * runs in the same pod and listens on loopback).
 *
 * <p>Used by {@link GuardClient#forTarget(String, java.time.Duration, SidecarSecurity)}; the pull
 * consumer reads the same from its {@code onceguard.tls.*} and {@code onceguard.token-file} keys.
 * The token file is read again when it changes; the CA, certificate and key files are checked every
 * 10 seconds while the channel is open, and new connections use what they hold then (a rotated
 * client certificate needs no new client).
 *
 * @param tls whether the channel uses TLS
 * @param caFile PEM CA certificates the sidecar's certificate must chain to; {@code null}: the
 *     JVM's default trust store
 * @param certFile PEM client certificate chain for mTLS, or {@code null}
 * @param keyFile its PKCS#8 PEM private key, or {@code null}
 * @param authority the name the sidecar's certificate must carry instead of the target's host,
 *     or {@code null}
 * @param tokenFile file holding the bearer token sent on every call, or {@code null}
 * @param token the bearer token itself (when it does not come from a file), or {@code null}
 */
public record SidecarSecurity(boolean tls, Path caFile, Path certFile, Path keyFile, String authority, Path tokenFile, String token) {
  public SidecarSecurity {
    if ((certFile == null) != (keyFile == null)) {
      throw new IllegalArgumentException("a client certificate needs both its certificate and its key file");
    }
    if (tokenFile != null && token != null) {
      throw new IllegalArgumentException("give the token or its file, not both");
    }
    if (!tls && (caFile != null || certFile != null || authority != null)) {
      throw new IllegalArgumentException("CA, client certificate and authority only apply with TLS");
    }
  }

  /** No TLS, no token: the default. */
  public static SidecarSecurity plaintext() {
    return new SidecarSecurity(false, null, null, null, null, null, null);
  }

  /** TLS trusting the JVM's default trust store. */
  public SidecarSecurity withTls() {
    return new SidecarSecurity(true, caFile, certFile, keyFile, authority, tokenFile, token);
  }

  /** TLS trusting the CA certificates in {@code caFile} (PEM). */
  public SidecarSecurity withTls(Path caFile) {
    return new SidecarSecurity(true, caFile, certFile, keyFile, authority, tokenFile, token);
  }

  /** mTLS: presents this certificate chain and key (PEM, key in PKCS#8). Implies TLS. */
  public SidecarSecurity withClientCertificate(Path certFile, Path keyFile) {
    return new SidecarSecurity(true, caFile, certFile, keyFile, authority, tokenFile, token);
  }

  /** Expects {@code authority} in the sidecar's certificate (and sends it as SNI) instead of the target's host. */
  public SidecarSecurity withAuthority(String authority) {
    return new SidecarSecurity(tls, caFile, certFile, keyFile, authority, tokenFile, token);
  }

  /** Sends {@code authorization: Bearer <token>} with the token in {@code tokenFile}, read again when it changes. */
  public SidecarSecurity withTokenFile(Path tokenFile) {
    return new SidecarSecurity(tls, caFile, certFile, keyFile, authority, tokenFile, null);
  }

  /** Sends {@code authorization: Bearer <token>}. */
  public SidecarSecurity withToken(String token) {
    return new SidecarSecurity(tls, caFile, certFile, keyFile, authority, null, token);
  }

  @Override
  public String toString() {
    // never print the token
    return "SidecarSecurity[tls=" + tls + ", caFile=" + caFile + ", certFile=" + certFile + ", authority=" + authority
        + ", tokenFile=" + tokenFile + (token == null ? "" : ", token=(set)") + "]";
  }
}
