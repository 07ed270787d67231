package dev.onceguard.it.scenario;

import dev.onceguard.it.RecordingBusiness;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The instances of one consumer group, each a process of its own (so that kill -9 is real), all
 * running one pipeline ({@link StandbyConsumer}, plain or guarded) with the same configuration but
 * for instance id and port, all calling one business. An instance is started ahead, as a standby,
 * and joins the group when {@link #join} tells it to. The test thread calls everything;
 * {@link #close()} kills what still runs.
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
  /** The consumer group's id. */
  final String group;
  private final Config config;
  private final List<SidecarProcess> running = new ArrayList<>();
  private final List<SidecarProcess> all = new ArrayList<>();

  InstanceGroup(String name, Kind kind, String group, Config config) {
    this.name = name;
    this.kind = kind;
    this.group = group;
    this.config = config;
  }

  /** Starts a process that starts up and waits to {@link #join}; returns at once. */
  SidecarProcess standby(String instanceId) {
    int port = RecordingBusiness.freePort();
    String processName = name + "-" + all.size() + "-" + instanceId;
    SidecarProcess p = SidecarProcess.startMain(processName, config.yaml(instanceId, port), port, StandbyConsumer.class,
        kind == Kind.GUARDED ? "guarded" : "plain");
    all.add(p);
    return p;
  }

  /** Until every process started so far has started up (joined or waiting to). */
  void awaitReady(Duration timeout) throws InterruptedException {
    for (SidecarProcess p : all) {
      p.awaitOutput(StandbyConsumer.READY, timeout);
    }
  }

  /** Tells a standby to join the group: it starts consuming. */
  void join(SidecarProcess p) {
    p.sendLine();
    running.add(p);
  }

  /** Instances in the group. */
  int size() {
    return running.size();
  }

  /** The {@code i}-th of the instances in the group, oldest first. */
  SidecarProcess instance(int i) {
    return running.get(i);
  }

  /** Until every instance in the group serves (its consumer started). */
  void awaitServing(Duration timeout) throws InterruptedException {
    for (SidecarProcess p : running) {
      p.awaitServing(timeout);
    }
  }

  /** Whether every instance in the group serves now. */
  boolean serving() throws InterruptedException {
    for (SidecarProcess p : running) {
      if (p.health("") != ServingStatus.SERVING) {
        return false;
      }
    }
    return true;
  }

  /** kill -9 of {@code p}, waiting until it is gone. */
  void kill(SidecarProcess p) throws InterruptedException {
    p.kill();
    running.remove(p);
  }

  /** Stops counting {@code p} among the instances in the group (the caller stopped it). */
  void forget(SidecarProcess p) {
    running.remove(p);
  }

  @Override
  public void close() {
    all.forEach(SidecarProcess::close);
  }
}
