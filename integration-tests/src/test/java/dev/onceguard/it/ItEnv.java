package dev.onceguard.it;

import io.lettuce.core.RedisClient;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;

/**
 * Where the integration tests find their services, from the environment that {@code make test}
 * (through {@code scripts/stack.sh}) exports. MariaDB and Redis default to the machine's local
 * services; Kafka has no default, because no broker runs unless the stack started one.
 */
public final class ItEnv {
  private ItEnv() {}

  public static final String KAFKA_BOOTSTRAP = "ONCEGUARD_KAFKA_BOOTSTRAP";

  /**
   * @throws IllegalStateException naming the fix when no broker is configured
   */
  public static String kafkaBootstrap() {
    String v = System.getenv(KAFKA_BOOTSTRAP);
    if (v == null || v.isBlank()) {
      throw new IllegalStateException(KAFKA_BOOTSTRAP + " is not set: run via `make test`, which starts a broker "
          + "(or `scripts/stack.sh up` and `set -a; . .stack/env; set +a` before mvn)");
    }
    return v.trim();
  }

  public static String mysqlHost() {
    return env("ONCEGUARD_MYSQL_HOST", "127.0.0.1");
  }

  public static int mysqlPort() {
    return Integer.parseInt(env("ONCEGUARD_MYSQL_PORT", "3306"));
  }

  public static String mysqlUser() {
    return env("ONCEGUARD_MYSQL_USER", "root");
  }

  /** Empty by default (the local MariaDB's root has no password). */
  public static String mysqlPassword() {
    String v = System.getenv("ONCEGUARD_MYSQL_PASSWORD");
    return v == null ? "" : v;
  }

  public static String mysqlDatabase() {
    return env("ONCEGUARD_MYSQL_DATABASE", "test");
  }

  public static String redisUri() {
    return env("ONCEGUARD_REDIS_URI", "redis://127.0.0.1:6379");
  }

  /** Deletes every key under {@code prefix} on the stack's Redis; returns how many there were. */
  public static long deleteRedisKeys(String prefix) {
    return deleteRedisKeys(redisUri(), prefix);
  }

  /** Deletes every key under {@code prefix} on the Redis at {@code uri}; returns how many there were. */
  public static long deleteRedisKeys(String uri, String prefix) {
    RedisClient client = RedisClient.create(uri);
    try (StatefulRedisConnection<String, String> conn = client.connect()) {
      RedisCommands<String, String> cmd = conn.sync();
      long n = 0;
      ScanCursor cursor = ScanCursor.INITIAL;
      do {
        var page = cmd.scan(cursor, ScanArgs.Builder.matches(prefix + "*").limit(1000));
        if (!page.getKeys().isEmpty()) {
          n += cmd.del(page.getKeys().toArray(new String[0]));
        }
        cursor = page;
      } while (!cursor.isFinished());
      return n;
    } finally {
      client.shutdown();
    }
  }

  /** 8 random hex digits, to make topic and group names unique per test run. */
  public static String uniqueSuffix() {
    return UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  }

  private static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? def : v.trim();
  }
}
