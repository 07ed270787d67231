package dev.onceguard.it.scenario;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;

/**
 * A guarded sidecar with one route over the order-line machine, for tests of one behaviour: a
 * source topic, an escalation topic and a verdict topic, a consumer group, a MySQL database
 * {@code og_it_<random>} and a Redis key prefix of its own. {@link #close()} drops the database
 * and deletes the topics.
 */
final class OneRouteEnv implements AutoCloseable {
  final KafkaSupport kafka;
  final Mysql mysql = new Mysql();
  final String database = "og_it_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  final String topic;
  final String escalations;
  final String verdicts;
  final String group;
  /** The L1 of {@link #config}: the stack's Redis unless {@link #redisCluster} named a cluster. */
  private String redisUri = ItEnv.redisUri();
  private String redisExtra = "";

  OneRouteEnv(String name, int partitions) {
    this(name, partitions, new KafkaSupport());
  }

  /** On another broker than the stack's (a cluster of scripts/cluster.sh): the env closes it. */
  OneRouteEnv(String name, int partitions, KafkaSupport kafka) {
    this.kafka = kafka;
    try {
      topic = kafka.createTopic(name, partitions);
      escalations = kafka.createTopic(name + "-escalate", 1);
      verdicts = kafka.createTopic(name + "-verdicts", 1);
      group = name + "-" + ItEnv.uniqueSuffix();
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /**
   * Makes {@link #config} use a Redis Cluster ({@code redis.mode: cluster}) at these seed URIs, its
   * breaker open for {@code breakerOpenFor} after a failed call.
   */
  OneRouteEnv redisCluster(String seeds, String breakerOpenFor) {
    redisUri = "'" + seeds + "'";
    redisExtra = ", mode: cluster, breaker-open-for: " + breakerOpenFor;
    return this;
  }

  /**
   * The sidecar's configuration: route {@code lines} keyed by {@code /line_id}, events in
   * {@code /event}, business key order, sku, warehouse, batch.
   *
   * @param routeExtra more route settings, one per line, e.g. {@code "reorder-window: 3"}
   */
  SidecarConfig config(String target, String... routeExtra) {
    return configWithEntity("/line_id", target, routeExtra);
  }

  /** The same with another {@code entity-id} (YAML: one source, or a list of them). */
  SidecarConfig configWithEntity(String entityId, String target, String... routeExtra) {
    return new ConfigReader(Map.of()).parse(yaml(entityId, target, redisUri, RecordingBusiness.freePort(), "", routeExtra),
        group);
  }

  /**
   * The YAML of {@link #configWithEntity}, as a sidecar process reads it, with the given Redis and
   * gRPC port; {@code sidecarExtra} goes into the {@code sidecar} map (e.g.
   * {@code ", admin-listen: 127.0.0.1:9401"}).
   */
  String yaml(String entityId, String target, String redisUri, int grpcPort, String sidecarExtra, String... routeExtra) {
    StringBuilder extra = new StringBuilder();
    for (String s : routeExtra) {
      extra.append("    ").append(s).append('\n');
    }
    return """
        sidecar: {instance-id: %s, grpc-listen: 127.0.0.1:%d, commit-interval: 200ms%s}
        kafka: {bootstrap-servers: '%s'}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: 4}
        redis: {uri: %s, key-prefix: 'ogit:%s:', timeout: 200ms%s}
        %s
        routes:
          - name: lines
            topics: [%s]
            group: %s
            machine: line
            entity-id: %s
            event: /event
            business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
            fingerprint-exclude: [/message_id]
            target: %s
            escalation-topic: %s
            verdict-topic: %s
        %s""".formatted(group, grpcPort, sidecarExtra, kafka.bootstrap(), ItEnv.mysqlHost(), ItEnv.mysqlPort(),
        ItEnv.mysqlUser(), ItEnv.mysqlPassword().replace("'", "''"), database, redisUri, database,
        redisExtra, OrderScenario.MACHINE_YAML, topic, group, entityId, target, escalations, verdicts, extra);
  }

  /** A record of {@link #topic}: the line is the Kafka key, so a line's events share a partition. */
  ProducerRecord<byte[], byte[]> record(String line, String event, String messageId) {
    String json = """
        {"line_id":"%s","order_id":"o-%s","sku_id":"s-1","warehouse_id":"w-1","batch_no":1,"event":"%s","message_id":"%s"}"""
        .formatted(line, line, event, messageId);
    return new ProducerRecord<>(topic, line.getBytes(StandardCharsets.UTF_8),
        json.getBytes(StandardCharsets.UTF_8));
  }

  /** Waits until the route's group has committed every partition of {@link #topic} to its end. */
  void awaitCommittedToEnd(java.time.Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      var committed = kafka.committedOffsets(group, topic);
      var end = kafka.endOffsets(topic);
      if (end.entrySet().stream().allMatch(e -> committed.getOrDefault(e.getKey(), 0L) >= e.getValue())) {
        return;
      }
      if (System.nanoTime() > deadline) {
        org.assertj.core.api.Assertions.assertThat(committed).as("committed offsets reach the end of every partition").isEqualTo(end);
      }
      java.util.concurrent.TimeUnit.MILLISECONDS.sleep(250);
    }
  }

  static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  /** A string field of a record value written by {@link #record}. */
  static String field(byte[] value, String name) {
    String s = new String(value, StandardCharsets.UTF_8);
    int i = s.indexOf("\"" + name + "\":\"") + name.length() + 4;
    return s.substring(i, s.indexOf('"', i));
  }

  @Override
  public void close() {
    try {
      mysql.exec("DROP DATABASE IF EXISTS " + database);
    } finally {
      try {
        mysql.close();
      } finally {
        kafka.close();
      }
    }
  }
}
