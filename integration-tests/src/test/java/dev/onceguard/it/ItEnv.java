package dev.onceguard.it;

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

  /** 8 random hex digits, to make topic and group names unique per test run. */
  public static String uniqueSuffix() {
    return UUID.randomUUID().toString().replace("-", "").substring(0, 8);
  }

  private static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? def : v.trim();
  }
}
