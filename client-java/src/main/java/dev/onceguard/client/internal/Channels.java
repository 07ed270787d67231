package dev.onceguard.client.internal;

import dev.onceguard.client.SidecarSecurity;
import io.grpc.CallCredentials;
import io.grpc.ChannelCredentials;
import io.grpc.CompositeChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/** Creating and releasing the channels this library owns. */
public final class Channels {
  private Channels() {}

  /**
   * Opens a plaintext channel to a sidecar. Plaintext because the sidecar runs in the same pod;
   * callers who need TLS or other options build their own channel and pass it in.
   *
   * @param target gRPC target, e.g. {@code 127.0.0.1:7700}
   * @return a channel the caller owns and must {@link #shutdown shut down}
   */
  public static ManagedChannel open(String target) {
    return open(target, SidecarSecurity.plaintext());
  }

  /**
   * Opens a channel to a sidecar, secured as {@code security} says: TLS credentials and, when a
   * token is given, call credentials that send it on every call of the channel.
   *
   * @param target gRPC target, e.g. {@code localhost:7700} or {@code unix:///run/onceguard/grpc.sock}
   * @return a channel the caller owns and must {@link #shutdown shut down}
   * @throws IllegalArgumentException when a certificate, key or token file cannot be read (naming it)
   */
  public static ManagedChannel open(String target, SidecarSecurity security) {
    ChannelCredentials credentials = InsecureChannelCredentials.create();
    if (security.tls()) {
      TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder();
      try {
        if (security.caFile() != null) {
          tls.trustManager(security.caFile().toFile());
        }
        if (security.certFile() != null) {
          tls.keyManager(security.certFile().toFile(), security.keyFile().toFile());
        }
      } catch (IOException | RuntimeException e) {
        throw new IllegalArgumentException("cannot read the TLS files of " + security + ": " + e.getMessage(), e);
      }
      credentials = tls.build();
    }
    CallCredentials token = security.tokenFile() != null ? BearerToken.fromFile(security.tokenFile())
        : security.token() != null ? BearerToken.of(security.token()) : null;
    if (token != null) {
      credentials = CompositeChannelCredentials.create(credentials, token);
    }
    ManagedChannelBuilder<?> b = Grpc.newChannelBuilder(target, credentials);
    if (security.authority() != null) {
      b.overrideAuthority(security.authority());
    }
    return b.build();
  }

  /**
   * Releases a channel: {@code shutdown()}, wait up to {@code timeout}, then
   * {@code shutdownNow()}. Restores the interrupt flag if interrupted while waiting.
   *
   * @param channel channel to release
   * @param timeout how long to wait for calls in flight
   */
  public static void shutdown(ManagedChannel channel, Duration timeout) {
    channel.shutdown();
    try {
      if (!channel.awaitTermination(Math.max(0, timeout.toNanos()), TimeUnit.NANOSECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }
}
