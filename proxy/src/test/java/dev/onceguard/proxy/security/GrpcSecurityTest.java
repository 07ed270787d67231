package dev.onceguard.proxy.security;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.proxy.config.TlsConfig;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.DispatchResult.Kind;
import dev.onceguard.proxy.dispatch.GrpcDispatcher;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Real TLS handshakes on loopback between the sidecar's {@link GrpcDispatcher} and a Netty gRPC
 * business server, both built from {@link GrpcSecurity}: what the business received decides.
 */
class GrpcSecurityTest {
  private static final Duration RELOAD = Duration.ofMillis(100);
  private static final Duration CALL = Duration.ofSeconds(5);

  @TempDir
  static Path pkiDir;
  private static TestPki pki;

  @TempDir
  Path work;

  private final List<Delivery> received = new CopyOnWriteArrayList<>();
  private final List<AutoCloseable> open = new ArrayList<>();
  private final GrpcSecurity security = new GrpcSecurity(RELOAD);

  @BeforeAll
  static void certificates() throws Exception {
    pki = TestPki.create(pkiDir);
  }

  @AfterEach
  void close() throws Exception {
    for (int i = open.size() - 1; i >= 0; i--) {
      open.get(i).close();
    }
    security.close();
  }

  private TlsConfig serverTls(String name, String clientCa) {
    return new TlsConfig(pki.file(name + ".crt"), pki.file(name + ".key"), clientCa == null ? null : pki.file(clientCa), null);
  }

  private static TlsConfig clientTls(Path ca, Path cert, Path key) {
    return new TlsConfig(cert, key, ca, null);
  }

  /** A business on a free loopback port that records what it is handed; returns its port. */
  private int business(ServerCredentials credentials) throws IOException {
    Server s = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), credentials).addService(recorder()).build().start();
    open.add(() -> s.shutdownNow().awaitTermination(5, TimeUnit.SECONDS));
    return s.getPort();
  }

  private MessageHandlerGrpc.MessageHandlerImplBase recorder() {
    return new MessageHandlerGrpc.MessageHandlerImplBase() {
      @Override
      public void handle(Delivery request, StreamObserver<HandleResult> out) {
        received.add(request);
        out.onNext(HandleResult.newBuilder().setOutcome(HandleResult.Outcome.OK).build());
        out.onCompleted();
      }
    };
  }

  private DispatchResult send(String target, ChannelCredentials credentials, String id) {
    GrpcDispatcher d = GrpcDispatcher.forTarget(target, credentials, null);
    try {
      return d.dispatch(Delivery.newBuilder().setDeliveryId(id).build(), CALL).toCompletableFuture().join();
    } finally {
      d.close();
    }
  }

  private List<String> receivedIds() {
    return received.stream().map(Delivery::getDeliveryId).toList();
  }

  @Test
  void tlsHandshakeSucceeds_andTheBusinessReceivesTheDelivery() throws Exception {
    int port = business(security.serverCredentials(serverTls("server", null)));

    DispatchResult r = send("127.0.0.1:" + port, security.channelCredentials(clientTls(pki.file("ca.crt"), null, null)), "d-1");

    assertThat(r.kind()).isEqualTo(Kind.OK);
    assertThat(receivedIds()).containsExactly("d-1");
  }

  @Test
  void aClientTrustingAnotherCa_isRefused_andTheBusinessGetsNothing() throws Exception {
    int port = business(security.serverCredentials(serverTls("server", null)));

    DispatchResult r = send("127.0.0.1:" + port, security.channelCredentials(clientTls(pki.file("other-ca.crt"), null, null)), "d-1");

    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.businessDown()).as("the business cannot have seen it: retried without bound").isTrue();
    assertThat(r.message()).contains("TLS handshake failed");
    assertThat(received).isEmpty();
  }

  @Test
  void aServerCertificateForAnotherName_isRefused() throws Exception {
    int port = business(security.serverCredentials(serverTls("server", null)));
    TlsConfig tls = new TlsConfig(null, null, pki.file("ca.crt"), "business.other.example");
    GrpcDispatcher d = GrpcDispatcher.forTarget("127.0.0.1:" + port, security.channelCredentials(tls), tls.authority());
    open.add(d);

    DispatchResult r = d.dispatch(Delivery.newBuilder().setDeliveryId("d-1").build(), CALL).toCompletableFuture().join();

    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.message()).contains("TLS handshake failed");
    assertThat(received).isEmpty();
  }

  @Test
  void mtls_refusesAClientWithoutCertificate_orWithOneFromAnotherCa_andAcceptsTheRightOne() throws Exception {
    int port = business(security.serverCredentials(serverTls("server", "ca.crt")));
    String target = "127.0.0.1:" + port;

    DispatchResult none = send(target, security.channelCredentials(clientTls(pki.file("ca.crt"), null, null)), "no-cert");
    DispatchResult other = send(target,
        security.channelCredentials(clientTls(pki.file("ca.crt"), pki.file("other-client.crt"), pki.file("other-client.key"))), "other-ca");
    DispatchResult right = send(target,
        security.channelCredentials(clientTls(pki.file("ca.crt"), pki.file("client.crt"), pki.file("client.key"))), "right");

    assertThat(none.kind()).isEqualTo(Kind.RETRY);
    assertThat(other.kind()).isEqualTo(Kind.RETRY);
    assertThat(right.kind()).isEqualTo(Kind.OK);
    assertThat(receivedIds()).containsExactly("right");
  }

  @Test
  void plaintextToATlsPort_fails_andSaysWhy() throws Exception {
    int port = business(security.serverCredentials(serverTls("server", null)));

    DispatchResult r = send("127.0.0.1:" + port, InsecureChannelCredentials.create(), "d-1");

    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.message()).contains("UNAVAILABLE").endsWith("(if the business serves TLS, configure this route's target-tls)");
    assertThat(received).isEmpty();
  }

  @Test
  void aRotatedServerCertificate_isUsedByNewConnectionsWithoutRestart() throws Exception {
    // the server starts with a certificate the client does not trust, then the files are replaced
    Path cert = work.resolve("tls.crt");
    Path key = work.resolve("tls.key");
    Files.copy(pki.file("other-server.crt"), cert);
    Files.copy(pki.file("other-server.key"), key);
    int port = business(security.serverCredentials(new TlsConfig(cert, key, null, null)));
    ChannelCredentials client = security.channelCredentials(clientTls(pki.file("ca.crt"), null, null));

    refusedUntilRotated(port, client, () -> {
      replace(pki.file("server.key"), key);
      replace(pki.file("server.crt"), cert);
    });
  }

  @Test
  void aRotatedCaFile_isTrustedByNewConnectionsWithoutRestart() throws Exception {
    Path ca = work.resolve("ca.crt");
    Files.copy(pki.file("other-ca.crt"), ca);
    int port = business(security.serverCredentials(serverTls("server", null)));
    ChannelCredentials client = security.channelCredentials(clientTls(ca, null, null));

    refusedUntilRotated(port, client, () -> replace(pki.file("ca.crt"), ca));
  }

  private interface Rotation {
    void run() throws IOException;
  }

  /** One dispatcher (one channel): refused before the rotation, served by a new connection after it. */
  private void refusedUntilRotated(int port, ChannelCredentials client, Rotation rotation) throws IOException {
    GrpcDispatcher d = GrpcDispatcher.forTarget("127.0.0.1:" + port, client, null);
    open.add(d);
    assertThat(d.dispatch(Delivery.newBuilder().setDeliveryId("before").build(), CALL).toCompletableFuture().join().kind())
        .isEqualTo(Kind.RETRY);

    rotation.run();

    await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100)).until(() ->
        d.dispatch(Delivery.newBuilder().setDeliveryId("after").build(), CALL).toCompletableFuture().join().kind() == Kind.OK);
    assertThat(receivedIds()).containsExactly("after");
  }

  @Test
  void aUnixSocketBusiness_receivesTheDelivery() throws Exception {
    Path sock = work.resolve("business.sock");
    unixBusiness(sock);

    DispatchResult r = send("unix://" + sock, InsecureChannelCredentials.create(), "over-uds");

    assertThat(r.kind()).isEqualTo(Kind.OK);
    assertThat(receivedIds()).containsExactly("over-uds");
  }

  @Test
  void aUnixSocketNobodyListensOn_isBusinessDown() {
    DispatchResult r = send("unix://" + work.resolve("absent.sock"), InsecureChannelCredentials.create(), "d-1");

    assertThat(r.kind()).isEqualTo(Kind.RETRY);
    assertThat(r.businessDown()).isTrue();
  }

  @Test
  void aStaleSocketFileIsReplaced_butALiveServerIsNot() throws Exception {
    Path sock = work.resolve("server.sock");
    Server live = unixBusiness(sock);

    org.assertj.core.api.Assertions.assertThatThrownBy(() -> UnixServer.bind(sock, security.serverCredentials(null)))
        .isInstanceOf(IOException.class).hasMessageContaining("another server is listening on " + sock);

    live.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    Files.deleteIfExists(sock);
    // a socket file left behind by a process that died: bind a plain JDK socket and drop it unclosed
    java.nio.channels.ServerSocketChannel dead = java.nio.channels.ServerSocketChannel.open(java.net.StandardProtocolFamily.UNIX);
    dead.bind(java.net.UnixDomainSocketAddress.of(sock));
    dead.close(); // the JDK leaves the file
    assertThat(sock).exists();
    unixBusiness(sock);
    assertThat(send("unix://" + sock, InsecureChannelCredentials.create(), "again").kind()).isEqualTo(Kind.OK);
  }

  /** A plaintext business on a Unix socket that records what it is handed. */
  private Server unixBusiness(Path sock) throws IOException {
    UnixServer unix = UnixServer.bind(sock, security.serverCredentials(null));
    Server s = unix.builder().addService(recorder()).build().start();
    open.add(unix);
    open.add(() -> s.shutdownNow().awaitTermination(5, TimeUnit.SECONDS));
    return s;
  }

  /** Replaces a file's content as a rotation would (a new modification time). */
  static void replace(Path from, Path to) throws IOException {
    Path tmp = to.resolveSibling(to.getFileName() + ".new");
    Files.copy(from, tmp, StandardCopyOption.REPLACE_EXISTING);
    Files.setLastModifiedTime(tmp, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() + 1000));
    Files.move(tmp, to, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }
}
