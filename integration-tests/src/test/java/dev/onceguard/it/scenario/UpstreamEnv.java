package dev.onceguard.it.scenario;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.TopicPartition;

/**
 * What the Q5 experiment ({@link UpstreamOnly}) and the scale experiment ({@link ScaleAnswer})
 * own: one topic of facts, the guard's escalation topic, a consumer group per pipeline, a MySQL
 * database {@code og_it_<random>} and a Redis key prefix. Both pipelines read the same YAML but for group, instance id and port (the plain one
 * ignores the guard's settings). {@link #close()} drops the database, deletes the keys and topics.
 */
final class UpstreamEnv implements AutoCloseable {
  final KafkaSupport kafka;
  final Mysql mysql = new Mysql();
  final String database = "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  final String redisPrefix = "ogit:" + database + ":";
  final String topic;
  final String escalations;
  final String plainGroup;
  final String guardedGroup;
  /** Where the instances reach Kafka and MySQL: directly, unless {@link #reachedThrough} named relays. */
  private String sidecarBootstrap;
  private String mysqlHost = ItEnv.mysqlHost();
  private int mysqlPort = ItEnv.mysqlPort();

  UpstreamEnv(String name, int partitions) {
    this(name, partitions, new KafkaSupport());
  }

  /** On another broker than the stack's (a cluster of scripts/cluster.sh): the env closes it. */
  UpstreamEnv(String name, int partitions, KafkaSupport kafka) {
    this.kafka = kafka;
    this.sidecarBootstrap = kafka.bootstrap();
    try {
      topic = kafka.createTopic(name, partitions);
      escalations = kafka.createTopic(name + "-escalate", 1);
      String suffix = ItEnv.uniqueSuffix();
      plainGroup = name + "-plain-" + suffix;
      guardedGroup = name + "-guarded-" + suffix;
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /**
   * Makes the instances' YAML name these addresses for Kafka and MySQL (delaying proxies, say);
   * the test's own clients keep reaching both directly.
   */
  UpstreamEnv reachedThrough(String kafkaBootstrap, String mysqlHost, int mysqlPort) {
    this.sidecarBootstrap = kafkaBootstrap;
    this.mysqlHost = mysqlHost;
    this.mysqlPort = mysqlPort;
    return this;
  }

  String yaml(String group, String instanceId, int grpcPort, String target) {
    return yaml(group, instanceId, grpcPort, target, "");
  }

  /**
   * One instance's YAML: commits every 200 ms; a dead member leaves the group after a 6 s session
   * timeout; route {@code facts}: machine {@code line}, business key order, sku, warehouse, batch,
   * fingerprint without message id and sent_at; {@code sidecarExtra} goes into the {@code sidecar}
   * map (e.g. {@code ", admin-listen: 127.0.0.1:9401"}).
   */
  String yaml(String group, String instanceId, int grpcPort, String target, String sidecarExtra) {
    return """
        sidecar: {instance-id: %s, grpc-listen: 127.0.0.1:%d, commit-interval: 200ms, shutdown-timeout: 10s%s}
        kafka:
          bootstrap-servers: '%s'
          properties: {session.timeout.ms: "6000", heartbeat.interval.ms: "1000"}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: 8}
        redis: {uri: %s, key-prefix: '%s', timeout: 200ms, breaker-open-for: 1s}
        %s
        routes:
          - name: facts
            topics: [%s]
            group: %s
            machine: line
            entity-id: /line_id
            event: /event
            business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
            fingerprint-exclude: [/message_id, /sent_at]
            target: %s
            escalation-topic: %s
        """.formatted(instanceId, grpcPort, sidecarExtra, sidecarBootstrap, mysqlHost, mysqlPort, ItEnv.mysqlUser(),
        ItEnv.mysqlPassword().replace("'", "''"), database, ItEnv.redisUri(), redisPrefix, OrderScenario.MACHINE_YAML, topic, group,
        target, escalations);
  }

  /** Records in the topic so far (the sum of its end offsets). */
  long records() {
    return kafka.endOffsets(topic).values().stream().mapToLong(Long::longValue).sum();
  }

  /** Records written to the guard's escalation topic so far. */
  long escalated() {
    return kafka.endOffsets(escalations).values().stream().mapToLong(Long::longValue).sum();
  }

  /** Until {@code group} has committed every partition to its end; fails after {@code timeout}. */
  void awaitCommitted(String group, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      Map<TopicPartition, Long> end = kafka.endOffsets(topic);
      Map<TopicPartition, Long> committed = kafka.committedOffsets(group, topic);
      if (end.entrySet().stream().allMatch(e -> committed.getOrDefault(e.getKey(), 0L) >= e.getValue())) {
        return;
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(group + " did not commit to the end " + end + " within " + timeout + ": " + committed);
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
  }

  /** Until {@code n} members of {@code group} own partitions of the topic; fails after {@code timeout}. */
  void awaitMembers(String group, int n, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (kafka.activeMembers(group) != n) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(group + ": " + kafka.activeMembers(group) + " members own partitions, not " + n + ", after " + timeout);
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
  }

  /** Deletes the guard's L1 keys (as a TTL shorter than a re-run's lateness would); returns how many there were. */
  long wipeL1() {
    return ItEnv.deleteRedisKeys(redisPrefix);
  }

  @Override
  public void close() {
    try {
      mysql.exec("DROP DATABASE IF EXISTS " + database);
    } catch (RuntimeException e) {
      System.err.println("could not drop " + database + ": " + e);
    } finally {
      try {
        wipeL1();
      } catch (RuntimeException e) {
        System.err.println("could not delete Redis keys " + redisPrefix + "*: " + e);
      } finally {
        mysql.close();
        kafka.close();
      }
    }
  }
}
