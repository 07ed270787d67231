package dev.onceguard.client.internal;

import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
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
    return Grpc.newChannelBuilder(target, InsecureChannelCredentials.create()).build();
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
