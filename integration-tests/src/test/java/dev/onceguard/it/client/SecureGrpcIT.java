package dev.onceguard.it.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.onceguard.client.Explanation;
import dev.onceguard.client.GuardClient;
import dev.onceguard.client.OnceGuardConsumer;
import dev.onceguard.client.OnceGuardConsumerConfig;
import dev.onceguard.client.OnceGuardException;
import dev.onceguard.client.SidecarSecurity;
import dev.onceguard.client.SidecarUnavailableException;
import dev.onceguard.it.ForwardConfig;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.proxy.config.TlsConfig;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.security.GrpcSecurity;
import dev.onceguard.proxy.security.UnixServer;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The secured sidecar on the real stack: its gRPC listener requires TLS with client certificates
 * and a bearer token on the Guard API and Deliveries; one push route reaches its business over
 * mTLS, another over a Unix domain socket, a pull route serves a consumer configured with the
 * {@code onceguard.tls.*} keys. A second sidecar listens on a Unix socket. Certificates are throwaway ones from {@code scripts/test-pki.sh}.
 */
class SecureGrpcIT {
  private static final int N = 40;
  private static final String TOKEN = "it-token-" + ItEnv.uniqueSuffix();

  @TempDir
  static Path dir;
  private static Path pki;
  private static KafkaSupport kafka;
  private static GrpcSecurity businessSecurity;
  private static RecordingBusiness tlsBusiness;
  private static RecordingBusiness unixBusiness;
  private static UnixServer unixServer;
  private static ClientSidecar sidecar;
  private static String tlsTopic;
  private static String unixTopic;
  private static String pullTopic;
  private static String pullRoute;

  @BeforeAll
  static void start() throws Exception {
    pki = dir.resolve("pki");
    Process p = new ProcessBuilder(Path.of("..", "scripts", "test-pki.sh").toString(), pki.toString()).inheritIO().start();
    assertThat(p.waitFor()).as("scripts/test-pki.sh").isZero();
    Path tokenFile = dir.resolve("token");
    Files.writeString(tokenFile, TOKEN + "\n");

    // the businesses: one requiring client certificates from the test CA, one on a Unix socket
    businessSecurity = new GrpcSecurity(Duration.ofSeconds(1));
    tlsBusiness = RecordingBusiness.startOn(NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0),
        businessSecurity.serverCredentials(new TlsConfig(pem("server.crt"), pem("server.key"), pem("ca.crt"), null))));
    Path sock = dir.resolve("business.sock");
    unixServer = UnixServer.bind(sock, businessSecurity.serverCredentials(null));
    unixBusiness = RecordingBusiness.startOn(unixServer.builder());

    kafka = new KafkaSupport();
    tlsTopic = kafka.createTopic("secure-tls", 2);
    unixTopic = kafka.createTopic("secure-uds", 2);
    pullTopic = kafka.createTopic("secure-pull", 2);
    String suffix = ItEnv.uniqueSuffix();
    pullRoute = "pull-" + suffix;
    sidecar = ClientSidecar.start("secure-grpc-it", """
        tls: {cert-file: %s, key-file: %s, client-ca-file: %s}
        auth: {token-file: %s}
        reload-interval: 1s
        """.formatted(pem("server.crt"), pem("server.key"), pem("ca.crt"), tokenFile), """
          - name: tls-%s
            topics: [%s]
            business-key: [key]
            target: localhost:%d
            target-tls:
              ca-file: %s
              cert-file: %s
              key-file: %s
          - name: uds-%s
            topics: [%s]
            business-key: [key]
            target: unix://%s
          - name: %s
            topics: [%s]
            business-key: [key]
            mode: pull
        """.formatted(suffix, tlsTopic, tlsBusiness.port(), pem("ca.crt"), pem("client.crt"), pem("client.key"),
        suffix, unixTopic, sock, pullRoute, pullTopic), ItEnv.mysqlPort());
  }

  @AfterAll
  static void stop() throws Exception {
    for (AutoCloseable c : new AutoCloseable[] {sidecar, tlsBusiness, unixBusiness, unixServer, businessSecurity, kafka}) {
      if (c != null) {
        c.close();
      }
    }
  }

  private static Path pem(String name) {
    return pki.resolve(name);
  }

  private static Set<String> produce(String topic) {
    List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      records.add(new ProducerRecord<>(topic, i % 2, ("k-" + i).getBytes(StandardCharsets.UTF_8),
          ("{\"n\":" + i + "}").getBytes(StandardCharsets.UTF_8)));
    }
    kafka.produce(records);
    return records.stream().map(r -> new String(r.key(), StandardCharsets.UTF_8)).collect(Collectors.toSet());
  }

  private static Set<String> receivedKeys(RecordingBusiness business) {
    return business.okDeliveries().stream().map(d -> d.getRecord().getKey().toStringUtf8()).collect(Collectors.toSet());
  }

  @Test
  void recordsReachTheBusinessOverMutualTls_andOverAUnixSocket() {
    Set<String> overTls = produce(tlsTopic);
    Set<String> overUnix = produce(unixTopic);

    await().atMost(Duration.ofSeconds(45)).untilAsserted(() -> {
      assertThat(receivedKeys(tlsBusiness)).isEqualTo(overTls);
      assertThat(receivedKeys(unixBusiness)).isEqualTo(overUnix);
    });
    assertThat(tlsBusiness.calls()).as("once each").hasSize(N);
    assertThat(unixBusiness.calls()).as("once each").hasSize(N);
  }

  @Test
  void aPullConsumer_configuredWithTlsKeysAndATokenFile_receivesTheRecords() throws Exception {
    Set<String> sent = produce(pullTopic);
    Properties props = new Properties();
    props.put(OnceGuardConsumerConfig.TARGET_CONFIG, sidecar.target());
    props.put(OnceGuardConsumerConfig.ROUTE_CONFIG, pullRoute);
    props.put(OnceGuardConsumerConfig.TLS_CA_FILE_CONFIG, pem("ca.crt").toString());
    props.put(OnceGuardConsumerConfig.TLS_CERT_FILE_CONFIG, pem("client.crt").toString());
    props.put(OnceGuardConsumerConfig.TLS_KEY_FILE_CONFIG, pem("client.key").toString());
    props.put(OnceGuardConsumerConfig.TOKEN_FILE_CONFIG, writeToken(dir.resolve("pull-token")).toString());
    Set<String> got = new HashSet<>();
    try (OnceGuardConsumer<String, String> c = new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
      c.subscribe(List.of(pullTopic));
      await().atMost(Duration.ofSeconds(45)).until(() -> {
        c.poll(Duration.ofMillis(200)).forEach(r -> got.add(r.key()));
        return got.size() >= N;
      });
    }
    assertThat(got).isEqualTo(sent);
  }

  @Test
  void aSidecarListeningOnAUnixSocket_answersHealthThere_andASecondOneCannotTakeIt() throws Exception {
    Path sock = dir.resolve("sidecar.sock");
    String topic = kafka.createTopic("secure-listen", 1);
    ForwardConfig config = ForwardConfig.route(topic, "secure-listen-" + ItEnv.uniqueSuffix(), "127.0.0.1:1").grpcListen("unix://" + sock);
    try (Sidecar s = new Sidecar(config.build(), ProcessorFactory.forwarding())) {
      s.start();
      try (Sidecar second = new Sidecar(config.build(), ProcessorFactory.forwarding())) {
        assertThatThrownBy(second::start).isInstanceOf(java.io.IOException.class)
            .hasMessage("cannot listen on sidecar.grpc-listen unix://" + sock + ": another server is listening on " + sock);
      }
      ManagedChannel ch = Grpc.newChannelBuilder("unix://" + sock, InsecureChannelCredentials.create()).build();
      try {
        assertThat(HealthGrpc.newBlockingStub(ch).withDeadlineAfter(5, TimeUnit.SECONDS)
            .check(HealthCheckRequest.getDefaultInstance()).getStatus()).isEqualTo(ServingStatus.SERVING);
      } finally {
        ch.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      }
    }
  }

  private static SidecarSecurity client() {
    return SidecarSecurity.plaintext().withTls(pem("ca.crt")).withClientCertificate(pem("client.crt"), pem("client.key"));
  }

  private static Explanation explain(SidecarSecurity security) {
    try (GuardClient guard = GuardClient.forTarget(sidecar.target(), Duration.ofSeconds(5), security)) {
      return guard.explainDedupKey(sidecar.config().routes().get(0).name(), "no-such-key");
    }
  }

  private static Status.Code code(Throwable e) {
    return ((StatusRuntimeException) e.getCause()).getStatus().getCode();
  }

  @Test
  void theGuardApi_answersAClientWithCertificateAndToken() {
    Explanation e = explain(client().withToken(TOKEN));
    assertThat(e.ledger()).isEmpty();

    Path tokenFile = dir.resolve("client-token");
    assertThat(explain(client().withTokenFile(writeToken(tokenFile))).ledger()).isEmpty();
  }

  private static Path writeToken(Path f) {
    try {
      return Files.writeString(f, TOKEN);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  void aLongLivedGuardClient_usesItsRotatedClientCertificate_withoutBeingRecreated() throws Exception {
    Path crt = dir.resolve("rotating-client.crt");
    Path key = dir.resolve("rotating-client.key");
    Files.copy(pem("other-client.crt"), crt, StandardCopyOption.REPLACE_EXISTING);
    Files.copy(pem("other-client.key"), key, StandardCopyOption.REPLACE_EXISTING);
    String route = sidecar.config().routes().get(0).name();
    try (GuardClient guard = GuardClient.forTarget(sidecar.target(), Duration.ofSeconds(5),
        SidecarSecurity.plaintext().withTls(pem("ca.crt")).withClientCertificate(crt, key).withToken(TOKEN))) {
      assertThatThrownBy(() -> guard.explainDedupKey(route, "no-such-key")).as("a client certificate of another CA")
          .isInstanceOf(SidecarUnavailableException.class);

      Files.copy(pem("client.key"), key, StandardCopyOption.REPLACE_EXISTING);
      Files.copy(pem("client.crt"), crt, StandardCopyOption.REPLACE_EXISTING);
      long rotated = System.nanoTime();
      await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(500)).ignoreExceptions()
          .until(() -> guard.explainDedupKey(route, "no-such-key").ledger().isEmpty());
      System.out.printf("SecureGrpcIT: the rotated client certificate was in use %d ms after the files changed%n",
          (System.nanoTime() - rotated) / 1_000_000);
    }
  }

  @Test
  void theGuardApi_refusesAMissingOrWrongToken_withUnauthenticated() {
    assertThatThrownBy(() -> explain(client())).isInstanceOf(OnceGuardException.class)
        .satisfies(e -> assertThat(code(e)).isEqualTo(Status.Code.UNAUTHENTICATED));
    assertThatThrownBy(() -> explain(client().withToken(TOKEN + "x"))).isInstanceOf(OnceGuardException.class)
        .satisfies(e -> assertThat(code(e)).isEqualTo(Status.Code.UNAUTHENTICATED))
        .hasMessageContaining("wrong bearer token");
  }

  @Test
  void theListener_refusesClientsWithoutCertificate_withAnotherCa_orInPlaintext() {
    assertThatThrownBy(() -> explain(SidecarSecurity.plaintext().withTls(pem("ca.crt")).withToken(TOKEN)))
        .as("no client certificate").isInstanceOf(SidecarUnavailableException.class);
    assertThatThrownBy(() -> explain(SidecarSecurity.plaintext().withTls(pem("other-ca.crt"))
        .withClientCertificate(pem("client.crt"), pem("client.key")).withToken(TOKEN)))
        .as("sidecar certificate not trusted").isInstanceOf(SidecarUnavailableException.class);
    assertThatThrownBy(() -> explain(SidecarSecurity.plaintext().withToken(TOKEN)))
        .as("plaintext to the TLS port").isInstanceOf(SidecarUnavailableException.class);
  }
}
