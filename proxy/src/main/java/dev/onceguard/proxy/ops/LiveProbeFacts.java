package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.SidecarConfig;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The running process's {@link ProbeFacts}, filled in as {@code run} starts up: the start-up wait
 * (a reason), then the {@link GuardRuntime} (MySQL), then the {@link Sidecar} (routes, draining).
 * Topics are described through a Kafka admin client of its own, created on first use with the
 * configured {@code kafka.properties} (the ones an admin client knows), so security settings
 * apply. Thread-safe; owns and closes the admin client, not the runtime or the sidecar.
 */
final class LiveProbeFacts implements ProbeFacts, AutoCloseable {
  private final SidecarConfig config;
  private final Duration timeout;
  private volatile String startupWait = "starting";
  private volatile GuardRuntime runtime;
  private volatile Sidecar sidecar;
  /** Guarded by {@code this}. */
  private Admin admin;
  private boolean closed;

  /** @param timeout bound of one metadata request (the probe's check timeout) */
  LiveProbeFacts(SidecarConfig config, Duration timeout) {
    this.config = config;
    this.timeout = timeout;
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
  public CompletionStage<Map<String, Integer>> topics(Set<String> topics) {
    Admin a;
    try {
      a = admin();
    } catch (KafkaException | IllegalStateException e) {
      return CompletableFuture.failedFuture(new IllegalStateException("cannot create a Kafka admin client: " + e.getMessage(), e));
    }
    CompletableFuture<Map<String, Integer>> out = new CompletableFuture<>();
    if (topics.isEmpty()) {
      out.complete(Map.of());
      return out;
    }
    Map<String, KafkaFuture<TopicDescription>> described =
        a.describeTopics(topics, new DescribeTopicsOptions().timeoutMs((int) timeout.toMillis())).topicNameValues();
    Map<String, Integer> existing = new ConcurrentHashMap<>();
    AtomicInteger left = new AtomicInteger(described.size());
    described.forEach((name, f) -> f.whenComplete((d, e) -> {
      Throwable cause = unwrap(e);
      if (cause == null) {
        existing.put(name, d.partitions().size());
      } else if (!(cause instanceof UnknownTopicOrPartitionException)) {
        out.completeExceptionally(cause);
      }
      if (left.decrementAndGet() == 0) {
        out.complete(Map.copyOf(existing));
      }
    }));
    return out;
  }

  private static Throwable unwrap(Throwable e) {
    return (e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null ? e.getCause() : e;
  }

  private synchronized Admin admin() {
    if (closed) {
      throw new IllegalStateException("closed");
    }
    if (admin == null) {
      Map<String, Object> props = new HashMap<>();
      config.kafka().properties().forEach((k, v) -> {
        if (AdminClientConfig.configNames().contains(k)) {
          props.put(k, v);
        }
      });
      props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, config.kafka().bootstrapServers());
      props.put(AdminClientConfig.CLIENT_ID_CONFIG, "onceguard-probes-" + config.instanceId());
      admin = Admin.create(props);
    }
    return admin;
  }

  @Override
  public synchronized void close() {
    closed = true;
    if (admin != null) {
      admin.close(Duration.ofSeconds(5));
    }
  }
}
