package dev.onceguard.it.scenario;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * A plain at-least-once consumer as a process of its own: the sidecar's pipeline with
 * {@link ProcessorFactory#forwarding()} instead of the guard, the benchmark's {@code baseline}. It
 * polls, calls the business for every record and commits a partition's offsets once the records
 * before them were answered (every {@code sidecar.commit-interval}, and on revocation and
 * shutdown). Started by {@link SidecarProcess#startMain}: {@code PlainConsumer CONFIG_FILE}, the
 * sidecar's YAML; SIGTERM drains and exits.
 */
final class PlainConsumer {
  private PlainConsumer() {}

  public static void main(String[] args) throws Exception {
    SidecarConfig cfg = new ConfigReader(Map.of()).parse(Files.readString(Path.of(args[0])), args[0]);
    Sidecar sidecar = new Sidecar(cfg, ProcessorFactory.forwarding());
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      sidecar.close();
      stopped.countDown();
    }, "plain-consumer-shutdown"));
    sidecar.start();
    stopped.await();
  }
}
