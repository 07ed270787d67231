package dev.onceguard.proxy.security;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.onceguard.proxy.config.TlsConfig;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link ApiAuth} on a real Netty server, wired as the sidecar wires it: an intercepted service
 * next to an open health service. What the service received decides.
 */
class ApiAuthTest {
  @TempDir
  static Path pkiDir;
  private static TestPki pki;

  @TempDir
  Path work;

  private final List<String> received = new CopyOnWriteArrayList<>();
  private final GrpcSecurity security = new GrpcSecurity(Duration.ofMillis(100));
  private Server server;
  private ManagedChannel channel;

  @BeforeAll
  static void certificates() throws Exception {
    pki = TestPki.create(pkiDir);
  }

  @AfterEach
  void close() throws Exception {
    if (channel != null) {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    if (server != null) {
      server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    security.close();
  }

  private int start(TlsConfig tls, ApiAuth auth) throws Exception {
    HealthStatusManager health = new HealthStatusManager();
    server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0), security.serverCredentials(tls))
        .addService(health.getHealthService())
        .addService(ServerInterceptors.intercept(new MessageHandlerGrpc.MessageHandlerImplBase() {
          @Override
          public void handle(Delivery request, StreamObserver<HandleResult> out) {
            received.add(request.getDeliveryId());
            out.onNext(HandleResult.newBuilder().setOutcome(HandleResult.Outcome.OK).build());
            out.onCompleted();
          }
        }, auth))
        .build().start();
    return server.getPort();
  }

  private Status call(ChannelCredentials credentials, int port, String authorization, String id) {
    if (channel != null) {
      channel.shutdownNow();
    }
    channel = Grpc.newChannelBuilderForAddress("localhost", port, credentials).build();
    Metadata headers = new Metadata();
    if (authorization != null) {
      headers.put(ApiAuth.AUTHORIZATION, authorization);
    }
    try {
      MessageHandlerGrpc.newBlockingStub(channel).withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers))
          .withDeadlineAfter(5, TimeUnit.SECONDS).handle(Delivery.newBuilder().setDeliveryId(id).build());
      return Status.OK;
    } catch (StatusRuntimeException e) {
      return e.getStatus();
    }
  }

  private Path tokenFile(String token) throws Exception {
    Path f = work.resolve("token");
    Files.writeString(f, token + "\n");
    return f;
  }

  @Test
  void token_missingOrWrong_isUnauthenticated_rightIsServed_andHealthStaysOpen() throws Exception {
    int port = start(null, new ApiAuth(security.token(tokenFile("s3cret-token")), List.of()));
    ChannelCredentials plain = security.channelCredentials(null);

    Status missing = call(plain, port, null, "missing");
    Status wrong = call(plain, port, "Bearer s3cret-tokem", "wrong");
    Status longer = call(plain, port, "Bearer s3cret-token-and-more", "longer");
    Status notBearer = call(plain, port, "s3cret-token", "not-bearer");
    Status right = call(plain, port, "Bearer s3cret-token", "right");

    assertThat(List.of(missing.getCode(), wrong.getCode(), longer.getCode(), notBearer.getCode()))
        .containsOnly(Status.Code.UNAUTHENTICATED);
    assertThat(missing.getDescription()).contains("authorization: Bearer");
    assertThat(wrong.getDescription()).isEqualTo("wrong bearer token").doesNotContain("s3cret");
    assertThat(right.getCode()).isEqualTo(Status.Code.OK);
    assertThat(received).containsExactly("right");
    assertThat(HealthGrpc.newBlockingStub(channel).check(HealthCheckRequest.getDefaultInstance()).getStatus())
        .as("health without a token").isEqualTo(ServingStatus.SERVING);
  }

  @Test
  void aChangedTokenFile_isUsedWithoutRestart() throws Exception {
    Path file = tokenFile("first-token");
    int port = start(null, new ApiAuth(security.token(file), List.of()));
    ChannelCredentials plain = security.channelCredentials(null);
    assertThat(call(plain, port, "Bearer first-token", "first").getCode()).isEqualTo(Status.Code.OK);

    Files.writeString(file, "second-token-longer\n");

    await().atMost(Duration.ofSeconds(10)).until(() -> call(plain, port, "Bearer second-token-longer", "second").isOk());
    assertThat(call(plain, port, "Bearer first-token", "first-again").getCode()).isEqualTo(Status.Code.UNAUTHENTICATED);
    assertThat(received).containsExactly("first", "second");
  }

  @Test
  void allowedClients_acceptOnlyCertificatesWithAListedName() throws Exception {
    TlsConfig serverTls = new TlsConfig(pki.file("server.crt"), pki.file("server.key"), pki.file("ca.crt"), null);
    ChannelCredentials client = security.channelCredentials(
        new TlsConfig(pki.file("client.crt"), pki.file("client.key"), pki.file("ca.crt"), null));

    int allowed = start(serverTls, new ApiAuth(null, List.of("guard-client")));
    assertThat(call(client, allowed, null, "allowed").getCode()).isEqualTo(Status.Code.OK);
    server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);

    int other = start(serverTls, new ApiAuth(null, List.of("billing")));
    Status refused = call(client, other, null, "refused");
    assertThat(refused.getCode()).isEqualTo(Status.Code.UNAUTHENTICATED);
    assertThat(refused.getDescription()).contains("guard-client").contains("sidecar.auth.allowed-clients");
    assertThat(received).containsExactly("allowed");
  }

  @Test
  void anEmptyTokenFile_failsAtCreation() throws Exception {
    Path f = work.resolve("empty");
    Files.writeString(f, "  \n");
    assertThatThrownBy(() -> security.token(f)).hasMessageContaining(f.toString()).hasMessageContaining("empty");
  }
}
