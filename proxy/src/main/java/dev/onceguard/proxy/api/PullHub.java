package dev.onceguard.proxy.api;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.pipeline.Deliveries;
import dev.onceguard.proxy.time.Scheduler;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.DeliveriesGrpc;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.SubscribeRequest;
import dev.onceguard.v1.Verdict;
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
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pull mode: serves {@code Deliveries.Subscribe} and is the {@link Dispatcher} of every pull route.
 * The guarded processor hands an accepted delivery to {@link #dispatcher(String)} exactly as it
 * would call a push target; the hub queues it, sends it to a subscriber of the route that has room
 * in its window, and completes the dispatch with the subscriber's ack (OK / RETRY / REJECT drive
 * confirm / retry / abort like push mode).
 *
 * <p>A delivery sent to a stream that ends (error, cancel, completion) before acknowledging it, or
 * not acknowledged within the route's {@code handler-timeout}, is a failed attempt that the
 * business may have seen: its dispatch completes with {@link DispatchResult#retry(String)}
 * ({@code maybeDelivered}). The processor counts it towards {@code retry.max-attempts}, backs off
 * and dispatches the next attempt flagged {@code redelivery = true}, which goes to whichever
 * subscriber has room then; a late ack for the failed one is ignored. While a route has no
 * subscriber its deliveries wait — their partitions fill their in-flight bound and pause.
 *
 * <p>Escalation notices: a subscriber that sets {@code Subscription.escalations} also receives,
 * best effort, a {@link Delivery} with {@code escalation} set for each record of the route that
 * was escalated (once the escalation topic acknowledged it), round robin among such subscribers;
 * with none connected the notice is dropped. Notices are not deliveries: no id, no ack, no window
 * slot.
 *
 * <p>Thread-safe: each route's state is guarded by its own lock; sends happen under it (gRPC
 * stream observers are not thread-safe); dispatch futures are completed after it is released.
 */
public final class PullHub extends DeliveriesGrpc.DeliveriesImplBase implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PullHub.class);
  /** Window when the subscriber asks for 0. */
  public static final int DEFAULT_WINDOW = 32;

  private final Map<String, RouteHub> hubs = new HashMap<>();
  private final Scheduler timer;

  /** Uses, does not own, {@code timer} (handler timeouts); close the hub before the timer. */
  public PullHub(SidecarConfig config, Scheduler timer) {
    this.timer = timer;
    for (RouteConfig r : config.routes()) {
      if (r.delivery().mode() == RouteConfig.Mode.PULL) {
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

  /**
   * Sends an escalation notice for {@code record} to one subscriber of {@code route} that asked
   * for them and whose stream takes more now ({@code isReady}); does nothing for a route not in
   * pull mode or with no such subscriber. Never blocks, never throws, and never buffers without
   * bound: a subscriber that stopped reading gets no notices (they are best effort) rather than
   * having them pile up in the sidecar's memory.
   *
   * @param route route that escalated the record
   * @param record the escalated record, as consumed
   * @param verdict its verdict (disposition {@code ILLEGAL_TRANSITION_ESCALATE})
   */
  public void escalated(String route, ConsumerRecord<byte[], byte[]> record, Verdict verdict) {
    RouteHub h = hubs.get(route);
    if (h != null) {
      try {
        h.notifyEscalation(Deliveries.fromRecord(route, record)
            .setEntityId(verdict.getEntityId())
            .setEvent(verdict.getEvent())
            .setDedupKey(verdict.getDedupKey())
            .setEscalation(verdict)
            .build());
      } catch (RuntimeException e) {
        log.warn("route {}: escalation notice not sent: {}", route, e.toString());
      }
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
          sub.escalations = req.getSubscription().getEscalations();
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

  /** One queued or outstanding delivery: one attempt of the processor. */
  private static final class Pending {
    final Delivery delivery;
    final CompletableFuture<DispatchResult> result = new CompletableFuture<>();
    Subscriber sentTo;
    CompletableFuture<Void> timeout;

    Pending(Delivery d) {
      this.delivery = d;
    }

    void stopTimer() {
      if (timeout != null) {
        timeout.cancel(false);
      }
    }
  }

  private final class Subscriber {
    final ServerCallStreamObserver<Delivery> stream;
    final Map<String, Pending> outstanding = new LinkedHashMap<>();
    RouteHub hub;
    int window;
    String name = "";
    boolean escalations;
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

  /**
   * One pull route. Every field is guarded by the instance's lock. Futures are completed after the
   * lock is released: their continuations (the processor's next step) may dispatch again, take
   * locks of their own or run long, and must never do so while this hub's lock is held.
   */
  private final class RouteHub implements Dispatcher {
    final RouteConfig route;
    final ArrayDeque<Pending> queue = new ArrayDeque<>();
    final List<Subscriber> subscribers = new ArrayList<>();
    int next;
    int nextNotified;

    RouteHub(RouteConfig route) {
      this.route = route;
    }

    @Override
    public CompletionStage<DispatchResult> dispatch(Delivery d, Duration timeout) {
      Pending p = new Pending(d);
      synchronized (this) {
        queue.addLast(p);
      }
      // a cancelled dispatch (record abandoned) leaves the queue and frees its window slot
      p.result.whenComplete((r, e) -> {
        if (e != null) {
          withdraw(p);
        }
      });
      pump();
      return p.result;
    }

    void add(Subscriber s) {
      synchronized (this) {
        s.hub = this;
        subscribers.add(s);
        log.info("route {}: subscriber '{}' connected (window {}), {} connected", route.name(), s.name, s.window, subscribers.size());
      }
      pump();
    }

    /**
     * The stream ended: each unacknowledged delivery is a finished attempt that the business may
     * have seen (it may have crashed applying it). Reporting it as such lets the processor count
     * it towards {@code retry.max-attempts} — a record that kills every subscriber is escalated
     * instead of pinning its entity forever — and send the next attempt flagged
     * {@code redelivery}, to whichever subscriber is then connected.
     */
    void remove(Subscriber s, String why) {
      List<Pending> unacked;
      synchronized (this) {
        if (!subscribers.remove(s)) {
          return;
        }
        unacked = new ArrayList<>(s.outstanding.values());
        s.outstanding.clear();
        unacked.forEach(Pending::stopTimer);
        log.info("route {}: subscriber '{}' left ({}); {} unacknowledged deliveries count as failed attempts", route.name(), s.name, why,
            unacked.size());
      }
      DispatchResult r = DispatchResult.retry("subscriber '" + s.name + "' left without acknowledging (" + why + ")");
      unacked.forEach(p -> p.result.complete(r));
      pump();
    }

    void ack(Subscriber s, Ack ack) {
      Pending p;
      synchronized (this) {
        p = s.outstanding.remove(ack.getDeliveryId());
        if (p == null) {
          return; // unknown, timed out, already acked, or its stream already ended: ignore
        }
        p.stopTimer();
      }
      p.result.complete(switch (ack.getResult().getOutcome()) {
        case OK -> DispatchResult.ok();
        case REJECT -> DispatchResult.reject(ack.getResult().getMessage());
        case RETRY -> DispatchResult.retry(ack.getResult().getMessage(),
            Duration.ofMillis(Integer.toUnsignedLong(ack.getResult().getRetryAfterMs())));
        default -> DispatchResult.retry("subscriber acked without an outcome");
      });
      pump();
    }

    void expire(Subscriber s, Pending p) {
      synchronized (this) {
        if (!s.outstanding.remove(p.delivery.getDeliveryId(), p)) {
          return;
        }
      }
      log.warn("route {}: delivery {} not acknowledged by '{}' within {} ms; retrying it", route.name(),
          p.delivery.getDeliveryId(), s.name, route.delivery().handlerTimeout().toMillis());
      // like a push deadline: the attempt may have been seen; the processor backs off, flags the
      // next attempt as a redelivery and gives up after retry.max-attempts
      p.result.complete(DispatchResult.retry("not acknowledged within " + route.delivery().handlerTimeout().toMillis() + " ms"));
      pump();
    }

    /** The processor abandoned the attempt. */
    void withdraw(Pending p) {
      synchronized (this) {
        queue.remove(p);
        if (p.sentTo != null) {
          p.sentTo.outstanding.remove(p.delivery.getDeliveryId(), p);
        }
        p.stopTimer();
      }
      pump();
    }

    /**
     * Sends a notice to the next subscriber that asked for notices and is ready, round robin; or
     * drops it. Notices take no window slot, so without the readiness check a subscriber that
     * stopped reading would have every notice buffered for it, without bound.
     */
    void notifyEscalation(Delivery notice) {
      synchronized (this) {
        for (int i = 0; i < subscribers.size(); i++) {
          Subscriber s = subscribers.get((nextNotified + i) % subscribers.size());
          if (s.escalations && !s.closed && s.stream.isReady()) {
            nextNotified = (nextNotified + i + 1) % subscribers.size();
            try {
              s.stream.onNext(notice);
            } catch (RuntimeException e) {
              log.debug("route {}: escalation notice not sent: {}", route.name(), e.toString());
            }
            return;
          }
        }
      }
      log.debug("route {}: no ready subscriber asked for escalation notices; notice for {} dropped", route.name(),
          notice.getDedupKey());
    }

    /** Sends queued deliveries to subscribers with room, round robin. */
    void pump() {
      List<Pending> due = new ArrayList<>();
      synchronized (this) {
        sendQueued(due);
      }
      // a handler-timeout of zero: expired as soon as sent, handled like any expiry (unlocked)
      due.forEach(p -> expire(p.sentTo, p));
    }

    private void sendQueued(List<Pending> due) {
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
        p.timeout = timer.delay(route.delivery().handlerTimeout()).toCompletableFuture();
        if (p.timeout.isDone()) {
          due.add(p);
        } else {
          p.timeout.thenRun(() -> expire(t, p));
        }
        try {
          target.stream.onNext(p.delivery);
        } catch (RuntimeException e) {
          // the stream broke under us: its cancel handler ends the attempts it held
          log.debug("route {}: send failed: {}", route.name(), e.toString());
        }
      }
    }

    @Override
    public void close() {
      // the hub owns the route's state; nothing per dispatcher to release
    }
  }

  /**
   * Ends every stream (their unacknowledged deliveries complete as failed attempts), then answers
   * every queued delivery: never sent, the business cannot have seen it.
   */
  @Override
  public void close() {
    List<Subscriber> all = new ArrayList<>();
    for (RouteHub h : hubs.values()) {
      synchronized (h) {
        all.addAll(h.subscribers);
      }
    }
    all.forEach(s -> s.fail(Status.UNAVAILABLE.withDescription("sidecar stopping")));
    for (RouteHub h : hubs.values()) {
      List<Pending> left;
      synchronized (h) {
        left = new ArrayList<>(h.queue);
        h.queue.clear();
      }
      left.forEach(p -> p.result.complete(DispatchResult.businessDown("sidecar stopping")));
    }
  }
}
