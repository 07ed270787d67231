package dev.onceguard.it.faults;

import dev.onceguard.it.faults.Fault.Call;
import dev.onceguard.proxy.api.GuardService;
import dev.onceguard.proxy.api.PullHub;
import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.escalate.EscalationSink;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.guard.GuardedProcessor;
import dev.onceguard.proxy.pipeline.Cancellation;
import dev.onceguard.proxy.pipeline.DeliveryIds;
import dev.onceguard.proxy.store.Claim;
import dev.onceguard.proxy.store.ClaimOutcome;
import dev.onceguard.proxy.store.GuardStore;
import dev.onceguard.proxy.store.IdempotencyCache;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.proxy.store.StoreUnavailableException;
import dev.onceguard.proxy.time.Scheduler;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Verdict;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.errors.NetworkException;
import org.apache.kafka.common.errors.TimeoutException;

/**
 * One sidecar process of a run: its own owner id, {@link Guard} and {@link GuardedProcessor}, on the
 * run's shared real store, with every call it makes to the store, the business and Kafka passing
 * through the run's schedule of faults. A crash makes it stop making calls and hearing answers;
 * its timers never fire again.
 */
final class Instance {
  /** The driver's socket timeout: how long a hung MySQL call keeps the sidecar waiting. */
  static final Duration STORE_DEADLINE = Duration.ofSeconds(15);
  /** The producer's delivery timeout. */
  static final Duration PRODUCE_DEADLINE = Duration.ofSeconds(120);

  final World world;
  final String name;
  final String owner;
  final Guard guard;
  final GuardedProcessor processor;
  final RouteConfig route;
  /** The Guard API of this process, on the same guard. */
  final GuardService api;
  /** Pull mode's hub, for a pull route; null in push mode. */
  final PullHub hub;
  volatile boolean dead;
  long lastHeartbeat;
  /** The cancellation of the record in progress (the partition's revocation). */
  private volatile Cancellation current = new Cancellation();

  Instance(World world, String name, GuardStore realStore, IdempotencyCache l1, SidecarConfig config, RouteConfig route) {
    this.world = world;
    this.name = name;
    this.owner = "fm-" + name;
    this.route = route;
    Scheduler timers = d -> world.timer(this, d);
    MachineConfig machine = route.machine() == null ? null : config.machines().get(route.machine());
    this.guard = new Guard(new Store(realStore), new Cache(l1), config.machines(), config.routes(), world, owner, timers);
    // fixed jitter: the same schedule waits the same times
    Backoff backoff = new Backoff(route.delivery().retry().initialBackoff(), route.delivery().retry().maxBackoff(), new Random(7));
    Dispatcher business;
    if (route.delivery().mode() == RouteConfig.Mode.PULL) {
      // pull mode: the real hub, with one subscriber stream whose business is the run's
      this.hub = new PullHub(config, timers);
      new Subscriber(hub);
      business = new Business(hub.dispatcher(route.name()));
    } else {
      this.hub = null;
      business = new Business(null);
    }
    this.processor = new GuardedProcessor(route, machine, guard, business, new Topics(), timers, backoff,
        new DeliveryIds(name), (r, v, forwarded) -> {});
    this.api = new GuardService(config, guard, timers);
    world.instances.add(this);
    heartbeat();
  }

  /** Processes {@code r} as the pipeline would hand it over; the stage fails if it was cancelled. */
  CompletableFuture<Void> process(ConsumerRecord<byte[], byte[]> r) {
    current = new Cancellation();
    return processor.process(r, current).toCompletableFuture();
  }

  void heartbeat() {
    lastHeartbeat = world.nowMillis();
    guard.heartbeat();
  }

  void revoke() {
    current.cancel();
  }

  void crash() {
    dead = true;
  }

  private static final World.Failures STORE = new World.Failures() {
    @Override
    public Throwable failedBefore(String what) {
      return new StoreUnavailableException("MySQL failed: connection refused (injected before " + what + ")", null);
    }

    @Override
    public Throwable lostAnswer(String what) {
      return new StoreUnavailableException("MySQL failed: connection reset (injected after " + what + " took effect)", null);
    }

    @Override
    public Throwable timedOut(String what) {
      return new StoreUnavailableException("MySQL did not answer within 15s (injected: " + what + " took effect)", null);
    }
  };

  private static final World.Failures KAFKA = new World.Failures() {
    @Override
    public Throwable failedBefore(String what) {
      return new NetworkException("injected before " + what);
    }

    @Override
    public Throwable lostAnswer(String what) {
      return new NetworkException("injected: connection lost after " + what + " was written");
    }

    @Override
    public Throwable timedOut(String what) {
      return new TimeoutException("injected: " + what + " was written, not acknowledged within the delivery timeout");
    }
  };

  /**
   * L1 on the real Redis, shared by every instance as a Redis is: its calls are not in the schedule
   * (L1 fails open: its faults are misses), but they count as work in progress, so that a write
   * lands before the run goes on, as it would at the speed of a real Redis.
   */
  private final class Cache implements IdempotencyCache {
    private final IdempotencyCache real;

    Cache(IdempotencyCache real) {
      this.real = real;
    }

    @Override
    public CompletionStage<Hit> seen(String route, String dedupKey, String fingerprint) {
      return world.passThrough(Instance.this, () -> real.seen(route, dedupKey, fingerprint));
    }

    @Override
    public CompletionStage<Void> remember(String route, String dedupKey, String fingerprint, long confirmedAtMillis, Duration ttl,
        String source) {
      return world.passThrough(Instance.this, () -> real.remember(route, dedupKey, fingerprint, confirmedAtMillis, ttl, source));
    }

    @Override
    public void close() {
      // shared by the run's instances; closed by the test
    }
  }

  /** The real store, each step a numbered call of this instance. */
  private final class Store implements GuardStore {
    private final GuardStore real;

    Store(GuardStore real) {
      this.real = real;
    }

    /** The record a step is about, as the trace names it: {@code @offset}, for a Guard API step the offset its request stands for. */
    private static String at(Source s) {
      return s.partition() >= 0 ? "@" + s.offset() : "@" + s.topic().substring(s.topic().lastIndexOf('-') + 1) + " (api)";
    }

    private <T> CompletionStage<T> call(Call kind, String detail, java.util.function.Supplier<CompletionStage<T>> effect) {
      return world.call(Instance.this, kind, detail, effect, STORE, STORE_DEADLINE, null);
    }

    @Override
    public CompletionStage<ClaimOutcome> claim(ClaimCommand cmd) {
      return call(Call.CLAIM, cmd.extracted().event() + at(cmd.source()), () -> real.claim(cmd));
    }

    @Override
    public CompletionStage<ClaimOutcome> takeOver(ClaimCommand cmd, LedgerRow row, boolean force) {
      return call(Call.TAKE_OVER, cmd.extracted().event() + at(cmd.source()) + " " + row.status(),
          () -> real.takeOver(cmd, row, force));
    }

    @Override
    public CompletionStage<Boolean> releaseAbandonedApiClaim(String machine, String entityId, String pendingKey, long graceMillis) {
      return call(Call.RELEASE_API, entityId, () -> real.releaseAbandonedApiClaim(machine, entityId, pendingKey, graceMillis));
    }

    @Override
    public CompletionStage<List<LedgerRow>> pendingRows(String entityId, String pendingKey) {
      return call(Call.PENDING_ROWS, entityId, () -> real.pendingRows(entityId, pendingKey));
    }

    @Override
    public CompletionStage<List<LedgerRow>> appliedRows(List<String> routes, String entityId, String event, String fingerprint,
        int limit) {
      return call(Call.APPLIED_ROWS, entityId + " " + event, () -> real.appliedRows(routes, entityId, event, fingerprint, limit));
    }

    @Override
    public CompletionStage<Boolean> confirm(Claim claim, long nowMillis) {
      return call(Call.CONFIRM, claim.event() + at(claim.source()), () -> real.confirm(claim, nowMillis));
    }

    @Override
    public CompletionStage<Boolean> abort(Claim claim, boolean maySeen, long nowMillis) {
      return call(Call.ABORT, claim.event() + at(claim.source()) + " maySeen=" + maySeen,
          () -> real.abort(claim, maySeen, nowMillis));
    }

    @Override
    public CompletionStage<Boolean> renew(Claim claim, long leaseMillis) {
      return call(Call.RENEW, claim.event() + at(claim.source()), () -> real.renew(claim, leaseMillis));
    }

    @Override
    public CompletionStage<Void> heartbeat(String owner, long ttlMillis) {
      return call(Call.HEARTBEAT, "", () -> real.heartbeat(owner, ttlMillis));
    }

    @Override
    public CompletionStage<Void> retire(String owner) {
      return world.passThrough(Instance.this, () -> real.retire(owner));
    }

    @Override
    public CompletionStage<Void> recordDecision(Verdict verdict, Source source, long nowMillis) {
      return world.passThrough(Instance.this, () -> real.recordDecision(verdict, source, nowMillis));
    }

    @Override
    public CompletionStage<Long> purgeDecisions(long beforeMillis) {
      return world.passThrough(Instance.this, () -> real.purgeDecisions(beforeMillis));
    }

    @Override
    public CompletionStage<ExplainResponse> explain(String route, String machine, String dedupKey, String entityId, int limit) {
      return world.passThrough(Instance.this, () -> real.explain(route, machine, dedupKey, entityId, limit));
    }

    @Override
    public void close() {
      // the run's store is shared and closed by the test
    }
  }

  /**
   * The business container, reached through the schedule: called directly (push), or through the
   * real pull hub, whose subscriber acknowledges with the business's answer (pull).
   */
  private final class Business implements Dispatcher {
    private final Dispatcher pull;

    Business(Dispatcher pull) {
      this.pull = pull;
    }

    @Override
    public CompletionStage<DispatchResult> dispatch(Delivery d, Duration timeout) {
      return world.call(Instance.this, Call.DISPATCH, d.getEvent() + "@" + d.getRecord().getOffset() + (d.getRedelivery() ? " redelivery" : ""),
          () -> pull != null ? pull.dispatch(d, timeout) : CompletableFuture.completedFuture(world.business.receive(d, name)), null, timeout,
          f -> f == Fault.FAIL_BEFORE ? DispatchResult.businessDown("injected: connection refused before sending")
              : f == Fault.HANG ? DispatchResult.retry("DEADLINE_EXCEEDED (injected: the business answered too late)")
              : DispatchResult.retry("UNAVAILABLE (injected: connection reset after the business answered)"))
          .thenApply(res -> {
            if (res.kind() == DispatchResult.Kind.RETRY && !res.maybeDelivered() && !res.businessDown()) {
              world.business.heardRetry.add(d.getDeliveryId());
            }
            return res;
          });
    }

    @Override
    public void close() {}
  }

  /**
   * A business container subscribed to the hub: it answers every delivery at once with an ack
   * carrying the business's answer. Its stream stands in for gRPC's (always ready).
   */
  private final class Subscriber extends io.grpc.stub.ServerCallStreamObserver<Delivery> {
    private final io.grpc.stub.StreamObserver<dev.onceguard.v1.SubscribeRequest> acks;

    Subscriber(PullHub hub) {
      acks = hub.subscribe(this);
      acks.onNext(dev.onceguard.v1.SubscribeRequest.newBuilder()
          .setSubscription(dev.onceguard.v1.Subscription.newBuilder().setRoute(route.name()).setWindow(8).setSubscriber(name)).build());
    }

    @Override
    public void onNext(Delivery d) {
      if (d.hasEscalation()) {
        return;
      }
      DispatchResult r = world.business.receive(d, name + " (pull)");
      dev.onceguard.v1.HandleResult.Outcome o = switch (r.kind()) {
        case OK -> dev.onceguard.v1.HandleResult.Outcome.OK;
        case REJECT -> dev.onceguard.v1.HandleResult.Outcome.REJECT;
        case RETRY -> dev.onceguard.v1.HandleResult.Outcome.RETRY;
      };
      acks.onNext(dev.onceguard.v1.SubscribeRequest.newBuilder().setAck(dev.onceguard.v1.Ack.newBuilder().setDeliveryId(d.getDeliveryId())
          .setResult(dev.onceguard.v1.HandleResult.newBuilder().setOutcome(o).setMessage(r.message()))).build());
    }

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}

    @Override
    public boolean isCancelled() {
      return false;
    }

    @Override
    public void setOnCancelHandler(Runnable onCancelHandler) {}

    @Override
    public void setCompression(String compression) {}

    @Override
    public boolean isReady() {
      return true;
    }

    @Override
    public void setOnReadyHandler(Runnable onReadyHandler) {}

    @Override
    public void disableAutoInboundFlowControl() {}

    @Override
    public void request(int count) {}

    @Override
    public void setMessageCompression(boolean enable) {}
  }

  /** The escalation and verdict topics, reached through the schedule. */
  private final class Topics implements EscalationSink {
    @Override
    public CompletionStage<Void> escalate(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v, long nowMillis) {
      return world.call(Instance.this, Call.ESCALATE, v.getReason() + "@" + source.offset(), () -> {
        world.escalations.add(new World.Written(source.offset(), v, world.nextEvent(), name));
        return CompletableFuture.<Void>completedFuture(null);
      }, KAFKA, PRODUCE_DEADLINE, null);
    }

    @Override
    public CompletionStage<Void> publishVerdict(String topic, ConsumerRecord<byte[], byte[]> source, Verdict v) {
      return world.call(Instance.this, Call.VERDICT, v.getDisposition() + "/" + v.getReason() + "@" + source.offset(), () -> {
        world.verdicts.add(new World.Written(source.offset(), v, world.nextEvent(), name));
        return CompletableFuture.<Void>completedFuture(null);
      }, KAFKA, PRODUCE_DEADLINE, null);
    }
  }
}
