package dev.onceguard.proxy.ops;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/**
 * The running build: its version and the git commit it was built from, read from the
 * {@code onceguard-build.properties} resource that Maven fills in when it builds the jar. A value
 * Maven could not fill in (a build outside a git checkout) reads {@link #UNKNOWN}.
 */
public record BuildInfo(String version, String commit) {
  public static final String UNKNOWN = "unknown";
  static final String RESOURCE = "/onceguard-build.properties";

  /** The build of these classes. */
  public static BuildInfo current() {
    Properties p = new Properties();
    try (InputStream in = BuildInfo.class.getResourceAsStream(RESOURCE)) {
      if (in != null) {
        p.load(in);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + RESOURCE, e);
    }
    return of(p);
  }

  /** From the resource's properties: {@code version}, {@code commit}, and {@code dirty=true} for uncommitted changes. */
  static BuildInfo of(Properties p) {
    String commit = value(p, "commit");
    if (!commit.equals(UNKNOWN) && "true".equals(p.getProperty("dirty"))) {
      commit += "-dirty";
    }
    return new BuildInfo(value(p, "version"), commit);
  }

  private static String value(Properties p, String key) {
    String v = p.getProperty(key, "").trim();
    // "${...}": the build did not know it
    return v.isEmpty() || v.startsWith("${") ? UNKNOWN : v;
  }

  /** What {@code --version} prints, e.g. {@code onceguard 0.1.0 (commit 1a2b3c4d5e6f)}. */
  public String text() {
    return "onceguard " + version + " (commit " + commit + ")";
  }
}
