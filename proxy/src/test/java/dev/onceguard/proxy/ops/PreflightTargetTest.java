package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.config.TlsConfig;
import dev.onceguard.proxy.ops.Probes.Check;
import dev.onceguard.proxy.ops.Probes.Status;
import dev.onceguard.proxy.security.GrpcSecurity;
import dev.onceguard.proxy.security.TestPki;
import dev.onceguard.proxy.security.UnixServer;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code validate --connect}'s business target check against real TLS and Unix socket servers. */
class PreflightTargetTest {
  @TempDir
  static Path dir;
  private static TestPki pki;
  private static final GrpcSecurity security = new GrpcSecurity(Duration.ofHours(1));
  private static Server tls;
  private static Server unix;
  private static UnixServer unixServer;

  @BeforeAll
  static void start() throws Exception {
    pki = TestPki.create(dir.resolve("pki"));
    tls = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
            security.serverCredentials(new TlsConfig(pki.file("server.crt"), pki.file("server.key"), null, null)))
        .addService(new HealthStatusManager().getHealthService()).build().start();
    unixServer = UnixServer.bind(dir.resolve("b.sock"), security.serverCredentials(null));
    unix = unixServer.builder().addService(new HealthStatusManager().getHealthService()).build().start();
  }

  @AfterAll
  static void stop() throws Exception {
    tls.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    unix.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    unixServer.close();
    security.close();
  }

  private static Check check(String route) {
    SidecarConfig c = new ConfigReader(Map.of()).parse("""
        kafka: {bootstrap-servers: "kafka:9092"}
        mysql: {database: og}
        routes:
          - {name: r, topics: [t], business-key: [key], %s}
        """.formatted(route), "test.yaml");
    return new Preflight(c, Duration.ofSeconds(3)).target(c.routes().get(0));
  }

  @Test
  void aTlsTargetTrustingItsCa_completesAHandshake() {
    Check c = check("target: 'localhost:" + tls.getPort() + "', target-tls: {ca-file: '" + pki.file("ca.crt") + "'}");
    assertThat(c.status()).isEqualTo(Status.OK);
    assertThat(c.detail()).isEqualTo("business target localhost:" + tls.getPort() + " completed a TLS handshake");
  }

  @Test
  void aTlsTargetWithAnUntrustedCertificate_fails_sayingWhy() {
    Check c = check("target: 'localhost:" + tls.getPort() + "', target-tls: {ca-file: '" + pki.file("other-ca.crt") + "'}");
    assertThat(c.status()).isEqualTo(Status.FAIL);
    assertThat(c.detail()).startsWith("business target localhost:" + tls.getPort() + " (TLS): ").containsIgnoringCase("certification path");
  }

  @Test
  void aUnixSocketTarget_isConnectedTo() {
    assertThat(check("target: 'unix://" + dir.resolve("b.sock") + "'").status()).isEqualTo(Status.OK);
    Check absent = check("target: 'unix://" + dir.resolve("absent.sock") + "'");
    assertThat(absent.status()).isEqualTo(Status.FAIL);
    assertThat(absent.detail()).startsWith("business target unix://" + dir.resolve("absent.sock") + " cannot be reached");
  }
}
