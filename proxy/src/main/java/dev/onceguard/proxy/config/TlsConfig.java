package dev.onceguard.proxy.config;

import java.nio.file.Path;

/**
 * The PEM files of one TLS endpoint: the sidecar's gRPC listener ({@code sidecar.tls}) or a push
 * route's channel to the business ({@code routes[].target-tls}). The files are read again when they
 * change, so a rotated certificate is used by new connections without a restart. Validated by
 * {@link ConfigReader}: the files exist, are PEM, and the key belongs to the certificate.
 *
 * @param certFile certificate chain, leaf first: the listener's own certificate (required there);
 *     on a route, the client certificate for mTLS, or {@code null}
 * @param keyFile the private key of {@code certFile} (unencrypted PKCS#8), or {@code null} with it
 * @param caFile listener: the CA of client certificates, which are then required (mTLS), or
 *     {@code null}; route: the CA the business's certificate must chain to, or {@code null} for the
 *     JVM's default trust store
 * @param authority route only: the name the business's certificate must carry, also sent as TLS
 *     SNI and {@code :authority}, instead of the target's host; {@code null} for the host
 */
public record TlsConfig(Path certFile, Path keyFile, Path caFile, String authority) {}
