package dev.onceguard.it.scenario;

import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The sidecar as operators run it: {@code java -jar onceguard.jar run --config FILE}, a separate
 * JVM with its own YAML file. Output goes to {@code target/scenario-logs/<name>.log}. {@link #kill()}
 * is SIGKILL ({@link Process#destroyForcibly()}), {@link #stop} SIGTERM. {@link #close()} kills
 * whatever still runs. Not thread-safe.
 */
final class SidecarProcess implements AutoCloseable {
  static final Path LOGS = Path.of("target", "scenario-logs");

  final String name;
  final int grpcPort;
  final Path log;
  private final Process process;

  private SidecarProcess(String name, int grpcPort, Path log, Process process) {
    this.name = name;
    this.grpcPort = grpcPort;
    this.log = log;
    this.process = process;
  }

  private static Path snapshot;

  /**
   * A private copy of the runnable jar that Failsafe names in {@code -Donceguard.jar}, taken once
   * per test JVM: a rebuild of {@code proxy/target/onceguard.jar} while a sidecar process runs
   * would otherwise pull classes out from under it (NoClassDefFoundError on shutdown).
   */
  static synchronized Path jar() {
    if (snapshot != null) {
      return snapshot;
    }
    String p = System.getProperty("onceguard.jar");
    if (p == null || !Files.isRegularFile(Path.of(p))) {
      throw new IllegalStateException("the sidecar jar is missing (system property onceguard.jar = " + p
          + "): build it first with `mvn -o install -DskipTests`");
    }
    try {
      Path copy = Files.createTempFile("onceguard-it-", ".jar");
      copy.toFile().deleteOnExit();
      Files.copy(Path.of(p), copy, StandardCopyOption.REPLACE_EXISTING);
      snapshot = copy;
      return copy;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot copy " + p, e);
    }
  }

  /** {@code <name>.yaml} in the log folder, holding {@code yaml}. */
  private static Path writeConfig(String name, String yaml) throws IOException {
    Files.createDirectories(LOGS);
    Path config = LOGS.resolve(name + ".yaml");
    Files.writeString(config, yaml);
    return config;
  }

  private static String javaBinary() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  static SidecarProcess start(String name, String yaml, int grpcPort) {
    return start(name, yaml, grpcPort, new String[0]);
  }

  /** As {@link #start(String, String, int)}, with more arguments to {@code run}. */
  static SidecarProcess start(String name, String yaml, int grpcPort, String... runArgs) {
    try {
      Path config = writeConfig(name, yaml);
      Path log = LOGS.resolve(name + ".log");
      String java = javaBinary();
      List<String> cmd = new java.util.ArrayList<>(List.of(java, "-Xmx384m", "-jar", jar().toString(), "run", "--config", config.toString()));
      cmd.addAll(List.of(runArgs));
      Process p = new ProcessBuilder(cmd)
          .redirectErrorStream(true)
          .redirectOutput(log.toFile())
          .start();
      return new SidecarProcess(name, grpcPort, log, p);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start sidecar process " + name, e);
    }
  }

  /**
   * {@code main} of a class on this test JVM's classpath as a process of its own, with {@code args}
   * and then the path of {@code yaml} written to a file ({@link StandbyConsumer}, say).
   */
  static SidecarProcess startMain(String name, String yaml, int grpcPort, Class<?> main, String... args) {
    try {
      Path config = writeConfig(name, yaml);
      Path log = LOGS.resolve(name + ".log");
      // the container image's JVM flags (deploy/Dockerfile)
      List<String> cmd = new java.util.ArrayList<>(List.of(javaBinary(), "-XX:+UseSerialGC", "-Xms16m", "-Xmx384m", "-cp",
          System.getProperty("java.class.path"), main.getName()));
      cmd.addAll(List.of(args));
      cmd.add(config.toString());
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
      return new SidecarProcess(name, grpcPort, log, p);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start process " + name + " (" + main.getName() + ")", e);
    }
  }

  /** What a command of the packaged jar printed (stdout and stderr together) and its exit code. */
  record Outcome(int exitCode, String output) {}

  /**
   * Runs {@code java -jar onceguard.jar <command> --config FILE} with {@code yaml} as the file and
   * waits for it to end (an error after {@code timeout}).
   */
  static Outcome command(String name, String yaml, Duration timeout, String... command) throws InterruptedException {
    try {
      Path config = writeConfig(name, yaml);
      Path log = LOGS.resolve(name + ".log");
      String java = javaBinary();
      List<String> cmd = new java.util.ArrayList<>(List.of(java, "-Xmx256m", "-jar", jar().toString()));
      cmd.addAll(List.of(command));
      cmd.addAll(List.of("--config", config.toString()));
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
      if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        p.destroyForcibly();
        throw new AssertionError(name + ": " + cmd + " still running after " + timeout + "; its output:\n" + Files.readString(log));
      }
      return new Outcome(p.exitValue(), Files.readString(log));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + name, e);
    }
  }

  long pid() {
    return process.pid();
  }

  boolean alive() {
    return process.isAlive();
  }

  /** Until the sidecar's health service says SERVING (every route consumer started). */
  void awaitServing(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new AssertionError(name + " exited with " + process.exitValue() + " before serving; its log:\n" + tail());
      }
      if (health("") == ServingStatus.SERVING) {
        return;
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    throw new AssertionError(name + " not SERVING within " + timeout + "; its log:\n" + tail());
  }

  /** The gRPC health status of {@code service} ({@code ""}: the sidecar; a route name: that route); UNKNOWN if unreachable. */
  ServingStatus health(String service) throws InterruptedException {
    ManagedChannel ch = Grpc.newChannelBuilderForAddress("127.0.0.1", grpcPort, InsecureChannelCredentials.create()).build();
    try {
      return HealthGrpc.newBlockingStub(ch).withDeadlineAfter(1, TimeUnit.SECONDS)
          .check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus();
    } catch (RuntimeException notYet) {
      return ServingStatus.UNKNOWN;
    } finally {
      ch.shutdownNow();
      ch.awaitTermination(2, TimeUnit.SECONDS);
    }
  }

  /** Until the process's output holds {@code line}; fails if it exits first. */
  void awaitOutput(String line, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!log().contains(line)) {
      if (!process.isAlive()) {
        throw new AssertionError(name + " exited with " + process.exitValue() + " before printing '" + line + "'; its log:\n" + tail());
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(name + " did not print '" + line + "' within " + timeout + "; its log:\n" + tail());
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
  }

  /** Writes a line to the process's stdin ({@link StandbyConsumer} joins its group on it). */
  void sendLine() {
    try {
      process.getOutputStream().write('\n');
      process.getOutputStream().flush();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write to " + name, e);
    }
  }

  /** SIGKILL, and wait until the process is gone. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      throw new AssertionError(name + " survived SIGKILL for 30 s");
    }
  }

  /** SIGTERM, without waiting: the process drains, then exits. */
  void signalStop() {
    process.destroy();
  }

  /** SIGTERM, then the exit code once it drained (or an error after {@code timeout}). */
  int stop(Duration timeout) throws InterruptedException {
    process.destroy();
    if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError(name + " did not exit within " + timeout + " of SIGTERM; its log:\n" + tail());
    }
    return process.exitValue();
  }

  /** The process's whole output so far. */
  String log() {
    try {
      return Files.readString(log);
    } catch (IOException e) {
      return "";
    }
  }

  /** The exit code, once the process ended by itself within {@code timeout}. */
  int awaitExit(Duration timeout) throws InterruptedException {
    if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError(name + " still running after " + timeout + "; its log:\n" + tail());
    }
    return process.exitValue();
  }

  /** The last lines of the process's output. */
  String tail() {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      process.destroyForcibly();
      try {
        process.waitFor(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
