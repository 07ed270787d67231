package dev.onceguard.it;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import java.util.Map;

/**
 * The YAML of a sidecar with one push route, as an operator would write it, parsed by the real
 * {@link ConfigReader}. Timings are short so that tests stay fast. The route has no machine (L1 +
 * L2 only) and a name unique to this config, so that its ledger rows and Redis keys never meet
 * those of another run in the shared {@code test} database.
 */
public final class ForwardConfig {
  private String topic;
  private String group;
  private String target;
  private String shutdownTimeout = "10s";
  private String commitInterval = "200ms";
  private String handlerTimeout = "5s";
  private int maxInFlightPerPartition = 64;
  private int maxInFlight = 512;
  private String grpcListen = "127.0.0.1:0";
  private final String routeName = "fwd-" + ItEnv.uniqueSuffix();

  /** The route's name, unique to this config. */
  public String routeName() {
    return routeName;
  }

  public static ForwardConfig route(String topic, String group, String target) {
    ForwardConfig c = new ForwardConfig();
    c.topic = topic;
    c.group = group;
    c.target = target;
    return c;
  }

  public ForwardConfig shutdownTimeout(String d) {
    shutdownTimeout = d;
    return this;
  }

  public ForwardConfig commitInterval(String d) {
    commitInterval = d;
    return this;
  }

  public ForwardConfig handlerTimeout(String d) {
    handlerTimeout = d;
    return this;
  }

  public ForwardConfig inFlight(int perPartition, int total) {
    maxInFlightPerPartition = perPartition;
    maxInFlight = total;
    return this;
  }

  public ForwardConfig grpcListen(String hostPort) {
    grpcListen = hostPort;
    return this;
  }

  public String yaml() {
    return """
        sidecar:
          instance-id: it-%s
          grpc-listen: %s
          shutdown-timeout: %s
          commit-interval: %s
        kafka:
          bootstrap-servers: %s
          properties:
            session.timeout.ms: "10000"
        mysql:
          host: %s
          port: %d
          database: %s
        redis:
          uri: %s
        routes:
          - name: %s
            topics: [%s]
            group: %s
            business-key: [key]
            target: %s
            handler-timeout: %s
            redis-ttl: 10m
            max-in-flight-per-partition: %d
            max-in-flight: %d
            retry:
              initial-backoff: 50ms
              max-backoff: 500ms
        """.formatted(ItEnv.uniqueSuffix(), grpcListen, shutdownTimeout, commitInterval, ItEnv.kafkaBootstrap(),
        ItEnv.mysqlHost(), ItEnv.mysqlPort(), ItEnv.mysqlDatabase(), ItEnv.redisUri(),
        routeName, topic, group, target, handlerTimeout, maxInFlightPerPartition, maxInFlight);
  }

  public SidecarConfig build() {
    return new ConfigReader(Map.of()).parse(yaml(), "it-config");
  }
}
