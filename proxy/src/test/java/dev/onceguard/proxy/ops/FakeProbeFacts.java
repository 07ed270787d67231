package dev.onceguard.proxy.ops;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@link ProbeFacts} set by the test: by default started, not draining, MySQL answering, every
 * asked topic existing with one partition, and no route running until {@link #route} gives one.
 */
final class FakeProbeFacts implements ProbeFacts {
  volatile String startupWait;
  volatile boolean draining;
  final Map<String, RouteFacts> routes = new HashMap<>();
  /** What the next pings answer; a never-completed future is a MySQL that does not answer. */
  volatile CompletableFuture<Void> ping = CompletableFuture.completedFuture(null);
  final AtomicInteger pings = new AtomicInteger();
  /** Topics that do not exist. */
  final Set<String> missing = new HashSet<>();
  /** When set, reading Kafka's metadata fails with it. */
  volatile RuntimeException kafkaDown;

  FakeProbeFacts route(String name, RouteFacts facts) {
    routes.put(name, facts);
    return this;
  }

  @Override
  public String startupWait() {
    return startupWait;
  }

  @Override
  public boolean draining() {
    return draining;
  }

  @Override
  public synchronized RouteFacts route(String name) {
    return routes.get(name);
  }

  @Override
  public CompletionStage<Void> pingMysql() {
    pings.incrementAndGet();
    return ping;
  }

  @Override
  public synchronized CompletionStage<Map<String, Integer>> topics(Set<String> topics) {
    if (kafkaDown != null) {
      return CompletableFuture.failedFuture(kafkaDown);
    }
    Map<String, Integer> out = new HashMap<>();
    topics.stream().filter(t -> !missing.contains(t)).forEach(t -> out.put(t, 1));
    return CompletableFuture.completedFuture(out);
  }
}
