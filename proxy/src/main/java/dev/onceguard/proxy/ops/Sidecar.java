package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.ConfigException;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.config.UnixSocket;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.dispatch.GrpcDispatcher;
import dev.onceguard.proxy.pipeline.ConsumerProperties;
import dev.onceguard.proxy.pipeline.DeliveryIds;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.pipeline.RecordProcessor;
import dev.onceguard.proxy.pipeline.RouteConsumer;
import dev.onceguard.proxy.pipeline.RouteContext;
import dev.onceguard.proxy.security.ApiAuth;
import dev.onceguard.proxy.security.GrpcSecurity;
import dev.onceguard.proxy.security.UnixServer;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.time.ExecutorScheduler;
import io.grpc.BindableService;
import io.grpc.Server;
import io.grpc.ServerCredentials;
import io.grpc.ServerInterceptors;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The running sidecar: per route a {@link Dispatcher}, a {@link RecordProcessor} (from the
 * {@link ProcessorFactory}) and a {@link RouteConsumer}; and a gRPC server on
 * {@code sidecar.grpc-listen} ({@code host:port} or a Unix socket; TLS per {@code sidecar.tls})
 * serving the standard {@code grpc.health.v1.Health} service (overall service name {@code ""}, and
 * one per route name), open to all, plus any extra services given, which authenticate their
 * callers when {@code sidecar.auth} says so ({@link ApiAuth}).
 *
 * <p>Readiness: the overall service is {@code NOT_SERVING} until every route consumer has started,
 * then {@code SERVING}; back to {@code NOT_SERVING} first thing on {@link #close()} (before
 * draining, so traffic and orchestrators see it early) and as soon as any route consumer fails. A
 * route's service is {@code SERVING} only while the last {@link Probes#readiness()} report given
 * to {@link #routeReadiness} passed for that route, and {@code NOT_SERVING} from {@link #close()} on.
 *
 * <p>Threading: {@link #start()} and {@link #close()} are synchronized and blocking; the other
 * methods may be called from any thread. Ownership: creates and closes everything it starts
 * (consumers, dispatchers, the timer, the server, and processors that are {@link AutoCloseable});
 * the factory and the extra services belong to the caller.
 */
public final class Sidecar implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Sidecar.class);
  private static final long SERVER_GRACE_SECONDS = 5;
  /** Health service name for the sidecar as a whole. */
  public static final String HEALTH_SERVICE = "";

  private enum State { NEW, STARTED, CLOSED }

  private final SidecarConfig config;
  private final ProcessorFactory processors;
  private final List<BindableService> services;
  private final Clock clock;
  private final HealthStatusManager health = new HealthStatusManager();
  private final CompletableFuture<Throwable> failure = new CompletableFuture<>();
  private final List<Route> routes = new ArrayList<>();
  /** Route consumers by route name, for metrics read from any thread. */
  private final Map<String, RouteConsumer> consumers = new java.util.concurrent.ConcurrentHashMap<>();
  private State state = State.NEW;
  private ExecutorScheduler scheduler;
  private volatile Server server;
  /** Credentials of the server and the routes' channels; files watched until close. */
  private GrpcSecurity security;
  /** The event loops of a Unix socket server, or {@code null}. */
  private UnixServer unixServer;
  /** Set once every route consumer started; read by probes. */
  private volatile boolean consuming;
  /** Set first thing in {@link #close()}; route health is written only while false, under {@link #health}. */
  private volatile boolean closing;

  public Sidecar(SidecarConfig config, ProcessorFactory processors) {
    this(config, processors, List.of());
  }

  /** @param services extra gRPC services served next to health (the Guard API, pull deliveries) */
  public Sidecar(SidecarConfig config, ProcessorFactory processors, List<BindableService> services) {
    this.config = config;
    this.processors = processors;
    this.services = List.copyOf(services);
    this.clock = Clock.SYSTEM;
  }

  /**
   * Binds the gRPC server, builds every route and starts consuming. On failure everything started
   * so far is closed again.
   *
   * @throws ConfigException if a route cannot be built from the configuration (message names it)
   * @throws IOException if the gRPC port cannot be bound
   */
  public synchronized void start() throws IOException {
    if (state != State.NEW) {
      throw new IllegalStateException("sidecar already " + state.name().toLowerCase(java.util.Locale.ROOT));
    }
    state = State.STARTED;
    try {
      health.setStatus(HEALTH_SERVICE, ServingStatus.NOT_SERVING);
      config.routes().forEach(rc -> health.setStatus(rc.name(), ServingStatus.NOT_SERVING));
      security = new GrpcSecurity(config.security().reloadInterval());
      server = startServer();
      scheduler = new ExecutorScheduler("onceguard-timer");
      DeliveryIds ids = DeliveryIds.random();
      for (RouteConfig rc : config.routes()) {
        Route r = new Route(rc);
        // registered before it is complete, so that a failure half-way still closes its parts
        routes.add(r);
        build(r, ids);
      }
      for (Route r : routes) {
        r.consumer.start();
        r.consumer.terminated().whenComplete((v, e) -> {
          if (e != null) {
            routeFailed(r.config, e);
          }
        });
      }
      health.setStatus(HEALTH_SERVICE, ServingStatus.SERVING);
      consuming = true;
      log.info("sidecar {} started: {} route(s), gRPC on {}{}", config.instanceId(), routes.size(),
          UnixSocket.is(config.grpcListen()) ? config.grpcListen() : hostOf(config.grpcListen()) + ":" + server.getPort(),
          config.security().tls() == null ? "" : " (TLS" + (config.security().tls().caFile() == null ? ")" : ", client certificates required)"));
    } catch (IOException | RuntimeException e) {
      closeResources();
      state = State.CLOSED;
      throw e;
    }
  }

  private Server startServer() throws IOException {
    SidecarConfig.ApiSecurity sec = config.security();
    ServerCredentials credentials;
    try {
      credentials = security.serverCredentials(sec.tls());
    } catch (IOException e) {
      throw new ConfigException("sidecar.tls: " + e.getMessage(), e);
    }
    NettyServerBuilder b;
    if (UnixSocket.is(config.grpcListen())) {
      try {
        unixServer = UnixServer.bind(UnixSocket.pathOf(config.grpcListen()), credentials);
      } catch (IOException e) {
        throw listenFailure(e);
      }
      b = unixServer.builder();
    } else {
      String host = hostOf(config.grpcListen());
      int port = Integer.parseInt(config.grpcListen().substring(config.grpcListen().lastIndexOf(':') + 1));
      b = NettyServerBuilder.forAddress(new InetSocketAddress(host, port), credentials);
    }
    b.addService(health.getHealthService());
    ApiAuth auth = null;
    if (sec.tokenFile() != null && sec.tls() == null && !UnixSocket.is(config.grpcListen())
        && !isLoopback(hostOf(config.grpcListen()))) {
      log.warn("sidecar.auth.token-file is set but sidecar.grpc-listen {} is not loopback and sidecar.tls is not set: the bearer "
          + "token crosses the network in plaintext (fine only if a service mesh encrypts it)", config.grpcListen());
    }
    if (sec.authenticates()) {
      try {
        auth = new ApiAuth(sec.tokenFile() == null ? null : security.token(sec.tokenFile()), sec.allowedClients());
      } catch (IOException e) {
        throw new ConfigException("sidecar.auth.token-file: " + e.getMessage(), e);
      }
    }
    for (BindableService s : services) {
      // health stays open (probes); the Guard API and Deliveries authenticate when configured
      b.addService(auth == null ? s.bindService() : ServerInterceptors.intercept(s, auth));
    }
    try {
      io.grpc.Server server = b.build().start();
      if (unixServer != null) {
        try {
          unixServer.openToGroup(UnixSocket.pathOf(config.grpcListen()));
        } catch (IOException e) {
          // serving already; only the socket's owner can connect
          log.warn("could not make {} group-writable: {}", config.grpcListen(), e.toString());
        }
      }
      return server;
    } catch (IOException e) {
      throw listenFailure(e);
    }
  }

  private IOException listenFailure(IOException e) {
    return new IOException("cannot listen on sidecar.grpc-listen " + config.grpcListen() + ": " + e.getMessage(), e);
  }

  private void build(Route r, DeliveryIds ids) {
    RouteConfig rc = r.config;
    if (rc.delivery().mode() == RouteConfig.Mode.PUSH) {
      try {
        r.dispatcher = GrpcDispatcher.forTarget(rc.delivery().target(), security.channelCredentials(rc.delivery().tls()),
            rc.delivery().tls() == null ? null : rc.delivery().tls().authority());
      } catch (IOException e) {
        throw new ConfigException("routes (route '" + rc.name() + "').target-tls: " + e.getMessage(), e);
      }
    }
    r.processor = processors.create(new RouteContext(config, rc, r.dispatcher, scheduler, clock, ids));
    ConsumerProperties props = ConsumerProperties.of(config, rc);
    props.ignored().forEach(log::warn);
    KafkaConsumer<byte[], byte[]> kc;
    try {
      kc = new KafkaConsumer<>(props.values());
    } catch (org.apache.kafka.common.KafkaException e) {
      // a bad kafka.properties value is a configuration error; Kafka may wrap it
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t instanceof org.apache.kafka.common.config.ConfigException ce) {
          throw new ConfigException("kafka.properties (route '" + rc.name() + "'): " + ce.getMessage(), e);
        }
      }
      throw e;
    }
    r.consumer = new RouteConsumer(RouteConsumer.Settings.of(config, rc), kc, r.processor, clock);
    consumers.put(rc.name(), r.consumer);
  }

  private void routeFailed(RouteConfig rc, Throwable e) {
    health.setStatus(HEALTH_SERVICE, ServingStatus.NOT_SERVING);
    health.setStatus(rc.name(), ServingStatus.NOT_SERVING);
    log.error("route {} stopped after a failure; readiness is NOT_SERVING", rc.name());
    failure.complete(e);
  }

  /** True once every route consumer has started (also while draining afterwards). Any thread. */
  public boolean consuming() {
    return consuming;
  }

  /** True from the start of {@link #close()} on: readiness is off, the routes drain. Any thread. */
  public boolean draining() {
    return closing;
  }

  /** The route's consumer now, or {@code null} when it is not running. Any thread. */
  public ProbeFacts.RouteFacts routeFacts(String route) {
    RouteConsumer c = consumers.get(route);
    if (c == null) {
      return null;
    }
    java.util.concurrent.CompletableFuture<Void> t = c.terminated().toCompletableFuture();
    Throwable failure = null;
    if (t.isCompletedExceptionally()) {
      try {
        t.join();
      } catch (java.util.concurrent.CompletionException | java.util.concurrent.CancellationException e) {
        failure = e.getCause() == null ? e : e.getCause();
      }
    }
    return new ProbeFacts.RouteFacts(c.inGroup(), c.assignedPartitions(), c.lastTurnAtMillis(), failure);
  }

  /**
   * Sets each route's gRPC health service from {@code report}: {@code SERVING} when the route is
   * ready ({@link Probes.Report#routeOk}). Ignored once closing. Any thread.
   */
  public void routeReadiness(Probes.Report report) {
    synchronized (health) {
      if (closing) {
        return;
      }
      for (RouteConfig rc : config.routes()) {
        health.setStatus(rc.name(), report.routeOk(rc.name()) ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
      }
    }
  }

  /** The port the gRPC server is bound to (useful when the configuration says port 0). */
  public int grpcPort() {
    Server server = this.server;
    if (server == null) {
      throw new IllegalStateException("not started");
    }
    return server.getPort();
  }

  /**
   * Registers per-route gauges: records in flight, held in memory, and paused partitions (they read
   * 0 while the route is not running); and per assigned partition, its uncommitted records, its lag
   * and the age of its oldest unfinished record (no rows while the route is not running).
   */
  public void registerGauges(Metrics metrics) {
    for (RouteConfig rc : config.routes()) {
      String route = rc.name();
      metrics.gauge("onceguard.route.in.flight", "records started and not finished (parked early arrivals included)", route,
          () -> read(route, RouteConsumer::running));
      metrics.gauge("onceguard.route.held", "records held in memory, started or waiting for their turn", route,
          () -> read(route, RouteConsumer::held));
      metrics.gauge("onceguard.route.paused.partitions", "partitions paused at their in-flight or uncommitted bound (backpressure)", route,
          () -> read(route, RouteConsumer::pausedPartitions));
      metrics.partitionGauge("onceguard.partition.uncommitted.records",
          "records taken at or after the partition's oldest unfinished one: what a crash now would deliver again", null, route,
          () -> readPartitions(route, RouteConsumer::uncommittedRecords));
      metrics.partitionGauge("onceguard.partition.oldest.unfinished.age",
          "since the partition's oldest unfinished record was taken (0 when none is unfinished); grows while a record is stuck",
          "seconds", route, () -> readPartitions(route, c -> secondsOf(c.oldestUnfinishedAgeMillis())));
      metrics.partitionGauge("onceguard.partition.lag",
          "records not finished in order: log end offset (as of the last fetch; it stands still while the partition is paused) "
              + "minus the consumer's position, plus the records taken and not committable",
          "records", route, () -> readPartitions(route, RouteConsumer::lagRecords));
    }
  }

  private Map<TopicPartition, ? extends Number> readPartitions(String route,
      java.util.function.Function<RouteConsumer, Map<TopicPartition, ? extends Number>> f) {
    RouteConsumer c = consumers.get(route);
    return c == null ? Map.of() : f.apply(c);
  }

  private static Map<TopicPartition, Double> secondsOf(Map<TopicPartition, Long> millis) {
    Map<TopicPartition, Double> out = new HashMap<>();
    millis.forEach((tp, ms) -> out.put(tp, ms / 1000.0));
    return out;
  }

  private int read(String route, java.util.function.ToIntFunction<RouteConsumer> f) {
    RouteConsumer c = consumers.get(route);
    return c == null ? 0 : f.applyAsInt(c);
  }

  /**
   * Completes with the cause when a route consumer failed (its route consumes nothing more; the
   * process should stop and be restarted). Never completes on a clean close.
   */
  public CompletionStage<Throwable> failure() {
    return failure;
  }

  /**
   * Readiness off, then drains every route in parallel (each up to {@code sidecar.shutdown-timeout}),
   * commits, and releases everything. Idempotent.
   */
  @Override
  public synchronized void close() {
    synchronized (health) {
      closing = true;
      if (state == State.STARTED) {
        health.setStatus(HEALTH_SERVICE, ServingStatus.NOT_SERVING);
        config.routes().forEach(rc -> health.setStatus(rc.name(), ServingStatus.NOT_SERVING));
      }
    }
    if (state != State.STARTED) {
      state = State.CLOSED;
      return;
    }
    state = State.CLOSED;
    log.info("sidecar stopping: readiness NOT_SERVING, draining {} route(s) (up to {})", routes.size(), config.shutdownTimeout());
    closeResources();
    log.info("sidecar stopped");
  }

  private void closeResources() {
    // stop all consumers first so that their drains overlap
    for (Route r : routes) {
      if (r.consumer != null) {
        r.consumer.requestStop();
      }
    }
    for (Route r : routes) {
      if (r.consumer != null) {
        r.consumer.close();
      }
      if (r.processor instanceof AutoCloseable c) {
        try {
          c.close();
        } catch (Exception e) {
          log.warn("route {}: closing the processor failed", r.config.name(), e);
        }
      }
      if (r.dispatcher != null) {
        r.dispatcher.close();
      }
    }
    routes.clear();
    consumers.clear();
    if (scheduler != null) {
      scheduler.close();
    }
    health.enterTerminalState();
    if (server != null) {
      server.shutdown();
      try {
        if (!server.awaitTermination(SERVER_GRACE_SECONDS, TimeUnit.SECONDS)) {
          server.shutdownNow();
          server.awaitTermination(SERVER_GRACE_SECONDS, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        server.shutdownNow();
        Thread.currentThread().interrupt();
      }
    }
    if (unixServer != null) {
      unixServer.close();
    }
    if (security != null) {
      security.close();
    }
  }

  private static String hostOf(String hostPort) {
    return hostPort.substring(0, hostPort.lastIndexOf(':'));
  }

  private static boolean isLoopback(String host) {
    String h = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
    return h.equals("localhost") || h.startsWith("127.") || h.equals("::1");
  }

  /** One route's parts; fields are null until built. */
  private static final class Route {
    final RouteConfig config;
    Dispatcher dispatcher;
    RecordProcessor processor;
    RouteConsumer consumer;

    Route(RouteConfig config) {
      this.config = config;
    }
  }
}
