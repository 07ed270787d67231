package dev.onceguard.it;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * A private instance of the local cluster stack ({@code scripts/cluster.sh}) for one test: the
 * clusters it asks for, started by the same script a developer runs, in a directory of its own
 * under {@code target/}, stopped and removed on {@link #close}. {@link #kill} and {@link #start}
 * take one node down and bring it back (same ports, same data).
 */
public final class ClusterScript implements AutoCloseable {
  private final Path script;
  private final Path dir;
  private final Map<String, String> env = new HashMap<>();
  /** Environment of every scripts/cluster.sh run, e.g. {@code ONCEGUARD_CLUSTER_KAFKA=3.5}. */
  private final Map<String, String> settings;

  private ClusterScript(Path script, Path dir, Map<String, String> settings) {
    this.script = script;
    this.dir = dir;
    this.settings = settings;
  }

  /**
   * Starts the given components ({@code kafka}, {@code galera}, {@code redis}) and reads their
   * addresses.
   *
   * @throws IllegalStateException with the script's output when it fails
   */
  public static ClusterScript up(String... components) {
    return up(Map.of(), components);
  }

  /**
   * The same with settings of scripts/cluster.sh in its environment, e.g.
   * {@code ONCEGUARD_CLUSTER_KAFKA=3.5} (brokers of Kafka 3.5).
   */
  public static ClusterScript up(Map<String, String> settings, String... components) {
    Path script = findScript();
    // under target/ of the module, not a JUnit @TempDir: that is private to its owner, and the
    // Galera nodes run as the `mysql` user, which must reach their datadirs
    Path dir = Path.of("target", "cluster-" + UUID.randomUUID().toString().substring(0, 8)).toAbsolutePath();
    ClusterScript c = new ClusterScript(script, dir, settings);
    try {
      Files.createDirectories(dir);
      Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
      List<String> args = new ArrayList<>(List.of("up"));
      args.addAll(Arrays.asList(components));
      c.run(180, args.toArray(new String[0]));
      for (String line : Files.readAllLines(dir.resolve("env"), StandardCharsets.UTF_8)) {
        int eq = line.indexOf('=');
        if (!line.startsWith("#") && eq > 0) {
          c.env.put(line.substring(0, eq), line.substring(eq + 1));
        }
      }
      return c;
    } catch (IOException | RuntimeException e) {
      c.close();
      throw e instanceof IOException io ? new UncheckedIOException(io) : (RuntimeException) e;
    }
  }

  /** A value of the cluster's env file, e.g. {@code ONCEGUARD_CLUSTER_MYSQL_PORTS}. */
  public String env(String name) {
    String v = env.get(name);
    if (v == null) {
      throw new IllegalStateException(name + " is not in " + dir.resolve("env") + " (was its component started?): " + env);
    }
    return v;
  }

  /** The comma-separated value of {@code name} as a list. */
  public List<String> list(String name) {
    return List.of(env(name).split(","));
  }

  /** SIGKILL of one node, e.g. {@code galera-2}; returns when it is gone. */
  public void kill(String node) {
    run(30, "kill", node);
  }

  /** Starts a killed or stopped node again and waits until it is back in its cluster. */
  public void start(String node) {
    run(180, "start", node);
  }

  /** SIGSTOP of one node: it stays alive (its connections open) and answers nothing. */
  public void pause(String node) {
    run(30, "pause", node);
  }

  /** SIGCONT of a paused node. */
  public void resume(String node) {
    run(30, "resume", node);
  }

  /** SIGTERM of one node; returns when it has exited. */
  public void stop(String node) {
    run(120, "stop", node);
  }

  /**
   * Starts a component whose nodes are all stopped, e.g. {@code galera}: the Galera cluster is
   * bootstrapped again from the node with the latest commit, the others join it.
   */
  public void restart(String component) {
    run(240, "up", component);
  }

  /** The directory of this instance: the nodes' data dirs and logs (for failure messages). */
  public Path dir() {
    return dir;
  }

  @Override
  public void close() {
    try {
      if (Boolean.getBoolean("cluster.keep-logs")) {
        // for a post-mortem: copy the nodes' logs out before `down` removes the data dirs; the
        // nodes still run and write, so a failed copy must never keep `down` from running
        Path logs = dir.resolveSibling(dir.getFileName() + "-logs");
        try {
          copyLogs(dir, logs);
          System.err.println("[ClusterScript] logs kept in " + logs);
        } catch (IOException | UncheckedIOException e) {
          System.err.println("[ClusterScript] logs only partly kept in " + logs + ": " + e);
        }
      }
      run(120, "down");
      deleteTree(dir);
    } catch (RuntimeException | IOException e) {
      System.err.println("[ClusterScript] cleanup of " + dir + " failed: " + e);
    }
  }

  private static void copyLogs(Path from, Path to) throws IOException {
    try (var files = Files.walk(from)) {
      for (Path f : (Iterable<Path>) files::iterator) {
        String n = f.getFileName().toString();
        if (Files.isRegularFile(f) && (n.endsWith(".log") || n.endsWith(".err") || n.equals("env"))) {
          Path target = to.resolve(from.relativize(f));
          Files.createDirectories(target.getParent());
          try {
            Files.copy(f, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
          } catch (java.nio.file.NoSuchFileException gone) {
            // removed by its node meanwhile (a rolled log segment)
          }
        }
      }
    }
  }

  private String run(int timeoutSeconds, String... args) {
    List<String> cmd = new ArrayList<>(List.of("bash", script.toString()));
    cmd.addAll(Arrays.asList(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.environment().putAll(settings);
    pb.environment().put("ONCEGUARD_CLUSTER_DIR", dir.toString());
    try {
      Path out = Files.createTempFile("cluster-sh", ".log");
      try {
        Process p = pb.redirectOutput(out.toFile()).start();
        boolean done = p.waitFor(timeoutSeconds, TimeUnit.SECONDS);
        if (!done) {
          p.destroyForcibly();
        }
        String text = Files.readString(out, StandardCharsets.UTF_8);
        if (!done || p.exitValue() != 0) {
          throw new IllegalStateException("scripts/cluster.sh " + String.join(" ", args)
              + (done ? " failed with exit code " + p.exitValue() : " did not finish within " + timeoutSeconds + " s") + ":\n" + text);
        }
        return text;
      } finally {
        Files.deleteIfExists(out);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while running scripts/cluster.sh " + String.join(" ", args), e);
    }
  }

  /** scripts/cluster.sh of this checkout: the tests run in a module directory below the root. */
  private static Path findScript() {
    for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
      Path s = d.resolve("scripts").resolve("cluster.sh");
      if (Files.isRegularFile(s)) {
        return s;
      }
    }
    throw new IllegalStateException("scripts/cluster.sh not found above " + Path.of("").toAbsolutePath());
  }

  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (var paths = Files.walk(root)) {
      for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }
}
