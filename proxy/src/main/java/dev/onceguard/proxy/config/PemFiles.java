package dev.onceguard.proxy.config;

import io.grpc.util.CertificateUtils;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.cert.X509Certificate;

/**
 * Start-up checks of the PEM files the gRPC TLS settings name, reading them the way the running
 * sidecar does (gRPC's {@link CertificateUtils}), so that a file that passes here also loads there.
 * Each check returns why the file is unusable, naming the file, or {@code null} when it is fine.
 */
public final class PemFiles {
  private PemFiles() {}

  /** Certificates (one or more) in {@code file}: a chain, or CA certificates. */
  public static String certificatesProblem(Path file) {
    String text = textProblem(file);
    if (text != null) {
      return text;
    }
    try {
      certificates(file);
      return null;
    } catch (IOException | GeneralSecurityException | RuntimeException e) {
      return "file " + file + " is not a PEM certificate file (-----BEGIN CERTIFICATE-----): " + e.getMessage();
    }
  }

  /**
   * An unencrypted PKCS#8 private key in {@code keyFile} that belongs to the first certificate
   * of {@code certFile} (checked by signing with the key and verifying with the certificate,
   * when both read and the algorithm is RSA, EC or EdDSA).
   */
  public static String keyProblem(Path keyFile, Path certFile) {
    String text = textProblem(keyFile);
    if (text != null) {
      return text;
    }
    PrivateKey key;
    try {
      String pem = Files.readString(keyFile, StandardCharsets.US_ASCII);
      if (!pem.contains("-----BEGIN PRIVATE KEY-----")) {
        return "file " + keyFile + " holds no unencrypted PKCS#8 key (-----BEGIN PRIVATE KEY-----)"
            + (pem.contains("-----BEGIN") ? "; convert it: openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8" : "");
      }
      key = CertificateUtils.getPrivateKey(new ByteArrayInputStream(pem.getBytes(StandardCharsets.US_ASCII)));
    } catch (IOException | GeneralSecurityException | RuntimeException e) {
      return "file " + keyFile + " is not a readable private key: " + e.getMessage();
    }
    if (certFile == null) {
      return null; // the certificate setting's own problem is reported
    }
    X509Certificate leaf;
    try {
      leaf = certificates(certFile)[0];
    } catch (IOException | GeneralSecurityException | RuntimeException e) {
      return null; // the certificate's own problem is reported on its setting
    }
    String algorithm = switch (key.getAlgorithm()) {
      case "RSA" -> "SHA256withRSA";
      case "EC" -> "SHA256withECDSA";
      case "EdDSA", "Ed25519", "Ed448" -> "EdDSA";
      default -> null;
    };
    if (algorithm == null) {
      return null; // cannot tell: the handshake will
    }
    try {
      byte[] probe = "onceguard key check".getBytes(StandardCharsets.US_ASCII);
      Signature signer = Signature.getInstance(algorithm);
      signer.initSign(key);
      signer.update(probe);
      byte[] signature = signer.sign();
      Signature verifier = Signature.getInstance(algorithm);
      verifier.initVerify(leaf.getPublicKey());
      verifier.update(probe);
      if (verifier.verify(signature)) {
        return null;
      }
    } catch (GeneralSecurityException | RuntimeException e) {
      // a key of another algorithm than the certificate's: no match either
    }
    return "the key in " + keyFile + " does not belong to the certificate in " + certFile + " (" + leaf.getSubjectX500Principal() + ")";
  }

  private static X509Certificate[] certificates(Path file) throws IOException, GeneralSecurityException {
    byte[] bytes = Files.readAllBytes(file);
    X509Certificate[] certs = CertificateUtils.getX509Certificates(new ByteArrayInputStream(bytes));
    if (certs.length == 0) {
      throw new java.security.cert.CertificateException("no certificate in it");
    }
    return certs;
  }

  /** Why {@code file} cannot be read as text, or {@code null}. */
  private static String textProblem(Path file) {
    if (!Files.exists(file)) {
      return "file " + file + " does not exist";
    }
    if (!Files.isRegularFile(file)) {
      return file + " is not a file";
    }
    if (!Files.isReadable(file)) {
      return "file " + file + " is not readable by this user";
    }
    return null;
  }
}
