package dev.onceguard.bench;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.store.Db;
import io.lettuce.core.KeyScanCursor;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;

/**
 * Where the services are, from the environment {@code make bench} exports (scripts/stack.sh), and
 * the sidecar configuration of each scenario.
 */
record Env(String kafkaBootstrap, String mysqlHost, int mysqlPort, String mysqlUser, String mysqlPassword, String mysqlDatabase,
    String redisUri) {

  static Env fromEnvironment() {
    String kafka = System.getenv("ONCEGUARD_KAFKA_BOOTSTRAP");
    if (kafka == null || kafka.isBlank()) {
      throw new IllegalStateException("ONCEGUARD_KAFKA_BOOTSTRAP is not set: run `make bench`, which starts a broker");
    }
    return new Env(kafka.trim(), env("ONCEGUARD_MYSQL_HOST", "127.0.0.1"), Integer.parseInt(env("ONCEGUARD_MYSQL_PORT", "3306")),
        env("ONCEGUARD_MYSQL_USER", "root"), System.getenv().getOrDefault("ONCEGUARD_MYSQL_PASSWORD", ""),
        env("ONCEGUARD_MYSQL_DATABASE", "test"), env("ONCEGUARD_REDIS_URI", "redis://127.0.0.1:6379"));
  }

  private static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? def : v.trim();
  }

  /**
   * One sidecar's configuration: a single route over {@code topic}, guarded runs with their own
   * database and Redis key prefix.
   *
   * @param machine whether the route has the state machine (L3)
   * @param redis the L1 URI, this environment's Redis unless a scenario points it elsewhere
   * @param grpcListen the sidecar's own gRPC address ({@code 127.0.0.1:0} in process)
   */
  String yaml(boolean machine, String topic, String database, String target, int poolSize, String redis, String grpcListen) {
    return yaml(machine, topic, database, target, poolSize, redis, grpcListen, null);
  }

  /** As above, with the admin HTTP listener ({@code sidecar.admin-listen}) on {@code adminListen} unless null. */
  String yaml(boolean machine, String topic, String database, String target, int poolSize, String redis, String grpcListen,
      String adminListen) {
    String db = database == null ? mysqlDatabase : database;
    return """
        sidecar: {instance-id: bench, grpc-listen: '%s', commit-interval: 500ms%s}
        kafka: {bootstrap-servers: %s}
        mysql: {host: %s, port: %d, user: %s, password: '%s', database: %s, pool-size: %d}
        redis: {uri: '%s', key-prefix: '%s'}
        machines:
          order:
            states: [created, done]
            events:
              create: {to: created}
              finish: {from: [created], to: done}
        routes:
          - name: bench
            topics: [%s]
            group: %s
        %s    business-key: [/id, /sku_id, /warehouse_id, /batch_no]
            fingerprint-exclude: [/note]
            target: %s
            redis-ttl: 1h
        """.formatted(grpcListen, adminListen == null ? "" : ", admin-listen: '" + adminListen + "'", kafkaBootstrap, mysqlHost,
        mysqlPort, mysqlUser, mysqlPassword.replace("'", "''"), db, poolSize, redis, keyPrefix(db), topic, topic + "-group",
        machine ? "    machine: order\n    entity-id: /id\n    event: /event\n" : "", target);
  }

  /** A JDBC URL of this environment's MySQL, for {@code database}. */
  String jdbcUrl(String database) {
    return "jdbc:mariadb://" + mysqlHost + ":" + mysqlPort + "/" + database;
  }

  /**
   * Drops a run's database and deletes its L1 keys ({@link #yaml}'s key prefix): a full run writes
   * about 1.3 million keys, which would otherwise sit in the machine's shared Redis until their
   * TTL.
   */
  void dropDatabase(String database) {
    Db db = new Db(new MysqlConfig(mysqlHost, mysqlPort, mysqlDatabase, mysqlUser, mysqlPassword, "og_", 1, false, Duration.ofDays(1)));
    try {
      db.execute("DROP DATABASE IF EXISTS " + database);
    } finally {
      db.close();
      try {
        deleteRedisKeys(keyPrefix(database));
      } catch (RuntimeException e) {
        // the keys expire by their TTL anyway; the run's figures stand
        System.err.println("bench: could not delete the L1 keys of " + database + ": " + e);
      }
    }
  }

  /** The L1 key prefix of the sidecars {@link #yaml} configures for {@code database}. */
  static String keyPrefix(String database) {
    return "ogbench:" + database + ":";
  }

  /** Deletes this environment's Redis keys under {@code prefix} (SCAN, then UNLINK page by page). */
  void deleteRedisKeys(String prefix) {
    RedisClient client = RedisClient.create(redisUri);
    try (StatefulRedisConnection<String, String> conn = client.connect()) {
      RedisCommands<String, String> redis = conn.sync();
      ScanCursor at = ScanCursor.INITIAL;
      do {
        KeyScanCursor<String> page = redis.scan(at, ScanArgs.Builder.matches(prefix + "*").limit(5000));
        if (!page.getKeys().isEmpty()) {
          redis.unlink(page.getKeys().toArray(String[]::new));
        }
        at = page;
      } while (!at.isFinished());
    } finally {
      client.shutdown();
    }
  }
}
