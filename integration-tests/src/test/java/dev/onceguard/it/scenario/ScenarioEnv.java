package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/**
 * Everything one scenario run owns, unique per run: the five route topics and their consumer
 * groups, the five escalation topics, one verdict topic, a MySQL database {@code og_it_<random>}
 * and a Redis key prefix. {@link #close()} drops the database, deletes the Redis keys and the
 * topics. Builds the sidecar's YAML as an operator would write it.
 */
final class ScenarioEnv implements AutoCloseable {
  final String name;
  final int partitions;
  final KafkaSupport kafka;
  final Mysql mysql;
  final String database = "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  final String redisPrefix = "ogit:" + database + ":";
  /** route -> source topic, escalation topic, consumer group. */
  final Map<String, String> topics = new LinkedHashMap<>();
  final Map<String, String> escalationTopics = new LinkedHashMap<>();
  final Map<String, String> groups = new LinkedHashMap<>();
  final String verdictTopic;
  /** route -> early-arrival-timeout, where it differs from the scenario's defaults. */
  private final Map<String, String> earlyArrivalTimeouts = new LinkedHashMap<>();
  private String earlyArrivalRetry = "200ms";
  /** The L1 every instance of this run uses. */
  private String redisUri = ItEnv.redisUri();

  ScenarioEnv(String name, int partitions) {
    this(name, partitions, new KafkaSupport(), new Mysql());
  }

  /** On other services than the stack's (the local cluster stack): the env closes both. */
  ScenarioEnv(String name, int partitions, KafkaSupport kafka, Mysql mysql) {
    this.name = name;
    this.partitions = partitions;
    this.kafka = kafka;
    this.mysql = mysql;
    try {
      String suffix = ItEnv.uniqueSuffix();
      for (String r : OrderScenario.ROUTES) {
        topics.put(r, kafka.createTopic("scn-" + r, partitions));
        escalationTopics.put(r, kafka.createTopic("scn-" + r + "-escalate", 1));
        groups.put(r, "scn-" + name + "-" + r + "-" + suffix);
      }
      verdictTopic = kafka.createTopic("scn-verdicts", partitions);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /**
   * Overrides a route's early-arrival-timeout (default: 60 s, the deliver route
   * {@link OrderScenario#DELIVER_EARLY_ARRIVAL_TIMEOUT}); call before building a configuration.
   */
  ScenarioEnv earlyArrivalTimeout(String route, String timeout) {
    earlyArrivalTimeouts.put(route, timeout);
    return this;
  }

  /** Sets every route's early-arrival-retry (default 200 ms); call before building a configuration. */
  ScenarioEnv earlyArrivalRetry(String retry) {
    earlyArrivalRetry = retry;
    return this;
  }

  /** Points every instance's L1 at another Redis (a private one the test restarts, say); call before building a configuration. */
  ScenarioEnv redisUri(String uri) {
    redisUri = uri;
    return this;
  }

  /** The route's topic, by route name. */
  String topic(String route) {
    return topics.get(route);
  }

  /** One sidecar's settings; the rest of the YAML is shared by every instance of a run. */
  static final class Instance {
    String instanceId = "scn";
    int grpcPort;
    String target;
    String lease = "30s";
    int poolSize = 10;
    String handlerTimeout = "5s";
    String shutdownTimeout = "10s";
    int mysqlPort = ItEnv.mysqlPort();

    static Instance of(String instanceId, String target) {
      Instance i = new Instance();
      i.instanceId = instanceId;
      i.target = target;
      return i;
    }

    Instance lease(String d) {
      lease = d;
      return this;
    }

    Instance grpcPort(int p) {
      grpcPort = p;
      return this;
    }

    /** MySQL's port as this instance reaches it (a relay in front of the real server, say). */
    Instance mysqlPort(int p) {
      mysqlPort = p;
      return this;
    }
  }

  String yaml(Instance in) {
    StringBuilder sb = new StringBuilder();
    sb.append("""
        sidecar:
          instance-id: %s
          grpc-listen: 127.0.0.1:%d
          shutdown-timeout: %s
          commit-interval: 200ms
        kafka:
          bootstrap-servers: %s
          properties:
            session.timeout.ms: "6000"
            heartbeat.interval.ms: "1000"
        mysql:
          host: %s
          port: %d
          user: %s
          password: '%s'
          database: %s
          pool-size: %d
        redis:
          uri: %s
          key-prefix: '%s'
          timeout: 200ms
          breaker-open-for: 1s
        """.formatted(in.instanceId, in.grpcPort, in.shutdownTimeout, kafka.bootstrap(), ItEnv.mysqlHost(), in.mysqlPort,
        ItEnv.mysqlUser(), ItEnv.mysqlPassword().replace("'", "''"), database, in.poolSize, redisUri, redisPrefix));
    sb.append(OrderScenario.MACHINE_YAML);
    sb.append("routes:\n");
    for (String r : OrderScenario.ROUTES) {
      String early = earlyArrivalTimeouts.getOrDefault(r, r.equals("deliver") ? OrderScenario.DELIVER_EARLY_ARRIVAL_TIMEOUT : "60s");
      String key = OrderScenario.MESSAGE_ID_IN_KEY.contains(r) ? "[/order_id, /sku_id, /warehouse_id, /batch_no, /message_id]"
          : "[/order_id, /sku_id, /warehouse_id, /batch_no]";
      sb.append("""
            - name: %s
              topics: [%s]
              group: %s
              machine: line
              entity-id: /line_id
              event: /event
              business-key: %s
              fingerprint-exclude: [/message_id, /sent_at]
              target: %s
              handler-timeout: %s
              lease: %s
              early-arrival-timeout: %s
              early-arrival-retry: %s
              escalation-topic: %s
              verdict-topic: %s
              retry: {initial-backoff: 100ms, max-backoff: 1s, max-attempts: 60}
          """.formatted(r, topics.get(r), groups.get(r), key, in.target, in.handlerTimeout, in.lease, early, earlyArrivalRetry,
          escalationTopics.get(r), verdictTopic));
    }
    return sb.toString();
  }

  SidecarConfig config(Instance in) {
    return new ConfigReader(Map.of()).parse(yaml(in), name + "/" + in.instanceId);
  }

  /** Deletes every Redis key of this run (the L1 cache "expired"); returns how many there were. */
  long wipeL1() {
    return ItEnv.deleteRedisKeys(redisUri, redisPrefix);
  }


  @Override
  public void close() {
    try {
      mysql.exec("DROP DATABASE IF EXISTS " + database);
    } catch (RuntimeException e) {
      System.err.println(name + ": could not drop " + database + ": " + e);
    } finally {
      try {
        wipeL1();
      } catch (RuntimeException e) {
        System.err.println(name + ": could not delete Redis keys " + redisPrefix + "*: " + e);
      } finally {
        mysql.close();
        kafka.close();
      }
    }
  }

  /** Until every route group has {@code n} members that own partitions (its rebalance finished). */
  void awaitMembers(int n) {
    await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(250)).untilAsserted(() -> {
      for (String g : groups.values()) {
        assertThat(kafka.activeMembers(g)).as("members of %s owning partitions", g).isEqualTo(n);
      }
    });
  }
}
