package dev.onceguard.it.client;

import dev.onceguard.it.ItEnv;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.ops.Metrics;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.v1.Verdict;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;

/**
 * A real sidecar in the test JVM for the client-java ITs, wired as {@code onceguard run} wires it
 * ({@link GuardRuntime} + {@link Sidecar}, gRPC on {@code 127.0.0.1:0}), on its own MySQL
 * database {@code og_it_<random>} and Redis key prefix, both removed on {@link #close()}. Every
 * route uses the {@code order} machine below; the caller writes the routes. Records every final
 * verdict of the Kafka path by the record's coordinates, and reads the guard's tables directly.
 *
 * <p>Not thread-safe except the verdict map (filled by the sidecar's threads).
 */
final class ClientSidecar implements AutoCloseable {
  static final String MACHINES = """
      machines:
        order:
          states: [created, paid, shipped, cancelled]
          terminal: [shipped, cancelled]
          events:
            create: {to: created}
            pay:    {from: [created], to: paid}
            ship:   {from: [paid], to: shipped}
            cancel: {from: [created], to: cancelled}
      """;

  final String suffix = ItEnv.uniqueSuffix();
  final String database = "og_it_" + suffix;
  final String redisPrefix = "og-it-client:" + suffix + ":";
  private final SidecarConfig config;
  private final Map<String, List<Verdict>> verdicts = new ConcurrentHashMap<>();
  private final Db probe;
  private GuardRuntime runtime;
  private Sidecar sidecar;
  private Metrics metrics;

  /**
   * @param routes the YAML list items under {@code routes:} (indented by two spaces)
   * @param mysqlPort where the sidecar finds MariaDB (a {@link TcpGate} in front of it, or the
   *     real port)
   */
  private ClientSidecar(String name, String sidecarExtra, String routes, int mysqlPort) {
    String yaml = """
        sidecar:
          instance-id: %s
          grpc-listen: 127.0.0.1:0
          shutdown-timeout: 3s
          commit-interval: 200ms
        %s
        kafka:
          bootstrap-servers: %s
          properties:
            session.timeout.ms: "10000"
        mysql:
          host: %s
          port: %d
          user: %s
          password: '%s'
          database: %s
          pool-size: 4
        redis:
          uri: %s
          key-prefix: '%s'
          timeout: 200ms
        %s
        routes:
        %s
        """.formatted(name, sidecarExtra.indent(2).stripTrailing(), ItEnv.kafkaBootstrap(), ItEnv.mysqlHost(), mysqlPort, ItEnv.mysqlUser(), ItEnv.mysqlPassword(), database,
        ItEnv.redisUri(), redisPrefix, MACHINES, routes);
    this.config = new ConfigReader(Map.of()).parse(yaml, name);
    this.probe = new Db(new MysqlConfig(ItEnv.mysqlHost(), ItEnv.mysqlPort(), ItEnv.mysqlDatabase(), ItEnv.mysqlUser(),
        ItEnv.mysqlPassword(), "og_", 2, false, Duration.ofDays(1)));
  }

  static ClientSidecar start(String name, String routes) throws IOException {
    return start(name, routes, ItEnv.mysqlPort());
  }

  static ClientSidecar start(String name, String routes, int mysqlPort) throws IOException {
    return start(name, "", routes, mysqlPort);
  }

  /** @param sidecarExtra more settings of the {@code sidecar} section (unindented YAML) */
  static ClientSidecar start(String name, String sidecarExtra, String routes, int mysqlPort) throws IOException {
    ClientSidecar s = new ClientSidecar(name, sidecarExtra, routes, mysqlPort);
    try {
      s.runtime = new GuardRuntime(s.config, Clock.SYSTEM);
      s.sidecar = new Sidecar(s.config, s.runtime.processors((r, v, forwarded) ->
          s.verdicts.computeIfAbsent(coordinates(r), k -> new CopyOnWriteArrayList<>()).add(v)), s.runtime.services());
      s.sidecar.start();
      return s;
    } catch (IOException | RuntimeException e) {
      s.close();
      throw e;
    }
  }

  SidecarConfig config() {
    return config;
  }

  /** {@code 127.0.0.1:<port>} of the sidecar's gRPC server (Guard, Deliveries, Health). */
  String target() {
    return "127.0.0.1:" + sidecar.grpcPort();
  }

  /**
   * The guard's metrics as {@code GET /metrics} renders them ({@link GuardRuntime#registerMetrics},
   * registered on first use). Thread-safe.
   */
  synchronized String scrape() {
    if (metrics == null) {
      metrics = new Metrics();
      runtime.registerMetrics(metrics);
    }
    return metrics.scrape();
  }

  /** Final verdicts of the Kafka path so far, by {@code topic/partition@offset}. */
  Map<String, List<Verdict>> verdicts() {
    return Map.copyOf(verdicts);
  }

  boolean decidedAll(Collection<String> coordinates) {
    return verdicts.keySet().containsAll(coordinates);
  }

  static String coordinates(String topic, int partition, long offset) {
    return topic + "/" + partition + "@" + offset;
  }

  static String coordinates(ConsumerRecord<?, ?> r) {
    return coordinates(r.topic(), r.partition(), r.offset());
  }

  static String coordinates(RecordMetadata m) {
    return coordinates(m.topic(), m.partition(), m.offset());
  }

  static String header(ConsumerRecord<?, ?> r, String name) {
    Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  /** A row of {@code og_entity}, or null. */
  record EntityRow(String state, String prevState, long version, String pendingKey) {}

  EntityRow entity(String entityId) {
    List<List<Object>> rows = rows("SELECT state, prev_state, version, pending_key FROM " + database
        + ".og_entity WHERE machine = 'order' AND entity_id = ?", entityId);
    if (rows.isEmpty()) {
      return null;
    }
    List<Object> r = rows.get(0);
    return new EntityRow((String) r.get(0), (String) r.get(1), ((Number) r.get(2)).longValue(), (String) r.get(3));
  }

  /** {@code event status attempts} of the entity's ledger rows, in creation order. */
  List<String> ledger(String route, String entityId) {
    List<String> out = new ArrayList<>();
    for (List<Object> r : rows("SELECT event, status, attempts FROM " + database
        + ".og_ledger WHERE route = ? AND entity_id = ? ORDER BY created_at, event", route, entityId)) {
      out.add(r.get(0) + " " + r.get(1) + " " + r.get(2));
    }
    return out;
  }

  /** Every row of a query on the probe's own connection (never through a {@link TcpGate}). */
  List<List<Object>> rows(String sql, Object... args) {
    return probe.select(sql, args);
  }

  /** Stops the sidecar (drain), closes the runtime, drops the database and the Redis keys. */
  @Override
  public void close() {
    try {
      if (sidecar != null) {
        sidecar.close();
      }
    } finally {
      try {
        if (runtime != null) {
          runtime.close();
        }
      } finally {
        try {
          synchronized (this) {
            if (metrics != null) {
              metrics.close();
            }
          }
          probe.execute("DROP DATABASE IF EXISTS " + database);
        } finally {
          probe.close();
          ItEnv.deleteRedisKeys(redisPrefix);
        }
      }
    }
  }

}
