package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.guard.ClaimPreview;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.MysqlGuardStore;
import java.util.List;

/**
 * {@link ClaimPreview.Facts} read from the sidecar's MySQL store, blocking on each read: the
 * command line's preview of a route's claims. Reads only.
 */
final class StorePreview implements ClaimPreview.Facts {
  private final MysqlGuardStore store;

  private StorePreview(MysqlGuardStore store) {
    this.store = store;
  }

  /** A preview of {@code route}'s claims against {@code store} (owned by the caller). */
  static ClaimPreview of(SidecarConfig cfg, RouteConfig route, MysqlGuardStore store) {
    List<String> machineRoutes = route.hasMachine()
        ? cfg.routes().stream().filter(x -> route.machine().equals(x.machine())).map(RouteConfig::name).toList() : List.of(route.name());
    return new ClaimPreview(route, route.hasMachine() ? cfg.machines().get(route.machine()) : null, machineRoutes,
        new StorePreview(store));
  }

  @Override
  public LedgerRow ledgerRow(String route, String dedupKey) {
    return store.ledgerRow(route, dedupKey).toCompletableFuture().join();
  }

  @Override
  public EntityRow entity(String machine, String entityId) {
    return store.entityRow(machine, entityId).toCompletableFuture().join();
  }

  @Override
  public List<LedgerRow> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit) {
    return store.appliedRows(routes, entityId, event, fingerprint, limit).toCompletableFuture().join();
  }
}
