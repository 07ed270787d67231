package dev.onceguard.bench.seed;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * What the database-side microbenchmarks ({@link SeedBench}, {@code contention.ContentionBench})
 * share as command-line programs: {@code --key value} arguments, the machine's load average for
 * their output, and the java binary that starts their worker JVMs.
 */
public final class BenchArgs {
  private BenchArgs() {}

  /**
   * {@code --key value} pairs in order; a key in {@code flags} takes no value and maps to
   * {@code "true"}.
   *
   * @throws IllegalArgumentException for an argument without {@code --} or a key without its value
   */
  public static Map<String, String> parse(String[] args, Set<String> flags) {
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String k = args[i];
      if (!k.startsWith("--")) {
        throw new IllegalArgumentException("unexpected argument " + k);
      }
      k = k.substring(2);
      if (flags.contains(k)) {
        m.put(k, "true");
      } else if (i + 1 < args.length) {
        m.put(k, args[++i]);
      } else {
        throw new IllegalArgumentException("--" + k + " needs a value");
      }
    }
    return m;
  }

  /** The 1, 5 and 15 minute load averages, or {@code ?} where /proc/loadavg cannot be read. */
  public static String loadavg() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException e) {
      return "?";
    }
  }

  /** The java binary of this JVM, for worker JVMs of the same release. */
  public static String javaBin() {
    return ProcessHandle.current().info().command()
        .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
  }
}
