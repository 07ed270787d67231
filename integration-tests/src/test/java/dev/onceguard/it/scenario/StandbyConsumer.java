package dev.onceguard.it.scenario;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.time.Clock;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * One consumer-group instance as a process of its own, which starts up (JVM, and for the guard its
 * MySQL pool, Redis client and owner row) and then waits for a line on stdin before it joins the
 * group: so that a replacement or a new instance joins the moment the test wants, however long a
 * JVM takes to start on a loaded machine. {@code StandbyConsumer plain|guarded CONFIG_FILE}:
 * <ul>
 *   <li>{@code plain}: the sidecar's pipeline with {@link ProcessorFactory#forwarding()}, the
 *       benchmark's {@code baseline}: poll, call the business, commit a partition's offsets once the
 *       records before them were answered (every {@code sidecar.commit-interval}, on revocation and at
 *       shutdown);
 *   <li>{@code guarded}: {@link GuardRuntime} and {@link Sidecar}, wired as {@code onceguard run}
 *       wires them.
 * </ul>
 * Prints {@link #READY} once started up and waiting; SIGTERM drains and exits. Started by
 * {@link InstanceGroup}.
 */
final class StandbyConsumer {
  /** The line printed once the process waits for its start. */
  static final String READY = "standby: ready, joining the group on a line from stdin";

  private StandbyConsumer() {}

  public static void main(String[] args) throws Exception {
    boolean guarded = switch (args[0]) {
      case "guarded" -> true;
      case "plain" -> false;
      default -> throw new IllegalArgumentException("plain or guarded, not " + args[0]);
    };
    SidecarConfig cfg = new ConfigReader(Map.of()).parse(Files.readString(Path.of(args[1])), args[1]);
    GuardRuntime runtime = guarded ? new GuardRuntime(cfg, Clock.SYSTEM) : null;
    Sidecar sidecar = runtime == null ? new Sidecar(cfg, ProcessorFactory.forwarding())
        : new Sidecar(cfg, runtime.processors(VerdictListener.NONE), runtime.services());
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      try {
        sidecar.close();
      } finally {
        if (runtime != null) {
          runtime.close();
        }
        stopped.countDown();
      }
    }, "standby-shutdown"));
    System.out.println(READY);
    System.out.flush();
    if (new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine() == null) {
      System.exit(0); // the test went away before starting it
    }
    sidecar.start();
    stopped.await();
  }
}
