package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.store.Source;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The reference order route for guard tests, parsed by the real {@link ConfigReader}: route
 * {@code orders} on topic {@code orders}, machine {@code order}, entity {@code /order_id}, event
 * {@code /event}, business key order id + event; every timing at its default (lease 30s,
 * early-arrival retry 200ms and timeout 60s, backoff from 100ms, 20 business attempts).
 */
final class OrderRoute {
  private OrderRoute() {}

  static final SidecarConfig CONFIG = new ConfigReader(Map.of()).parse("""
      sidecar:
        instance-id: test-1
        grpc-listen: 127.0.0.1:0
      kafka:
        bootstrap-servers: 127.0.0.1:9
      mysql:
        database: test
      machines:
        order:
          states: [created, paid, to_ship, shipped, delivered, cancelled]
          terminal: [delivered, cancelled]
          events:
            create:  { to: created }
            pay:     { from: [created], to: paid }
            prepare: { from: [paid], to: to_ship }
            ship:    { from: [to_ship], to: shipped }
            deliver: { from: [shipped], to: delivered }
            cancel:  { from: [created, paid, to_ship], to: cancelled }
      routes:
        - name: orders
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /event]
          target: 127.0.0.1:7000
      """, "test.yaml");

  static final RouteConfig ROUTE = CONFIG.routes().get(0);
  static final MachineConfig MACHINE = CONFIG.machines().get("order");
  static final String OWNER = "owner-me";

  /** A record of {@code event} on order {@code orderId}, on partition 0 at {@code offset}. */
  static ConsumerRecord<byte[], byte[]> record(long offset, String orderId, String event) {
    String value = "{\"order_id\":\"" + orderId + "\",\"event\":\"" + event + "\"}";
    return new ConsumerRecord<>("orders", 0, offset, orderId.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8));
  }

  /** What the route's extractor reads from {@code r}. */
  static ExtractedEvent extracted(ConsumerRecord<byte[], byte[]> r) {
    return ((Extraction.Ok) new Extractor(ROUTE, MACHINE).extract(r.key(), r.value(), r.headers())).event();
  }

  static Source source(ConsumerRecord<byte[], byte[]> r) {
    return new Source(r.topic(), r.partition(), r.offset());
  }
}
