package dev.onceguard.it.scenario;

import dev.onceguard.it.RecordingBusiness;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The instances of one consumer group, each a process of its own (so that kill -9 is real): the
 * guarded sidecar ({@code onceguard.jar}) or the plain consumer ({@link PlainConsumer}), all with
 * the same configuration but for instance id and port, all calling one business. The test
 * thread calls everything; {@link #close()} kills what still runs.
 */
final class InstanceGroup implements AutoCloseable {
  /** Which pipeline the processes run. */
  enum Kind {
    PLAIN, GUARDED
  }

  /** The YAML of one instance. */
  @FunctionalInterface
  interface Config {
    String yaml(String instanceId, int grpcPort);
  }

  final String name;
  final Kind kind;
  final RecordingBusiness business;
  private final Config config;
  private final List<SidecarProcess> running = new ArrayList<>();
  private final List<SidecarProcess> all = new ArrayList<>();

  InstanceGroup(String name, Kind kind, RecordingBusiness business, Config config) {
    this.name = name;
    this.kind = kind;
    this.business = business;
    this.config = config;
  }

  /** Starts one more instance and returns without waiting for it to serve. */
  SidecarProcess add(String instanceId) {
    int port = RecordingBusiness.freePort();
    String processName = name + "-" + all.size() + "-" + instanceId;
    String yaml = config.yaml(instanceId, port);
    SidecarProcess p = kind == Kind.GUARDED ? SidecarProcess.start(processName, yaml, port)
        : SidecarProcess.startMain(processName, yaml, port, PlainConsumer.class);
    running.add(p);
    all.add(p);
    return p;
  }

  /** The {@code i}-th of the instances that run, oldest first. */
  SidecarProcess instance(int i) {
    return running.get(i);
  }

  void awaitServing(Duration timeout) throws InterruptedException {
    for (SidecarProcess p : running) {
      p.awaitServing(timeout);
    }
  }

  /** kill -9 of {@code p}, waiting until it is gone. */
  void kill(SidecarProcess p) throws InterruptedException {
    p.kill();
    running.remove(p);
  }

  /** Stops counting {@code p} among the instances that run (the caller stopped it). */
  void forget(SidecarProcess p) {
    running.remove(p);
  }

  @Override
  public void close() {
    all.forEach(SidecarProcess::close);
  }
}
