package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.SidecarConfig;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The running process's {@link ProbeFacts}, filled in as {@code run} starts up: the start-up wait
 * (a reason), then the {@link GuardRuntime} (MySQL), then the {@link Sidecar} (routes, draining).
 * Topics are described through {@link KafkaTopics} (an admin client of its own). Thread-safe; owns
 * and closes that, not the runtime or the sidecar.
 */
final class LiveProbeFacts implements ProbeFacts, AutoCloseable {
  private volatile String startupWait = "starting";
  private volatile GuardRuntime runtime;
  private volatile Sidecar sidecar;
  private final KafkaTopics topics;

  /** @param timeout bound of one metadata request (the probe's check timeout) */
  LiveProbeFacts(SidecarConfig config, Duration timeout) {
    this.topics = new KafkaTopics(config, "onceguard-probes-" + config.instanceId(), timeout);
  }

  /** Start-up is waiting, for this reason. */
  void waiting(String reason) {
    startupWait = reason;
  }

  /** MySQL answered and the guard is up; the route consumers start next. */
  void runtime(GuardRuntime runtime) {
    this.runtime = runtime;
    startupWait = "starting the route consumers";
  }

  void sidecar(Sidecar sidecar) {
    this.sidecar = sidecar;
  }

  @Override
  public String startupWait() {
    Sidecar s = sidecar;
    return s != null && s.consuming() ? null : startupWait;
  }

  @Override
  public boolean draining() {
    Sidecar s = sidecar;
    return s != null && s.draining();
  }

  @Override
  public RouteFacts route(String name) {
    Sidecar s = sidecar;
    return s == null ? null : s.routeFacts(name);
  }

  @Override
  public CompletionStage<Void> pingMysql() {
    GuardRuntime r = runtime;
    return r == null ? CompletableFuture.failedFuture(new IllegalStateException("not connected yet")) : r.pingMysql();
  }

  @Override
  public CompletionStage<Map<String, Integer>> topics(Set<String> names) {
    return topics.partitions(names);
  }

  @Override
  public void close() {
    topics.close();
  }
}
