package dev.onceguard.client.internal;

import dev.onceguard.client.SidecarSecurity;
import io.grpc.CallCredentials;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.CompositeChannelCredentials;
import io.grpc.ConnectivityState;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import io.grpc.util.AdvancedTlsX509KeyManager;
import io.grpc.util.AdvancedTlsX509TrustManager;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Creating and releasing the channels this library owns. */
public final class Channels {
  private static final Logger log = LoggerFactory.getLogger(Channels.class);

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
    return open(target, security, CERTIFICATE_RELOAD);
  }

  /** How often a channel's CA, certificate and key files are checked for a rotation. */
  public static final Duration CERTIFICATE_RELOAD = Duration.ofSeconds(10);

  /**
   * {@link #open(String, SidecarSecurity)}, checking the certificate files every {@code reload}:
   * when one changed, new connections (a reconnect, or a new subchannel) use what it holds now;
   * established connections keep theirs. A file that fails to load at a check is logged as a
   * warning and the previous content stays in use. The checks stop when the channel is shut down.
   */
  static ManagedChannel open(String target, SidecarSecurity security, Duration reload) {
    ChannelCredentials credentials = InsecureChannelCredentials.create();
    List<Reload> reloads = new ArrayList<>();
    if (security.tls()) {
      TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder();
      try {
        if (security.caFile() != null) {
          AdvancedTlsX509TrustManager trust = AdvancedTlsX509TrustManager.newBuilder()
              .setVerification(AdvancedTlsX509TrustManager.Verification.CERTIFICATE_AND_HOST_NAME_VERIFICATION).build();
          File ca = security.caFile().toFile();
          reloads.add(new Reload(List.of(security.caFile()), () -> trust.updateTrustCredentials(ca)));
          tls.trustManager(trust);
        }
        if (security.certFile() != null) {
          AdvancedTlsX509KeyManager key = new AdvancedTlsX509KeyManager();
          File cert = security.certFile().toFile();
          File pkcs8 = security.keyFile().toFile();
          reloads.add(new Reload(List.of(security.certFile(), security.keyFile()), () -> key.updateIdentityCredentials(cert, pkcs8)));
          tls.keyManager(key);
        }
        for (Reload r : reloads) {
          r.load();
        }
      } catch (IOException | GeneralSecurityException | RuntimeException e) {
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
    ManagedChannel channel = b.build();
    if (reloads.isEmpty()) {
      return channel;
    }
    // gRPC's own file refresh of these managers allows no period under a minute
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "onceguard-client-tls-reload");
      t.setDaemon(true);
      return t;
    });
    timer.scheduleWithFixedDelay(() -> reloads.forEach(Reload::ifChanged), reload.toMillis(), reload.toMillis(), TimeUnit.MILLISECONDS);
    return new StoppingChannel(channel, timer::shutdownNow);
  }

  /** Loads a key or trust manager from its files. */
  private interface Loader {
    void load() throws IOException, GeneralSecurityException;
  }

  /**
   * Files and the manager loaded from them, loaded again when a file's modification time or size
   * changed (the sidecar's {@code FileWatch} does the same for its own certificates). A load that
   * fails (a file half written or missing) keeps what was loaded before, is warned about once per
   * state of the files, and is tried again at the next check; a certificate and key changed one
   * after the other are loaded again once the second one lands.
   */
  private static final class Reload {
    private final List<Path> files;
    private final Loader loader;
    private List<String> loaded = List.of();
    private List<String> warned = List.of();

    Reload(List<Path> files, Loader loader) {
      this.files = files;
      this.loader = loader;
    }

    void load() throws IOException, GeneralSecurityException {
      List<String> now = stamps();
      loader.load();
      loaded = now;
    }

    void ifChanged() {
      List<String> now = stamps();
      if (now.equals(loaded)) {
        return;
      }
      try {
        loader.load();
        loaded = now;
        log.info("reloaded the TLS files {} of the channel to the sidecar", files);
      } catch (IOException | GeneralSecurityException | RuntimeException e) {
        if (!now.equals(warned)) {
          warned = now;
          log.warn("cannot reload the TLS files {} of the channel to the sidecar (the previous ones stay in use): {}", files, e.toString());
        }
      }
    }

    /** Each file's modification time and size; a file that cannot be read counts as changed. */
    private List<String> stamps() {
      List<String> s = new ArrayList<>(files.size());
      for (Path f : files) {
        try {
          s.add(Files.getLastModifiedTime(f) + "/" + Files.size(f));
        } catch (IOException e) {
          s.add("unreadable");
        }
      }
      return s;
    }
  }

  /** A channel that also stops its certificate reloads when it is shut down. */
  private static final class StoppingChannel extends ManagedChannel {
    private final ManagedChannel delegate;
    private final Runnable stop;

    StoppingChannel(ManagedChannel delegate, Runnable stop) {
      this.delegate = delegate;
      this.stop = stop;
    }

    @Override
    public ManagedChannel shutdown() {
      delegate.shutdown();
      stop.run();
      return this;
    }

    @Override
    public ManagedChannel shutdownNow() {
      delegate.shutdownNow();
      stop.run();
      return this;
    }

    @Override
    public boolean isShutdown() {
      return delegate.isShutdown();
    }

    @Override
    public boolean isTerminated() {
      return delegate.isTerminated();
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
      return delegate.awaitTermination(timeout, unit);
    }

    @Override
    public <Q, A> ClientCall<Q, A> newCall(MethodDescriptor<Q, A> method, CallOptions options) {
      return delegate.newCall(method, options);
    }

    @Override
    public String authority() {
      return delegate.authority();
    }

    @Override
    public ConnectivityState getState(boolean requestConnection) {
      return delegate.getState(requestConnection);
    }

    @Override
    public void notifyWhenStateChanged(ConnectivityState source, Runnable callback) {
      delegate.notifyWhenStateChanged(source, callback);
    }

    @Override
    public void resetConnectBackoff() {
      delegate.resetConnectBackoff();
    }

    @Override
    public void enterIdle() {
      delegate.enterIdle();
    }

    @Override
    public String toString() {
      return delegate.toString();
    }
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
