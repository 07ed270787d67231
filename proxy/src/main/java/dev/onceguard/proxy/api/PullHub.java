package dev.onceguard.proxy.api;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.DeliveriesGrpc;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.SubscribeRequest;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pull mode: serves {@code Deliveries.Subscribe} and is the {@link Dispatcher} of every pull route.
 * The guarded processor hands an accepted delivery to {@link #dispatcher(String)} exactly as it
 * would call a push target; the hub queues it, sends it to a subscriber of the route that has room
 * in its window, and completes the dispatch with the subscriber's ack (OK / RETRY / REJECT drive
 * confirm / retry / abort like push mode).
 *
 * <p>A delivery sent to a stream that ends, or not acknowledged within the route's
 * {@code handler-timeout}, goes back to the front of the queue, flagged {@code redelivery = true},
 * for the next subscriber; a late ack for it is ignored. While a route has no subscriber its
 * deliveries wait — their partitions fill their in-flight bound and pause.
 *
 * <p>Thread-safe: each route's state is guarded by its own lock; sends happen under it (gRPC
 * stream observers are not thread-safe).
 */
public final class PullHub extends DeliveriesGrpc.DeliveriesImplBase implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PullHub.class);
  /** Window when the subscriber asks for 0. */
  public static final int DEFAULT_WINDOW = 32;

  private final Map<String, RouteHub> hubs = new HashMap<>();
  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "onceguard-pull-timer");
    t.setDaemon(true);
    return t;
  });

  public PullHub(SidecarConfig config) {
    for (RouteConfig r : config.routes()) {
      if (r.mode() == RouteConfig.Mode.PULL) {
        hubs.put(r.name(), new RouteHub(r));
      }
    }
  }

  /** The dispatcher of a pull route; the hub owns it (closing it does nothing). */
  public Dispatcher dispatcher(String route) {
    RouteHub h = hubs.get(route);
    if (h == null) {
      throw new IllegalArgumentException("route '" + route + "' is not in pull mode");
    }
    return h;
  }

  /** Subscribers currently connected to {@code route}. */
  public int subscribers(String route) {
    RouteHub h = hubs.get(route);
    if (h == null) {
      return 0;
    }
    synchronized (h) {
      return h.subscribers.size();
    }
  }

  @Override
  public StreamObserver<SubscribeRequest> subscribe(StreamObserver<Delivery> out) {
    ServerCallStreamObserver<Delivery> stream = (ServerCallStreamObserver<Delivery>) out;
    Subscriber sub = new Subscriber(stream);
    stream.setOnReadyHandler(() -> {
      RouteHub h = sub.hub;
      if (h != null) {
        h.pump();
      }
    });
    stream.setOnCancelHandler(() -> sub.gone("cancelled by the client"));
    return new StreamObserver<>() {
      @Override
      public void onNext(SubscribeRequest req) {
        if (req.hasSubscription()) {
          if (sub.hub != null) {
            sub.fail(Status.FAILED_PRECONDITION.withDescription("already subscribed"));
            return;
          }
          RouteHub h = hubs.get(req.getSubscription().getRoute());
          if (h == null) {
            sub.fail(Status.INVALID_ARGUMENT.withDescription("route '" + req.getSubscription().getRoute()
                + "' is not configured in pull mode (pull routes: " + hubs.keySet() + ")"));
            return;
          }
          sub.window = req.getSubscription().getWindow() == 0 ? DEFAULT_WINDOW : (int) Math.min(req.getSubscription().getWindow(), 10_000);
          sub.name = req.getSubscription().getSubscriber();
          h.add(sub);
        } else if (req.hasAck()) {
          if (sub.hub == null) {
            sub.fail(Status.FAILED_PRECONDITION.withDescription("the first message must be a Subscription"));
            return;
          }
          sub.hub.ack(sub, req.getAck());
        }
      }

      @Override
      public void onError(Throwable t) {
        sub.gone("stream error: " + Status.fromThrowable(t));
      }

      @Override
      public void onCompleted() {
        sub.gone("closed by the client");
        synchronized (sub) {
          if (!sub.closed) {
            sub.closed = true;
            stream.onCompleted();
          }
        }
      }
    };
  }

  /** One queued or outstanding delivery. */
  private static final class Pending {
    Delivery delivery;
    final CompletableFuture<DispatchResult> result = new CompletableFuture<>();
    Subscriber sentTo;
    ScheduledFuture<?> timeout;

    Pending(Delivery d) {
      this.delivery = d;
    }
  }

  private final class Subscriber {
    final ServerCallStreamObserver<Delivery> stream;
    final Map<String, Pending> outstanding = new LinkedHashMap<>();
    RouteHub hub;
    int window;
    String name = "";
    boolean closed;

    Subscriber(ServerCallStreamObserver<Delivery> stream) {
      this.stream = stream;
    }

    void gone(String why) {
      RouteHub h = hub;
      if (h != null) {
        h.remove(this, why);
      }
    }

    /**
     * Ends the stream with an error. A subscribed stream first leaves its hub (its unacknowledged
     * deliveries are requeued) and is failed under the hub's lock, so that no send of
     * {@link RouteHub#pump} runs on it at the same time (stream observers are not thread-safe).
     */
    void fail(Status s) {
      RouteHub h = hub;
      if (h != null) {
        h.remove(this, "failed: " + s.getDescription());
        synchronized (h) {
          closeWithError(s);
        }
      } else {
        closeWithError(s);
      }
    }

    private void closeWithError(Status s) {
      synchronized (this) {
        if (closed) {
          return;
        }
        closed = true;
      }
      stream.onError(s.asRuntimeException());
    }
  }

  private final class RouteHub implements Dispatcher {
    final RouteConfig route;
    final ArrayDeque<Pending> queue = new ArrayDeque<>();
    final List<Subscriber> subscribers = new ArrayList<>();
    int next;

    RouteHub(RouteConfig route) {
      this.route = route;
    }

    @Override
    public CompletionStage<DispatchResult> dispatch(Delivery d, Duration timeout) {
      Pending p = new Pending(d);
      synchronized (this) {
        queue.addLast(p);
      }
      // a cancelled dispatch (record abandoned) leaves the queue
      p.result.whenComplete((r, e) -> {
        if (e != null) {
          synchronized (this) {
            queue.remove(p);
          }
        }
      });
      pump();
      return p.result;
    }

    synchronized void add(Subscriber s) {
      s.hub = this;
      subscribers.add(s);
      log.info("route {}: subscriber '{}' connected (window {}), {} connected", route.name(), s.name, s.window, subscribers.size());
      pump();
    }

    void remove(Subscriber s, String why) {
      synchronized (this) {
        if (!subscribers.remove(s)) {
          return;
        }
        // unacknowledged deliveries go back first in line, flagged: the business may have seen them
        List<Pending> back = new ArrayList<>(s.outstanding.values());
        s.outstanding.clear();
        for (int i = back.size() - 1; i >= 0; i--) {
          Pending p = back.get(i);
          if (p.timeout != null) {
            p.timeout.cancel(false);
          }
          if (!p.result.isDone()) {
            p.delivery = p.delivery.toBuilder().setRedelivery(true).build();
            p.sentTo = null;
            queue.addFirst(p);
          }
        }
        log.info("route {}: subscriber '{}' left ({}); {} unacknowledged deliveries requeued", route.name(), s.name, why, back.size());
      }
      pump();
    }

    synchronized void ack(Subscriber s, Ack ack) {
      Pending p = s.outstanding.remove(ack.getDeliveryId());
      if (p == null) {
        return; // unknown, timed out or already acked: ignore
      }
      if (p.timeout != null) {
        p.timeout.cancel(false);
      }
      DispatchResult r = switch (ack.getResult().getOutcome()) {
        case OK -> DispatchResult.ok();
        case REJECT -> DispatchResult.reject(ack.getResult().getMessage());
        case RETRY -> DispatchResult.retry(ack.getResult().getMessage(),
            Duration.ofMillis(Integer.toUnsignedLong(ack.getResult().getRetryAfterMs())));
        default -> DispatchResult.retry("subscriber acked without an outcome");
      };
      p.result.complete(r);
      pump();
    }

    /** Sends queued deliveries to subscribers with room, round robin. */
    synchronized void pump() {
      while (!queue.isEmpty() && !subscribers.isEmpty()) {
        Subscriber target = null;
        for (int i = 0; i < subscribers.size(); i++) {
          Subscriber s = subscribers.get((next + i) % subscribers.size());
          if (s.outstanding.size() < s.window && s.stream.isReady() && !s.closed) {
            target = s;
            next = (next + i + 1) % subscribers.size();
            break;
          }
        }
        if (target == null) {
          return;
        }
        Pending p = queue.pollFirst();
        if (p.result.isDone()) {
          continue;
        }
        p.sentTo = target;
        target.outstanding.put(p.delivery.getDeliveryId(), p);
        Subscriber t = target;
        p.timeout = timer.schedule(() -> expire(t, p), route.handlerTimeout().toMillis(), TimeUnit.MILLISECONDS);
        try {
          target.stream.onNext(p.delivery);
        } catch (RuntimeException e) {
          // the stream broke under us: the cancel handler requeues what it held
          log.debug("route {}: send failed: {}", route.name(), e.toString());
        }
      }
    }

    synchronized void expire(Subscriber s, Pending p) {
      if (s.outstanding.remove(p.delivery.getDeliveryId()) == null || p.result.isDone()) {
        return;
      }
      log.warn("route {}: delivery {} not acknowledged by '{}' within {} ms; retrying it", route.name(),
          p.delivery.getDeliveryId(), s.name, route.handlerTimeout().toMillis());
      // like a push deadline: the attempt may have been seen; the processor backs off, flags the
      // next attempt as a redelivery and gives up after retry.max-attempts
      p.result.complete(DispatchResult.retry("not acknowledged within " + route.handlerTimeout().toMillis() + " ms"));
      pump();
    }

    @Override
    public void close() {
      // the hub owns the route's state; nothing per dispatcher to release
    }
  }

  @Override
  public void close() {
    timer.shutdownNow();
    List<Subscriber> all = new ArrayList<>();
    for (RouteHub h : hubs.values()) {
      synchronized (h) {
        all.addAll(h.subscribers);
      }
    }
    // first end the streams (what they held is requeued), then answer everything queued
    all.forEach(s -> s.fail(Status.UNAVAILABLE.withDescription("sidecar stopping")));
    for (RouteHub h : hubs.values()) {
      List<Pending> left;
      synchronized (h) {
        left = new ArrayList<>(h.queue);
        h.queue.clear();
      }
      left.forEach(p -> p.result.complete(DispatchResult.retry("sidecar stopping")));
    }
  }
}
