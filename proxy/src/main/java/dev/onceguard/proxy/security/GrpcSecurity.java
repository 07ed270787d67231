package dev.onceguard.proxy.security;

import dev.onceguard.proxy.config.PemFiles;
import dev.onceguard.proxy.config.TlsConfig;
import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.InsecureServerCredentials;
import io.grpc.ServerCredentials;
import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import io.grpc.util.AdvancedTlsX509KeyManager;
import io.grpc.util.AdvancedTlsX509TrustManager;
import io.grpc.util.AdvancedTlsX509TrustManager.Verification;
import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Builds gRPC credentials from {@link TlsConfig}s and keeps their files current: the key and
 * trust managers are gRPC's {@code AdvancedTls} ones, whose files one timer thread checks every
 * reload interval ({@link FileWatch}) and loads again when they changed. New handshakes use the
 * new certificate; established connections keep theirs. Files that fail to load at a reload (a
 * key that does not match its certificate yet) are logged and the previous credentials stay in
 * use; at creation they throw.
 *
 * <p>Also watches {@link TokenFile}s on the same timer. Threading: any thread. Ownership: owns the
 * timer; {@link #close()} stops all watching (credentials already built keep their last files).
 */
public final class GrpcSecurity implements AutoCloseable {
  private final Duration reloadInterval;
  private final List<Closeable> watches = new ArrayList<>();
  private ScheduledExecutorService timer;

  public GrpcSecurity(Duration reloadInterval) {
    this.reloadInterval = reloadInterval;
  }

  /**
   * Server credentials: plaintext without {@code tls}; else TLS with the certificate chain and
   * key, requiring a client certificate signed by {@link TlsConfig#caFile()} when that is set.
   *
   * @throws IOException if a file cannot be read or parsed (the message names it)
   */
  public synchronized ServerCredentials serverCredentials(TlsConfig tls) throws IOException {
    if (tls == null) {
      return InsecureServerCredentials.create();
    }
    TlsServerCredentials.Builder b = TlsServerCredentials.newBuilder().keyManager(keyManager(tls));
    if (tls.caFile() != null) {
      // the client's name is not checked against anything here: ApiAuth does that when configured
      b.trustManager(trustManager(tls.caFile(), Verification.CERTIFICATE_ONLY_VERIFICATION))
          .clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
    }
    return b.build();
  }

  /**
   * Channel credentials: plaintext without {@code tls}; else TLS trusting {@link TlsConfig#caFile()}
   * (or the JVM's default trust store), checking the server's name, and presenting the client
   * certificate when one is set.
   *
   * @throws IOException if a file cannot be read or parsed (the message names it)
   */
  public synchronized ChannelCredentials channelCredentials(TlsConfig tls) throws IOException {
    if (tls == null) {
      return InsecureChannelCredentials.create();
    }
    TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
    if (tls.caFile() != null) {
      b.trustManager(trustManager(tls.caFile(), Verification.CERTIFICATE_AND_HOST_NAME_VERIFICATION));
    } else {
      try {
        AdvancedTlsX509TrustManager system = AdvancedTlsX509TrustManager.newBuilder()
            .setVerification(Verification.CERTIFICATE_AND_HOST_NAME_VERIFICATION).build();
        system.useSystemDefaultTrustCerts();
        b.trustManager(system);
      } catch (GeneralSecurityException e) {
        throw new IOException("cannot load the JVM's default trust store: " + e.getMessage(), e);
      }
    }
    if (tls.certFile() != null) {
      b.keyManager(keyManager(tls));
    }
    return b.build();
  }

  /** A token file, read now and again whenever it changes. */
  public synchronized TokenFile token(Path file) throws IOException {
    TokenFile token = new TokenFile(file);
    watch(new FileWatch("bearer token file " + file, List.of(file), token::load));
    return token;
  }

  private AdvancedTlsX509KeyManager keyManager(TlsConfig tls) throws IOException {
    AdvancedTlsX509KeyManager km = new AdvancedTlsX509KeyManager();
    FileWatch.Reload load = () -> {
      // never serve a half-rotated pair: the previous one stays until both files match
      String problem = PemFiles.keyProblem(tls.keyFile(), tls.certFile());
      if (problem != null) {
        throw new GeneralSecurityException(problem);
      }
      km.updateIdentityCredentials(tls.certFile().toFile(), tls.keyFile().toFile());
    };
    try {
      load.run();
    } catch (GeneralSecurityException | RuntimeException e) {
      throw new IOException("cannot load certificate " + tls.certFile() + " with key " + tls.keyFile() + ": " + e.getMessage(), e);
    }
    watch(new FileWatch("certificate " + tls.certFile() + " and key " + tls.keyFile(), List.of(tls.certFile(), tls.keyFile()), load));
    return km;
  }

  private AdvancedTlsX509TrustManager trustManager(Path caFile, Verification verification) throws IOException {
    try {
      AdvancedTlsX509TrustManager tm = AdvancedTlsX509TrustManager.newBuilder().setVerification(verification).build();
      tm.updateTrustCredentials(caFile.toFile());
      watch(new FileWatch("CA file " + caFile, List.of(caFile), () -> tm.updateTrustCredentials(caFile.toFile())));
      return tm;
    } catch (GeneralSecurityException | RuntimeException e) {
      throw new IOException("cannot load CA certificates " + caFile + ": " + e.getMessage(), e);
    }
  }

  private void watch(FileWatch w) {
    ScheduledFuture<?> f = timer().scheduleWithFixedDelay(w, reloadInterval.toMillis(), reloadInterval.toMillis(), TimeUnit.MILLISECONDS);
    watches.add(() -> f.cancel(false));
  }

  private ScheduledExecutorService timer() {
    if (timer == null) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "onceguard-tls-reload");
        t.setDaemon(true);
        return t;
      });
    }
    return timer;
  }

  @Override
  public synchronized void close() {
    for (Closeable w : watches) {
      try {
        w.close();
      } catch (IOException e) {
        // nothing to release beyond the timer task
      }
    }
    watches.clear();
    if (timer != null) {
      timer.shutdownNow();
    }
  }
}
