package dev.onceguard.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.SidecarConfig.ApiSecurity;
import dev.onceguard.proxy.security.TestPki;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The gRPC security settings: {@code sidecar.tls}, {@code sidecar.auth}, Unix sockets, {@code target-tls}. */
class ConfigReaderSecurityTest {
  @TempDir
  static Path dir;
  private static TestPki pki;

  @BeforeAll
  static void certificates() throws Exception {
    pki = TestPki.create(dir.resolve("pki"));
    Files.writeString(dir.resolve("token"), "t0ken\n");
    Files.writeString(dir.resolve("empty-token"), "\n");
    Files.writeString(dir.resolve("not-pem.crt"), "hello\n");
  }

  private static String f(String name) {
    return name.contains("/") ? name : (name.endsWith(".crt") || name.endsWith(".key")) && !name.startsWith("not-")
        ? pki.file(name).toString() : dir.resolve(name).toString();
  }

  /** {@code tls} and {@code auth} settings of the sidecar, {@code auth} last. */
  private static String sidecarTls(String cert, String key, String clientCa, String token) {
    return """
        tls:
          cert-file: %s
          key-file: %s
          client-ca-file: %s
        auth:
          token-file: %s
        """.formatted(f(cert), f(key), f(clientCa), f(token));
  }

  /** A config with {@code sidecar} settings and one route's extra settings. */
  private static String yaml(String sidecar, String route) {
    return """
        sidecar:
          instance-id: t
        %s
        kafka:
          bootstrap-servers: kafka:9092
        mysql:
          database: og
        routes:
          - name: r
            topics: [t]
            business-key: [key]
        %s
        """.formatted(sidecar.indent(2).stripTrailing(), route.indent(4).stripTrailing());
  }

  private static SidecarConfig parse(String yaml) {
    return new ConfigReader(Map.of()).parse(yaml, "test.yaml");
  }

  private static List<String> problems(String yaml) {
    try {
      parse(yaml);
    } catch (ConfigException e) {
      return e.problems();
    }
    throw new AssertionError("accepted:\n" + yaml);
  }

  @Test
  void defaults_arePlaintextLoopbackWithoutAuth() {
    SidecarConfig c = parse(yaml("", "target: 127.0.0.1:7000"));
    assertThat(c.grpcListen()).isEqualTo("127.0.0.1:7700");
    assertThat(c.security()).isEqualTo(new ApiSecurity(null, null, java.util.List.of(), SidecarSettings.RELOAD_INTERVAL.defaultValue()));
    assertThat(c.security().authenticates()).isFalse();
    assertThat(c.routes().get(0).delivery().tls()).isNull();
  }

  @Test
  void tlsAuthAndTargetTls_areRead() {
    SidecarConfig c = parse(yaml("reload-interval: 2s\n" + sidecarTls("server.crt", "server.key", "ca.crt", "token")
        + "  allowed-clients: [guard-client, billing]\n", """
        target: business:7000
        target-tls:
          ca-file: %s
          cert-file: %s
          key-file: %s
          authority: business.internal
        """.formatted(f("ca.crt"), f("client.crt"), f("client.key"))));

    ApiSecurity s = c.security();
    assertThat(s.tls()).isEqualTo(new TlsConfig(pki.file("server.crt"), pki.file("server.key"), pki.file("ca.crt"), null));
    assertThat(s.tokenFile()).isEqualTo(dir.resolve("token"));
    assertThat(s.allowedClients()).containsExactly("guard-client", "billing");
    assertThat(s.reloadInterval()).hasSeconds(2);
    assertThat(c.routes().get(0).delivery().tls())
        .isEqualTo(new TlsConfig(pki.file("client.crt"), pki.file("client.key"), pki.file("ca.crt"), "business.internal"));
  }

  @Test
  void unixSockets_areAcceptedForTheListenerAndTheTarget() {
    SidecarConfig c = parse(yaml("grpc-listen: unix://" + dir.resolve("og.sock"), "target: unix:///run/business/grpc.sock"));
    assertThat(c.grpcListen()).isEqualTo("unix://" + dir.resolve("og.sock"));
    assertThat(UnixSocket.pathOf(c.routes().get(0).delivery().target())).isEqualTo(Path.of("/run/business/grpc.sock"));
  }

  @Test
  void badFiles_areReportedAllAtOnce_namingSettingAndFile() {
    List<String> p = problems(yaml(sidecarTls("not-pem.crt", "server.key", "/nowhere/ca.crt", "empty-token"), """
        target: business:7000
        target-tls:
          ca-file: %s
          cert-file: %s
          key-file: %s
        """.formatted(f("ca.crt"), f("client.crt"), f("other-client.key"))));

    assertThat(p).containsExactly(
        "sidecar.tls.cert-file: file " + dir.resolve("not-pem.crt") + " is not a PEM certificate file (-----BEGIN CERTIFICATE-----): "
            + p.get(0).substring(p.get(0).indexOf("-----): ") + 8),
        "sidecar.tls.client-ca-file: file /nowhere/ca.crt does not exist",
        "sidecar.auth.token-file: file " + dir.resolve("empty-token") + " is empty (it must hold the bearer token)",
        "routes[0].target-tls.key-file: the key in " + pki.file("other-client.key") + " does not belong to the certificate in "
            + pki.file("client.crt") + " (CN=guard-client)");
  }

  @Test
  void aKeyInAnotherPemFormat_getsTheConversionHint() throws Exception {
    Path rsa = dir.resolve("pkcs1.key");
    Files.writeString(rsa, "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n");
    List<String> p = problems(yaml("tls:\n  cert-file: " + f("server.crt") + "\n  key-file: " + rsa, "target: b:7000"));
    assertThat(p).containsExactly("sidecar.tls.key-file: file " + rsa
        + " holds no unencrypted PKCS#8 key (-----BEGIN PRIVATE KEY-----); convert it: openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8");
  }

  @Test
  void meaninglessCombinations_areRejected() {
    assertThat(problems(yaml("", """
        target: unix:///run/b.sock
        target-tls:
          ca-file: %s
        """.formatted(f("ca.crt"))))).singleElement().asString()
        .startsWith("routes[0].target-tls: meaningless on a Unix socket target (unix:///run/b.sock)");
    assertThat(problems(yaml("", "mode: pull\ntarget-tls:\n  ca-file: " + f("ca.crt")))).containsExactly(
        "routes[0].target-tls: only meaningful in push mode (in pull mode the business connects to sidecar.grpc-listen)");
    assertThat(problems(yaml("auth:\n  allowed-clients: [x]", "target: b:7000"))).containsExactly(
        "sidecar.auth.allowed-clients: client names are only known with mTLS: set sidecar.tls.client-ca-file too");
    assertThat(problems(yaml("tls:\n  key-file: " + f("server.key"), "target: b:7000"))).containsExactly(
        "sidecar.tls.cert-file: required");
    assertThat(problems(yaml("", "target: b:7000\ntarget-tls:\n  cert-file: " + f("client.crt")))).containsExactly(
        "routes[0].target-tls.key-file: required");
    assertThat(problems(yaml("grpc-listen: unix:///no/such/dir/og.sock", "target: b:7000"))).containsExactly(
        "sidecar.grpc-listen: directory /no/such/dir of the socket does not exist");
    assertThat(problems(yaml("grpc-listen: unix:relative.sock", "target: b:7000"))).singleElement().asString()
        .isEqualTo("sidecar.grpc-listen: 'unix:relative.sock' is not unix:///absolute/path, e.g. unix:///run/onceguard/grpc.sock");
    assertThat(problems(yaml("tls:\n  cert-flie: x", "target: b:7000"))).contains(
        "sidecar.tls.cert-flie: unknown setting (did you mean 'cert-file'?)");
  }
}
