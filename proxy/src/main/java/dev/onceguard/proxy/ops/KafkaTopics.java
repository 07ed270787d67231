package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.SidecarConfig;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The sidecar's view of its topics through a Kafka admin client of its own, created on first use
 * with the configured {@code kafka.properties} that an admin client knows (so security settings
 * apply). Used by the readiness probe, the preflight of {@code validate --connect} and {@code run}'s
 * start. Thread-safe; owns and closes the admin client.
 */
final class KafkaTopics implements AutoCloseable {
  private final SidecarConfig config;
  private final String clientId;
  private final Duration timeout;
  /** Guarded by {@code this}. */
  private Admin admin;
  private boolean closed;

  /** @param timeout bound of one metadata or create request */
  KafkaTopics(SidecarConfig config, String clientId, Duration timeout) {
    this.config = config;
    this.clientId = clientId;
    this.timeout = timeout;
  }

  /**
   * The partition count of each topic of {@code topics} that exists; missing topics are absent
   * from the map. Completes exceptionally, with the reason, when Kafka's metadata cannot be read.
   * Returns at once.
   */
  CompletionStage<Map<String, Integer>> partitions(Set<String> topics) {
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

  /**
   * Creates {@code name} with {@code partitions} partitions (empty: the broker's default) and the
   * broker's default replication factor; blocks up to the timeout. A topic that exists meanwhile
   * (another instance created it) counts as created.
   *
   * @throws IllegalStateException with Kafka's reason when it could not be created for now (a
   *     timeout, a broker away): worth trying again
   * @throws Refused when Kafka refused it (authorization, a policy, a replication factor the
   *     cluster cannot give): trying again will not help
   */
  void create(String name, Optional<Integer> partitions) throws InterruptedException, Refused {
    try {
      admin().createTopics(java.util.List.of(new NewTopic(name, partitions, Optional.empty())),
          new CreateTopicsOptions().timeoutMs((int) timeout.toMillis())).all().get();
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof TopicExistsException) {
        return;
      }
      String why = "cannot create topic '" + name + "': " + cause.getMessage();
      if (cause instanceof org.apache.kafka.common.errors.RetriableException) {
        throw new IllegalStateException(why, cause);
      }
      throw new Refused(why, cause);
    }
  }

  /** Kafka refused a request in a way that asking again will not change. */
  static final class Refused extends Exception {
    private static final long serialVersionUID = 1L;

    Refused(String message, Throwable cause) {
      super(message, cause);
    }
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
      props.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
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
