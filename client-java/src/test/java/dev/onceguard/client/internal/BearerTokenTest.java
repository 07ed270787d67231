package dev.onceguard.client.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.client.OnceGuardConsumerConfig;
import dev.onceguard.client.SidecarSecurity;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.StreamObserver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The token the client sends (seen by a real in-process server), and the consumer's TLS keys. */
class BearerTokenTest {
  private static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  @TempDir
  Path dir;

  private final List<String> seen = new CopyOnWriteArrayList<>();
  private Server server;
  private ManagedChannel channel;

  @AfterEach
  void close() {
    if (channel != null) {
      channel.shutdownNow();
    }
    if (server != null) {
      server.shutdownNow();
    }
  }

  private MessageHandlerGrpc.MessageHandlerBlockingStub stub() throws Exception {
    String name = InProcessServerBuilder.generateName();
    ServerInterceptor recordHeader = new ServerInterceptor() {
      @Override
      public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers, ServerCallHandler<Q, A> next) {
        seen.add(String.valueOf(headers.get(AUTHORIZATION)));
        return next.startCall(call, headers);
      }
    };
    server = InProcessServerBuilder.forName(name).directExecutor().addService(ServerInterceptors.intercept(
        new MessageHandlerGrpc.MessageHandlerImplBase() {
          @Override
          public void handle(Delivery request, StreamObserver<HandleResult> out) {
            out.onNext(HandleResult.getDefaultInstance());
            out.onCompleted();
          }
        }, recordHeader)).build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
    return MessageHandlerGrpc.newBlockingStub(channel);
  }

  @Test
  void aTokenFile_isSentAsBearer_andReadAgainWhenItChanges() throws Exception {
    Path file = dir.resolve("token");
    Files.writeString(file, "first\n");
    MessageHandlerGrpc.MessageHandlerBlockingStub stub = stub().withCallCredentials(BearerToken.fromFile(file));

    stub.handle(Delivery.getDefaultInstance());
    Files.writeString(file, "second");
    Files.setLastModifiedTime(file, FileTime.fromMillis(System.currentTimeMillis() + 2000));
    stub.handle(Delivery.getDefaultInstance());

    assertThat(seen).containsExactly("Bearer first", "Bearer second");
  }

  @Test
  void aTokenFileThatDisappears_failsTheCallUnauthenticated_namingTheFile() throws Exception {
    Path file = dir.resolve("token");
    Files.writeString(file, "first");
    MessageHandlerGrpc.MessageHandlerBlockingStub stub = stub().withCallCredentials(BearerToken.fromFile(file));
    Files.delete(file);

    assertThatThrownBy(() -> stub.handle(Delivery.getDefaultInstance())).isInstanceOf(StatusRuntimeException.class)
        .satisfies(e -> assertThat(((StatusRuntimeException) e).getStatus().getCode()).isEqualTo(Status.Code.UNAUTHENTICATED))
        .hasMessageContaining(file.toString());
    assertThat(seen).isEmpty();
  }

  @Test
  void aMissingTokenFile_failsAtCreation() {
    assertThatThrownBy(() -> BearerToken.fromFile(dir.resolve("absent"))).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("bearer token file " + dir.resolve("absent") + " does not exist");
  }

  private static Map<String, Object> consumer(String... keyValues) {
    Map<String, Object> m = new HashMap<>(Map.of(OnceGuardConsumerConfig.TARGET_CONFIG, "localhost:7700",
        OnceGuardConsumerConfig.ROUTE_CONFIG, "r"));
    for (int i = 0; i < keyValues.length; i += 2) {
      m.put(keyValues[i], keyValues[i + 1]);
    }
    return m;
  }

  @Test
  void consumerKeys_becomeTheChannelsSecurity() {
    assertThat(ConsumerSettings.parse(consumer(), false).security()).isEqualTo(SidecarSecurity.plaintext());
    assertThat(ConsumerSettings.parse(consumer(OnceGuardConsumerConfig.TLS_CA_FILE_CONFIG, "/ca.crt",
            OnceGuardConsumerConfig.TOKEN_FILE_CONFIG, "/token"), false).security())
        .isEqualTo(SidecarSecurity.plaintext().withTls(Path.of("/ca.crt")).withTokenFile(Path.of("/token")));
    assertThat(ConsumerSettings.parse(consumer(OnceGuardConsumerConfig.TLS_ENABLED_CONFIG, "true"), false).security().tls()).isTrue();

    assertThatThrownBy(() -> ConsumerSettings.parse(consumer(OnceGuardConsumerConfig.TLS_CERT_FILE_CONFIG, "/c.crt"), false))
        .isInstanceOf(ConfigException.class).hasMessageContaining(OnceGuardConsumerConfig.TLS_KEY_FILE_CONFIG);
    assertThatThrownBy(() -> ConsumerSettings.parse(consumer(OnceGuardConsumerConfig.TLS_AUTHORITY_CONFIG, "x"), false))
        .isInstanceOf(ConfigException.class).hasMessageContaining("only applies with TLS");
  }

  @Test
  void sidecarSecurity_neverPrintsTheToken() {
    assertThat(SidecarSecurity.plaintext().withToken("s3cret").toString()).doesNotContain("s3cret").contains("token=(set)");
  }
}
