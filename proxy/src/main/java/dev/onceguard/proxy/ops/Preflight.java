package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.config.UnixSocket;
import dev.onceguard.proxy.dispatch.GrpcDispatcher;
import dev.onceguard.proxy.escalate.Escalator;
import dev.onceguard.proxy.ops.Probes.Check;
import dev.onceguard.proxy.ops.Probes.Report;
import dev.onceguard.proxy.ops.Probes.Status;
import dev.onceguard.proxy.pipeline.ConsumerProperties;
import dev.onceguard.proxy.security.GrpcSecurity;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.RedisIdempotencyCache;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthGrpc;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.slf4j.Logger;

/**
 * Is the environment ready for this configuration? The checks of {@code validate --connect}, each
 * blamed on its component: Kafka (the source, escalation and verdict topics of every route exist,
 * with their partition counts), MySQL (it answers, and the user holds the privileges the sidecar
 * needs on the database), Redis (a PING, when configured) and each push route's business target (a
 * TCP or Unix socket connection; with {@code target-tls}, a TLS handshake). Also what {@code run} checks of its topics at start ({@link #prepareTopics}).
 *
 * <p>Blocking: every remote check is bounded by the timeout (MySQL by its driver's 5 s connect
 * timeout); the checks of the four components run in parallel. Writes nothing, except that MySQL
 * access goes through {@link Db}, which creates the database when it does not exist (as {@code run}
 * and {@code migrate} would).
 */
final class Preflight {
  static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(5);

  private final SidecarConfig config;
  private final Duration timeout;

  Preflight(SidecarConfig config, Duration timeout) {
    this.config = config;
    this.timeout = timeout;
  }

  /**
   * Problems that the Kafka clients find when the sidecar's own consumer and producer
   * configurations are built from {@code kafka.properties} (rules across settings, such as a
   * consumer setting the chosen {@code group.protocol} does not allow), each as
   * {@code kafka.properties: <Kafka's message>}. Single values are checked by {@code ConfigReader}.
   */
  static List<String> clientConfigProblems(SidecarConfig config) {
    List<String> problems = new ArrayList<>();
    try {
      new ProducerConfig(Escalator.producerProperties(config.kafka().bootstrapServers(), config.kafka().properties(), "preflight"));
    } catch (org.apache.kafka.common.KafkaException e) {
      problems.add("kafka.properties: " + e.getMessage() + " (in the escalation producer's configuration)");
    }
    for (RouteConfig rc : config.routes()) {
      try {
        new ConsumerConfig(ConsumerProperties.of(config, rc).values());
      } catch (org.apache.kafka.common.KafkaException e) {
        String p = "kafka.properties: " + e.getMessage() + " (in the consumer's configuration)";
        if (!problems.contains(p)) {
          problems.add(p); // every route's consumer has the same properties: report once
        }
      }
    }
    return problems;
  }

  /** Runs every check; blocks up to about the timeout. */
  Report check() throws InterruptedException {
    ExecutorService pool = Executors.newFixedThreadPool(4, r -> {
      Thread t = new Thread(r, "onceguard-preflight");
      t.setDaemon(true);
      return t;
    });
    try (KafkaTopics topics = new KafkaTopics(config, "onceguard-preflight-" + config.instanceId(), timeout)) {
      Set<String> names = new LinkedHashSet<>();
      config.routes().forEach(rc -> names.addAll(Probes.topicsOf(rc).keySet()));
      CompletableFuture<Map<String, Integer>> described = topics.partitions(names).toCompletableFuture();
      CompletableFuture<Check> mysql = CompletableFuture.supplyAsync(this::mysql, pool);
      CompletableFuture<Check> redis = CompletableFuture.supplyAsync(this::redis, pool);
      Map<String, CompletableFuture<Check>> targets = new LinkedHashMap<>();
      for (RouteConfig rc : config.routes()) {
        targets.put(rc.name(), CompletableFuture.supplyAsync(() -> target(rc), pool));
      }

      String kafkaError = reason(described, timeout.plusSeconds(1));
      Map<String, Integer> existing = kafkaError == null ? described.join() : Map.of();
      List<Check> process = new ArrayList<>();
      process.add(kafkaError == null
          ? Check.ok("kafka", "metadata read from " + config.kafka().bootstrapServers() + " (" + names.size() + " topics)")
          : Check.fail("kafka", "Kafka (" + config.kafka().bootstrapServers() + "): " + kafkaError));
      process.add(mysql.join());
      process.add(redis.join());
      Map<String, List<Check>> routes = new LinkedHashMap<>();
      for (RouteConfig rc : config.routes()) {
        List<Check> checks = new ArrayList<>(Probes.topicChecks(rc, existing, kafkaError, config.kafka().createTopics()));
        checks.add(targets.get(rc.name()).join());
        routes.put(rc.name(), checks);
      }
      return new Report("ready", process, routes);
    } finally {
      pool.shutdownNow();
    }
  }

  private Check mysql() {
    String where = "MySQL " + config.mysql().host() + ":" + config.mysql().port() + "/" + config.mysql().database();
    try (Db db = new Db(config.mysql())) {
      Object user = db.select("SELECT CURRENT_USER()").get(0).get(0);
      List<String> grants = db.select("SHOW GRANTS").stream().map(row -> String.valueOf(row.get(0))).toList();
      Set<String> needed = MysqlGrants.needed(config.mysql().migrateOnStart());
      Set<String> missing = MysqlGrants.missing(grants, config.mysql().database(), needed);
      if (missing.isEmpty()) {
        return Check.ok("mysql", where + ": connected as " + user + ", who may " + String.join(", ", needed) + " there");
      }
      return Check.fail("mysql", where + ": user " + user + " lacks " + String.join(", ", missing) + " on database '"
          + config.mysql().database() + "'" + (config.mysql().migrateOnStart() ? " (CREATE and ALTER: mysql.migrate-on-start)" : "")
          + "; SHOW GRANTS: " + String.join(" | ", grants));
    } catch (RuntimeException e) {
      return Check.fail("mysql", where + " (user " + config.mysql().user() + "): " + message(e));
    }
  }

  private Check redis() {
    if (!config.redis().enabled()) {
      return new Check("redis", Status.SKIPPED, "redis.uri not set: L1 off");
    }
    String shown = config.redis().uris().stream().map(dev.onceguard.proxy.config.Secrets::withoutUserInfo).toList().toString();
    List<RedisURI> uris = RedisIdempotencyCache.redisUris(config.redis(), timeout);
    io.lettuce.core.SslOptions ssl = RedisIdempotencyCache.sslOptions(config.redis());
    SocketOptions socket = SocketOptions.builder().connectTimeout(timeout).build();
    io.lettuce.core.AbstractRedisClient client = null;
    try {
      String pong;
      if (config.redis().cluster()) {
        RedisClusterClient c = RedisClusterClient.create(uris);
        client = c;
        c.setOptions(ClusterClientOptions.builder().socketOptions(socket).sslOptions(ssl).build());
        try (var conn = c.connect()) {
          pong = conn.sync().ping();
        }
      } else {
        RedisClient c = RedisClient.create(uris.get(0));
        client = c;
        c.setOptions(ClientOptions.builder().socketOptions(socket).sslOptions(ssl).build());
        try (var conn = c.connect()) {
          pong = conn.sync().ping();
        }
      }
      return Check.ok("redis", "Redis " + shown + " answered PING with " + pong);
    } catch (RuntimeException e) {
      return Check.fail("redis", "Redis " + shown + ": " + message(e));
    } finally {
      if (client != null) {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    }
  }

  /** The check of one route's business target. Package-private for tests. */
  Check target(RouteConfig rc) {
    if (rc.delivery().mode() != RouteConfig.Mode.PUSH) {
      return new Check("target", Status.SKIPPED, "pull mode: the business connects to the sidecar");
    }
    String t = rc.delivery().target();
    if (rc.delivery().tls() != null) {
      return tlsTarget(rc);
    }
    if (UnixSocket.is(t)) {
      try (SocketChannel s = SocketChannel.open(StandardProtocolFamily.UNIX)) {
        s.connect(UnixDomainSocketAddress.of(UnixSocket.pathOf(t)));
        return Check.ok("target", "business target " + t + " accepts connections");
      } catch (IOException e) {
        return Check.fail("target", "business target " + t + " cannot be reached: " + message(e));
      }
    }
    int colon = t.lastIndexOf(':');
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(t.substring(0, colon), Integer.parseInt(t.substring(colon + 1))), (int) timeout.toMillis());
      return Check.ok("target", "business target " + t + " accepts connections");
    } catch (IOException | IllegalArgumentException e) {
      return Check.fail("target", "business target " + t + " cannot be reached: " + message(e));
    }
  }

  /**
   * A TLS target: a health check over the route's own credentials. Any answer but
   * {@code UNAVAILABLE} or a timeout (e.g. {@code UNIMPLEMENTED} from a business without the
   * health service) means the handshake succeeded; never calls {@code Handle}.
   */
  private Check tlsTarget(RouteConfig rc) {
    String t = rc.delivery().target();
    try (GrpcSecurity security = new GrpcSecurity(Duration.ofHours(1))) {
      ManagedChannel ch = GrpcDispatcher.channel(t, security.channelCredentials(rc.delivery().tls()), rc.delivery().tls().authority());
      try {
        HealthGrpc.newBlockingStub(ch).withDeadlineAfter(timeout.toMillis(), TimeUnit.MILLISECONDS)
            .check(HealthCheckRequest.getDefaultInstance());
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() == io.grpc.Status.Code.UNAVAILABLE || e.getStatus().getCode() == io.grpc.Status.Code.DEADLINE_EXCEEDED) {
          return Check.fail("target", "business target " + t + " (TLS): " + message(e));
        }
      } finally {
        ch.shutdownNow();
      }
      return Check.ok("target", "business target " + t + " completed a TLS handshake");
    } catch (IOException e) {
      return Check.fail("target", "business target " + t + " (TLS): " + e.getMessage());
    }
  }

  /**
   * What {@code run} does with its topics before it starts: a missing source topic is only
   * logged (the route waits for it, and readiness says so); missing escalation and verdict topics
   * are created when {@code kafka.create-topics}, with the partition count of the route's first
   * source topic (the broker's default if that is missing too), and logged at INFO.
   *
   * @return {@code null} when the sidecar can start, else why not (naming every missing topic)
   * @throws IllegalStateException when Kafka's metadata cannot be read (worth waiting for), or a
   *     topic could not be created
   */
  static String prepareTopics(SidecarConfig config, KafkaTopics topics, Duration timeout, Logger log) throws InterruptedException {
    Set<String> names = new LinkedHashSet<>();
    config.routes().forEach(rc -> names.addAll(Probes.topicsOf(rc).keySet()));
    CompletableFuture<Map<String, Integer>> described = topics.partitions(names).toCompletableFuture();
    String error = reason(described, timeout.plusSeconds(1));
    if (error != null) {
      Throwable cause = described.isCompletedExceptionally() ? described.handle((x, e) -> e).join() : null;
      if (cause instanceof java.util.concurrent.CompletionException && cause.getCause() != null) {
        cause = cause.getCause();
      }
      if (cause instanceof org.apache.kafka.common.errors.AuthorizationException) {
        // not a Kafka that is away: waiting would not change the answer
        return "Kafka (" + config.kafka().bootstrapServers() + ") refused to describe the topics: " + cause.getMessage();
      }
      if (cause instanceof org.apache.kafka.common.errors.AuthenticationException) {
        // SASL credentials or the TLS handshake: the same answer on every attempt
        return "Kafka (" + config.kafka().bootstrapServers() + ") refused the sidecar's authentication (check the sasl.* and ssl.* "
            + "settings in kafka.properties): " + cause.getMessage();
      }
      throw new IllegalStateException("Kafka (" + config.kafka().bootstrapServers() + "): " + error);
    }
    Map<String, Integer> existing = new LinkedHashMap<>(described.join());
    List<String> missing = new ArrayList<>();
    for (RouteConfig rc : config.routes()) {
      for (Map.Entry<String, String> e : Probes.topicsOf(rc).entrySet()) {
        String topic = e.getKey();
        String kind = e.getValue();
        if (existing.containsKey(topic)) {
          continue;
        }
        if (kind.equals(Probes.SOURCE)) {
          log.warn("route {}: source topic '{}' does not exist: the route waits for it (the sidecar never creates source topics)",
              rc.name(), topic);
        } else if (config.kafka().createTopics()) {
          Optional<Integer> partitions = Optional.ofNullable(existing.get(rc.intake().topics().get(0)));
          try {
            topics.create(topic, partitions);
          } catch (KafkaTopics.Refused refused) {
            missing.add("route " + rc.name() + ": " + refused.getMessage());
            continue;
          }
          existing.put(topic, partitions.orElse(-1));
          log.info("route {}: created {} topic '{}' with {} (kafka.create-topics)", rc.name(), kind, topic,
              partitions.map(p -> p + " partition(s), as source topic '" + rc.intake().topics().get(0) + "'")
                  .orElse("the broker's default partitions"));
        } else {
          missing.add("route " + rc.name() + ": " + kind + " topic '" + topic + "' does not exist");
        }
      }
    }
    return missing.isEmpty() ? null
        : String.join("; ", missing) + ". Create it before starting the sidecar, or set kafka.create-topics: true";
  }

  /** {@code null} when {@code f} completed normally within {@code wait}, else why not. */
  private static String reason(CompletableFuture<?> f, Duration wait) throws InterruptedException {
    try {
      f.get(wait.toMillis(), TimeUnit.MILLISECONDS);
      return null;
    } catch (TimeoutException e) {
      return "no answer within " + wait.toSeconds() + " s";
    } catch (ExecutionException e) {
      return message(e.getCause());
    }
  }

  /**
   * The root cause's message (the driver's or the socket's own words, not the wrappers' class
   * names), or the outermost message when the root has none.
   */
  static String message(Throwable e) {
    Throwable root = e;
    for (int depth = 0; root.getCause() != null && root.getCause() != root && depth < 20; depth++) {
      root = root.getCause();
    }
    for (Throwable t : List.of(root, e)) {
      if (t.getMessage() != null && !t.getMessage().isBlank()) {
        return t.getMessage();
      }
    }
    return e.getClass().getSimpleName();
  }
}
