package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.store.Source;
import static dev.onceguard.proxy.guard.OrderRoute.OWNER;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.time.FakeTime;
import dev.onceguard.v1.Reason;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/** Which routes' DONE rows a transition applied already is compared with. */
class GuardAppliedRowsTest {
  private static final SidecarConfig CONFIG = new ConfigReader(Map.of()).parse("""
      kafka:
        bootstrap-servers: 127.0.0.1:9
      mysql:
        database: test
      machines:
        order:
          states: [created, paid]
          events:
            create: { to: created }
            pay:    { from: [created], to: paid }
        payment:
          states: [created, paid]
          events:
            create: { to: created }
            pay:    { from: [created], to: paid }
      routes:
        - { name: orders, topics: [orders], machine: order, entity-id: /id, event: /event, business-key: [/id], target: 127.0.0.1:7000 }
        - { name: payments, topics: [payments], machine: payment, entity-id: /id, event: /event, business-key: [/id], target: 127.0.0.1:7000 }
        - { name: orders-api, topics: [orders-api], machine: order, entity-id: /id, event: /event, business-key: [/id], target: 127.0.0.1:7000 }
      """, "test.yaml");

  private final FakeTime time = new FakeTime(1_000_000L);
  private final FakeGuardStore store = new FakeGuardStore().entity("e-1", "paid");

  private ClaimResult claimPay(Guard g, RouteConfig route) {
    var e = ((Extraction.Ok) new Extractor(route, CONFIG.machines().get(route.machine()))
        .extract(null, "{\"id\":\"e-1\",\"event\":\"pay\"}".getBytes(StandardCharsets.UTF_8), new RecordHeaders())).event();
    return g.claim(route, e, new Source(route.intake().topics().get(0), 0, 1)).toCompletableFuture().join();
  }

  @Test
  void appliedRows_areReadOnTheRoutesOfTheClaimsMachineOnly() {
    Guard g = new Guard(store, IdempotencyCache.DISABLED, CONFIG.machines(), CONFIG.routes(), time, OWNER, time);

    ClaimResult r = claimPay(g, CONFIG.routes().get(0));

    assertThat(((ClaimResult.Rejected) r).verdict().getReason()).isEqualTo(Reason.CONFLICTING_FACT);
    assertThat(store.appliedRowsRoutes).containsExactly(List.of("orders", "orders-api"));
  }

  @Test
  void appliedRows_withoutConfiguredRoutes_areReadOnTheClaimingRouteOnly() {
    Guard g = new Guard(store, IdempotencyCache.DISABLED, CONFIG.machines(), time, OWNER, time);

    claimPay(g, CONFIG.routes().get(1));

    assertThat(store.appliedRowsRoutes).containsExactly(List.of("payments"));
  }
}
