package dev.onceguard.demo;

import java.util.Map;

/**
 * Where the demo's services are: from the environment that {@code scripts/stack.sh} writes
 * ({@code .stack/env}), plus the demo's own database name and Redis key prefix.
 */
record Settings(String kafkaBootstrap, String mysqlHost, int mysqlPort, String mysqlUser, String database, String redisUri,
    String redisPrefix) {

  static final String DEFAULT_DATABASE = "onceguard_demo";
  static final String DEFAULT_REDIS_PREFIX = "og-demo:";

  static Settings fromEnv(Map<String, String> env, Map<String, String> options) {
    String bootstrap = env.get("ONCEGUARD_KAFKA_BOOTSTRAP");
    if (bootstrap == null || bootstrap.isBlank()) {
      throw new DemoFailure("ONCEGUARD_KAFKA_BOOTSTRAP is not set: run `make demo`, or `scripts/stack.sh up` and "
          + "`set -a; . .stack/env; set +a` first");
    }
    return new Settings(
        bootstrap.trim(),
        env.getOrDefault("ONCEGUARD_MYSQL_HOST", "127.0.0.1"),
        Integer.parseInt(env.getOrDefault("ONCEGUARD_MYSQL_PORT", "3306")),
        env.getOrDefault("ONCEGUARD_MYSQL_USER", "root"),
        options.getOrDefault("database", DEFAULT_DATABASE),
        env.getOrDefault("ONCEGUARD_REDIS_URI", "redis://127.0.0.1:6379"),
        options.getOrDefault("redis-prefix", DEFAULT_REDIS_PREFIX));
  }
}
