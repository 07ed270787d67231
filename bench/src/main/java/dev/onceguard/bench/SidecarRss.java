package dev.onceguard.bench;

import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Resident memory of the sidecar as the container image runs it ({@code deploy/Dockerfile}'s JVM
 * flags: the serial collector, a small initial heap, at most 384 MB, the native heap trimmed every
 * 5 s): VmRSS from {@code /proc/<pid>/status} once it is SERVING and has sat idle for 10 s, and the largest
 * VmRSS sampled every 50 ms while it works off a guarded backlog (state-machine route).
 */
final class SidecarRss {
  static final List<String> JVM_FLAGS = List.of("-XX:+UseSerialGC", "-Xms16m", "-Xmx384m", "-XX:TrimNativeHeapInterval=5000");

  /**
   * The packaged sidecar's JVM flags: {@link #JVM_FLAGS}, or the space-separated flags of the
   * system property {@code bench.sidecar-jvm-flags} (to compare collectors and heap sizes).
   */
  static List<String> jvmFlags() {
    String v = System.getProperty("bench.sidecar-jvm-flags", "").trim();
    return v.isEmpty() ? JVM_FLAGS : List.of(v.split("\\s+"));
  }

  /** Two native-heap trim intervals (-XX:TrimNativeHeapInterval=5000) after SERVING. */
  private static final Duration SETTLE = Duration.ofSeconds(10);

  record Result(double idleMb, double loadMb) {}

  private SidecarRss() {}

  /**
   * @param yaml the sidecar's configuration, listening on {@code grpcPort}
   * @param load sends the backlog, waits until the business saw all of it, returns when done
   */
  static Result measure(Path jar, Path workDir, String yaml, int grpcPort, LoadRun load) throws Exception {
    try (Running r = start(jar, workDir, "rss-sidecar", yaml, grpcPort)) {
      Process p = r.process();
      Thread.sleep(SETTLE.toMillis());
      double idle = rssMb(p.pid());
      double[] peak = {idle};
      Thread sampler = new Thread(() -> {
        while (!Thread.currentThread().isInterrupted() && p.isAlive()) {
          peak[0] = Math.max(peak[0], rssMb(p.pid()));
          try {
            Thread.sleep(50);
          } catch (InterruptedException e) {
            return;
          }
        }
      }, "rss-sampler");
      sampler.start();
      try {
        load.run();
        Thread.sleep(500); // the last confirms
      } finally {
        sampler.interrupt();
        sampler.join();
      }
      return new Result(idle, Math.max(peak[0], rssMb(p.pid())));
    }
  }

  /** The packaged sidecar, running with {@link #jvmFlags()}; closing it stops it (SIGTERM, then SIGKILL after 30 s). */
  record Running(Process process, Path log) implements AutoCloseable {
    @Override
    public void close() throws InterruptedException {
      process.destroy();
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * Starts the packaged sidecar with {@code yaml} (written to {@code workDir/<name>.yaml}, its output
   * to {@code <name>.log}) and returns once its gRPC health service on {@code grpcPort} is SERVING.
   */
  static Running start(Path jar, Path workDir, String name, String yaml, int grpcPort) throws Exception {
    Files.createDirectories(workDir);
    Path config = workDir.resolve(name + ".yaml");
    Files.writeString(config, yaml);
    Path log = workDir.resolve(name + ".log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd = new java.util.ArrayList<>(List.of(java));
    cmd.addAll(jvmFlags());
    cmd.addAll(List.of("-jar", jar.toString(), "run", "--config", config.toString()));
    Running r = new Running(new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start(), log);
    try {
      awaitServing(r.process(), grpcPort, Duration.ofSeconds(60), log);
      return r;
    } catch (Exception | Error e) {
      r.close();
      throw e;
    }
  }

  @FunctionalInterface
  interface LoadRun {
    void run() throws Exception;
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  private static double rssMb(long pid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
        if (line.startsWith("VmRSS:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0; // kB
        }
      }
    } catch (IOException | RuntimeException gone) {
      // the process ended
    }
    return 0;
  }

  private static void awaitServing(Process p, int port, Duration timeout, Path log) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    ManagedChannel ch = Grpc.newChannelBuilderForAddress("127.0.0.1", port, InsecureChannelCredentials.create()).build();
    try {
      while (System.nanoTime() < deadline) {
        if (!p.isAlive()) {
          throw new IllegalStateException("the sidecar exited with " + p.exitValue() + " before serving; see " + log);
        }
        try {
          if (HealthGrpc.newBlockingStub(ch).withDeadlineAfter(1, TimeUnit.SECONDS)
              .check(HealthCheckRequest.newBuilder().setService("").build()).getStatus() == ServingStatus.SERVING) {
            return;
          }
        } catch (RuntimeException notYet) {
          // not listening yet
        }
        Thread.sleep(200);
      }
      throw new IllegalStateException("the sidecar was not SERVING within " + timeout + "; see " + log);
    } finally {
      ch.shutdownNow();
      ch.awaitTermination(2, TimeUnit.SECONDS);
    }
  }
}
