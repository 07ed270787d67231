package dev.onceguard.proxy;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import java.util.Map;

/** Small valid configurations for unit tests, parsed by the real {@link ConfigReader}. */
public final class TestConfigs {
  private TestConfigs() {}

  /** One push route {@code orders} on topic {@code orders}; {@code extra} is appended to the route (indented 4). */
  public static SidecarConfig oneRoute(String extraRouteYaml, String extraKafkaProperties) {
    String yaml = """
        sidecar:
          instance-id: test-1
          grpc-listen: 127.0.0.1:0
        kafka:
          bootstrap-servers: 127.0.0.1:9
        %s
        mysql:
          database: test
        routes:
          - name: orders
            topics: [orders]
            business-key: [/order_id]
            target: 127.0.0.1:7000
        %s
        """.formatted(extraKafkaProperties.isEmpty() ? "" : "  properties:\n" + extraKafkaProperties.indent(4).stripTrailing(),
        extraRouteYaml.indent(4).stripTrailing());
    return new ConfigReader(Map.of()).parse(yaml, "test.yaml");
  }

  public static SidecarConfig oneRoute() {
    return oneRoute("", "");
  }
}
