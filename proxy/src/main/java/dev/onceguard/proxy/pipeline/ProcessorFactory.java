package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.config.ConfigException;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.dispatch.Backoff;

/**
 * The one place that decides which {@link RecordProcessor} runs a route. The sidecar calls it once
 * per route at start-up, on the starting thread. A processor that implements
 * {@link AutoCloseable} is closed by the sidecar after its route's consumer stopped.
 *
 * @see #forwarding()
 */
@FunctionalInterface
public interface ProcessorFactory {

  /**
   * @throws ConfigException if the route cannot be served by this factory's processors (the
   *     sidecar then fails to start with that message)
   */
  RecordProcessor create(RouteContext context);

  /**
   * Forwards every record to the business without a guard ({@link ForwardingProcessor}). Push mode
   * only.
   */
  static ProcessorFactory forwarding() {
    return ctx -> {
      RouteConfig route = ctx.route();
      if (ctx.dispatcher() == null) {
        throw new ConfigException("routes[" + ctx.sidecar().routes().indexOf(route) + "].mode: route '"
            + route.name() + "' is in pull mode, which this version does not serve yet; use mode: push");
      }
      return new ForwardingProcessor(route, ctx.dispatcher(), ctx.scheduler(), Backoff.of(route.name(), route.delivery().retry()),
          ctx.deliveryIds());
    };
  }
}
