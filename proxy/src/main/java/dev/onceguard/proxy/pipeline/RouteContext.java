package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.time.Scheduler;

/**
 * What the sidecar assembly hands a {@link ProcessorFactory} for one route. The resources are
 * shared and owned by the sidecar (it closes them after the route's consumer stopped); a processor
 * uses them and does not close them.
 *
 * @param dispatcher the route's push-mode dispatcher; {@code null} for a pull-mode route
 */
public record RouteContext(
    SidecarConfig sidecar,
    RouteConfig route,
    Dispatcher dispatcher,
    Scheduler scheduler,
    Clock clock,
    DeliveryIds deliveryIds) {}
