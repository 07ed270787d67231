package dev.onceguard.proxy.security;

import io.grpc.ServerCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC server on a Unix domain socket, on grpc-netty's epoll transport (Linux). Owns the event
 * loops, which {@link #close()} releases after the server was shut down.
 */
public final class UnixServer implements AutoCloseable {
  private final EventLoopGroup loops;
  private final NettyServerBuilder builder;

  private UnixServer(Path path, ServerCredentials credentials) {
    this.loops = new MultiThreadIoEventLoopGroup(0, EpollIoHandler.newFactory());
    this.builder = NettyServerBuilder.forAddress(new DomainSocketAddress(path.toString()), credentials)
        .channelType(EpollServerDomainSocketChannel.class)
        .bossEventLoopGroup(loops)
        .workerEventLoopGroup(loops);
  }

  /**
   * Prepares to listen on {@code path}. A socket file left by a process that died is removed
   * first; one that a live server answers on is not (binding then fails, naming the path).
   *
   * @throws IOException if epoll is not available here, or {@code path} is taken by a live server
   *     or by something that is not a socket
   */
  public static UnixServer bind(Path path, ServerCredentials credentials) throws IOException {
    if (!Epoll.isAvailable()) {
      throw new IOException("Unix domain sockets need grpc-netty's epoll transport (Linux x86_64 or aarch64): "
          + Epoll.unavailabilityCause());
    }
    removeStale(path);
    return new UnixServer(path, credentials);
  }

  /** The server builder bound to the socket and the event loops; add services and build it. */
  public NettyServerBuilder builder() {
    return builder;
  }

  private static void removeStale(Path path) throws IOException {
    if (!Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    if (!Files.readAttributes(path, java.nio.file.attribute.BasicFileAttributes.class, java.nio.file.LinkOption.NOFOLLOW_LINKS).isOther()) {
      throw new IOException(path + " exists and is not a socket; not removing it");
    }
    try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
      probe.connect(UnixDomainSocketAddress.of(path));
    } catch (IOException nobodyListens) {
      Files.deleteIfExists(path);
      return;
    }
    throw new IOException("another server is listening on " + path);
  }

  /**
   * Lets the socket file's group connect too ({@code rw-rw----}): under the usual umask only its
   * owner could, and a business container often runs as another user of a shared group
   * (Kubernetes' {@code fsGroup} on the shared volume). Others still cannot.
   */
  public void openToGroup(Path path) throws IOException {
    Files.setPosixFilePermissions(path, java.nio.file.attribute.PosixFilePermissions.fromString("rw-rw----"));
  }

  /** Releases the event loops (the server must be shut down first). */
  @Override
  public void close() {
    loops.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
  }
}
