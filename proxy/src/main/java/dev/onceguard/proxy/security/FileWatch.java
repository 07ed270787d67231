package dev.onceguard.proxy.security;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a reload when any of some files changed (modification time or size), each time it is run
 * (on {@link GrpcSecurity}'s timer). A reload that fails keeps what was loaded before and is tried
 * again at the next run, so a rotation caught half-way (a new key next to the old certificate)
 * completes once the second file arrives; the warning is logged once per change seen.
 *
 * <p>gRPC's own file-watching {@code AdvancedTls} managers are not used for this: in gRPC 1.85
 * their periodic reload never took a changed file (tested), while their one-shot updates work.
 */
final class FileWatch implements Runnable {
  private static final Logger log = LoggerFactory.getLogger(FileWatch.class);

  /** Loads the files again; throws when they are not usable (the message says why). */
  interface Reload {
    void run() throws IOException, GeneralSecurityException;
  }

  private final String what;
  private final List<Path> files;
  private final Reload reload;
  private List<Object> loaded;
  private List<Object> warned;

  /** @param what the files, for logs (never their content) */
  FileWatch(String what, List<Path> files, Reload reload) {
    this.what = what;
    this.files = List.copyOf(files);
    this.reload = reload;
    this.loaded = stamps();
  }

  @Override
  public synchronized void run() {
    List<Object> now = stamps();
    if (now.equals(loaded)) {
      return;
    }
    try {
      reload.run();
      loaded = now;
      log.info("{} changed: reloaded, new connections use it", what);
    } catch (IOException | GeneralSecurityException | RuntimeException e) {
      if (!now.equals(warned)) {
        warned = now;
        log.warn("{} changed but cannot be used yet; the previous one stays in use: {}", what, e.getMessage());
      }
    }
  }

  /** Each file's modification time and size; a file that cannot be read counts as changed. */
  private List<Object> stamps() {
    List<Object> out = new ArrayList<>();
    for (Path f : files) {
      try {
        out.add(Files.getLastModifiedTime(f));
        out.add(Files.size(f));
      } catch (IOException e) {
        out.add(e.getClass().getName());
      }
    }
    return out;
  }
}
