package dev.onceguard.proxy.config;

import java.nio.file.Path;

/**
 * Addresses of Unix domain sockets, written {@code unix:///absolute/path} (gRPC's own form) where
 * a {@code host:port} may stand: {@code sidecar.grpc-listen} and a route's {@code target}.
 */
public final class UnixSocket {
  /** The prefix of a Unix socket address. */
  public static final String PREFIX = "unix://";
  /** sun_path holds 108 bytes, the terminating NUL included. */
  static final int MAX_PATH_BYTES = 107;

  private UnixSocket() {}

  /** True when {@code address} names a Unix socket rather than {@code host:port}. */
  public static boolean is(String address) {
    return address != null && address.startsWith("unix:");
  }

  /** The socket's path; only for an address {@link #is} accepted and {@link #problem} passed. */
  public static Path pathOf(String address) {
    return Path.of(address.substring(PREFIX.length()));
  }

  /** Why {@code address} is not a usable {@code unix:///absolute/path}, or {@code null}. */
  static String problem(String address) {
    if (!address.startsWith(PREFIX + "/")) {
      return "'" + address + "' is not unix:///absolute/path";
    }
    String path = address.substring(PREFIX.length());
    if (path.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > MAX_PATH_BYTES) {
      return "'" + address + "': the socket path is longer than " + MAX_PATH_BYTES + " bytes, the limit of Unix sockets";
    }
    return null;
  }
}
