package dev.onceguard.proxy.config;

import java.nio.file.Path;

/**
 * The two TLS mappings, {@code sidecar.tls} (the gRPC listener) and {@code routes[].target-tls}
 * (a push route's channel to the business), declared and read. The files are checked now through
 * {@link PemFiles}, so that a wrong path, or a key that does not belong to its certificate, fails
 * start-up naming the setting.
 */
final class TlsSettings {
  private TlsSettings() {}

  static final Section SERVER = Section.of("sidecar.tls",
      "TLS on `sidecar.grpc-listen`; without this mapping the listener is plaintext. Not on a Unix socket. "
          + "The files are read again when they change (`sidecar.reload-interval`): new connections use a rotated certificate.");
  static final Setting<String> CERT_FILE = SERVER.add(Setting.required("cert-file", SettingType.PEM_CERTIFICATES, "",
      "the listener's certificate chain, leaf first"));
  static final Setting<String> KEY_FILE = SERVER.add(Setting.required("key-file", SettingType.PEM_KEY, "",
      "the unencrypted PKCS#8 private key of `cert-file`"));
  static final Setting<String> CLIENT_CA_FILE = SERVER.add(Setting.of("client-ca-file", SettingType.PEM_CERTIFICATES, null,
      "mTLS: client certificates signed by this CA are required"));

  static final Section TARGET = Section.of("routes[].target-tls",
      "TLS on a push route's channel to `target`; without this mapping the channel is plaintext. Not on a `unix://` target, "
          + "not in pull mode. The files are read again when they change.");
  static final Setting<String> TARGET_CA_FILE = TARGET.add(Setting.of("ca-file", SettingType.PEM_CERTIFICATES, null,
      "the CA the business's certificate must chain to").shownAs("the JVM's trust store"));
  static final Setting<String> TARGET_CERT_FILE = TARGET.add(Setting.of("cert-file", SettingType.PEM_CERTIFICATES, null,
      "mTLS: the sidecar's client certificate chain, leaf first").shownAs("none; required with `key-file`"));
  static final Setting<String> TARGET_KEY_FILE = TARGET.add(Setting.of("key-file", SettingType.PEM_KEY, null,
      "mTLS: the unencrypted PKCS#8 private key of `cert-file`").shownAs("none; required with `cert-file`"));
  static final Setting<String> AUTHORITY = TARGET.add(Setting.of("authority", SettingType.text("host name"), null,
      "the name the business's certificate must carry, also sent as TLS SNI and `:authority`").shownAs("the target's host"));

  /** {@code sidecar.tls}; {@code null} when absent. */
  static TlsConfig readServer(NodeReader sidecar, String listen) {
    NodeReader t = sidecar.section(SERVER, false);
    TlsConfig tls = null;
    if (t.present()) {
      Path cert = certificates(t, CERT_FILE, true);
      Path key = key(t, KEY_FILE, true, cert);
      Path ca = certificates(t, CLIENT_CA_FILE, false);
      tls = new TlsConfig(cert, key, ca, null);
      if (listen != null && UnixSocket.is(listen)) {
        sidecar.fail(SERVER.key(), "meaningless on a Unix socket (grpc-listen " + listen + "): only this host reaches it, "
            + "and the socket file's permissions decide who; remove sidecar.tls or listen on host:port");
      }
    }
    t.done();
    return tls;
  }

  /** {@code routes[].target-tls}; {@code null} when absent. */
  static TlsConfig readTarget(NodeReader route, RouteConfig.Mode mode, String target) {
    NodeReader t = route.section(TARGET, false);
    if (!t.present()) {
      return null;
    }
    Path ca = certificates(t, TARGET_CA_FILE, false);
    Path cert = certificates(t, TARGET_CERT_FILE, false);
    Path key = key(t, TARGET_KEY_FILE, cert != null, cert);
    if (key != null && !t.has(TARGET_CERT_FILE)) {
      t.missing(TARGET_CERT_FILE, "required with key-file: the client certificate for mTLS");
    }
    String authority = t.get(AUTHORITY);
    t.done();
    if (mode == RouteConfig.Mode.PULL) {
      route.fail(TARGET.key(), "only meaningful in push mode (in pull mode the business connects to sidecar.grpc-listen)");
    } else if (target != null && UnixSocket.is(target)) {
      route.fail(TARGET.key(), "meaningless on a Unix socket target (" + target + "): only this host reaches it, "
          + "and the socket file's permissions decide who; remove target-tls or use host:port");
    }
    return new TlsConfig(cert, key, ca, authority);
  }

  /** A PEM certificate file setting; {@code null} when absent or unusable (reported, naming the file). */
  private static Path certificates(NodeReader n, Setting<String> setting, boolean required) {
    String s = required ? n.require(setting) : n.string(setting);
    if (s == null) {
      return null;
    }
    String problem = PemFiles.certificatesProblem(Path.of(s));
    if (problem != null) {
      n.fail(setting, problem);
      return null;
    }
    return Path.of(s);
  }

  /** A PEM private key setting, checked against {@code certFile} when that is usable. */
  private static Path key(NodeReader n, Setting<String> setting, boolean required, Path certFile) {
    String s = required ? n.require(setting) : n.string(setting);
    if (s == null) {
      return null;
    }
    String problem = PemFiles.keyProblem(Path.of(s), certFile);
    if (problem != null) {
      n.fail(setting, problem);
      return null;
    }
    return Path.of(s);
  }
}
