package dev.onceguard.client;

import com.google.rpc.RetryInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;

/**
 * The sidecar refused the call because too many are in flight already ({@code RESOURCE_EXHAUSTED}):
 * nothing was claimed or completed (a refused {@code Complete} leaves its claim token usable). Call
 * again, with the same request, after {@link #retryAfter()}: the delay the sidecar asked for, read
 * from the trailer {@code grpc-retry-pushback-ms} or the status details' {@code google.rpc.RetryInfo}.
 */
public final class SidecarBusyException extends OnceGuardException {
  private static final long serialVersionUID = 1L;
  /** The trailer a gRPC server sets its retry pushback in (gRFC A6). */
  static final Metadata.Key<String> RETRY_PUSHBACK_MS = Metadata.Key.of("grpc-retry-pushback-ms", Metadata.ASCII_STRING_MARSHALLER);

  /** What the sidecar asked for; zero when it gave no delay. */
  private final Duration retryAfter;

  /**
   * Creates the exception.
   *
   * @param cause the {@code RESOURCE_EXHAUSTED} status exception
   */
  public SidecarBusyException(StatusRuntimeException cause) {
    super(cause);
    this.retryAfter = retryAfterOf(cause);
  }

  /** {@return the wait the sidecar asked for before the same call is made again; zero if it named none} */
  public Duration retryAfter() {
    return retryAfter;
  }

  private static Duration retryAfterOf(StatusRuntimeException e) {
    Metadata trailers = Status.trailersFromThrowable(e);
    String pushback = trailers == null ? null : trailers.get(RETRY_PUSHBACK_MS);
    if (pushback != null) {
      try {
        long ms = Long.parseLong(pushback.trim());
        if (ms >= 0) {
          return Duration.ofMillis(ms);
        }
      } catch (NumberFormatException ignored) {
        // a malformed trailer: fall back to the status details
      }
    }
    com.google.rpc.Status status = StatusProto.fromThrowable(e);
    if (status != null) {
      for (com.google.protobuf.Any detail : status.getDetailsList()) {
        if (detail.is(RetryInfo.class)) {
          try {
            com.google.protobuf.Duration d = detail.unpack(RetryInfo.class).getRetryDelay();
            return Duration.ofSeconds(d.getSeconds(), d.getNanos());
          } catch (com.google.protobuf.InvalidProtocolBufferException ignored) {
            return Duration.ZERO;
          }
        }
      }
    }
    return Duration.ZERO;
  }
}
