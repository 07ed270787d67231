package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.dispatch.Backoff;
import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.proxy.dispatch.Dispatcher;
import dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
import dev.onceguard.proxy.time.Scheduler;
import dev.onceguard.proxy.trace.RecordTimeline;
import dev.onceguard.proxy.trace.RecordLog;
import dev.onceguard.proxy.trace.RecordSpan;
import dev.onceguard.v1.Delivery;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.spi.LoggingEventBuilder;

/**
 * Forwards every record to the business without a guard: the unguarded pipeline, which the
 * benchmark measures as its baseline in the same run as the guarded routes (the bench's
 * {@code baseline} scenario), and which the pipeline's own tests use to exercise intake, ordering,
 * offsets and shutdown apart from the guard. The sidecar never runs it: its routes always get the
 * guarded processor.
 *
 * <ul>
 *   <li>OK → the record is finished.
 *   <li>RETRY (business RETRY or a transport failure) → retried with {@link Backoff} (at least the
 *       business's {@code retry_after_ms}, at most {@code retry.max-backoff}), <b>without bound</b>, until it succeeds or the work is
 *       cancelled. The partition's commit offset stays at this record meanwhile.
 *   <li>REJECT → logged at WARN and the record is finished (there is no escalation without a guard).
 * </ul>
 *
 * <p>The ordering key is the Kafka key (bytes mapped one-to-one to chars, ISO-8859-1, so distinct
 * keys never merge), or {@code p<partition>o<offset>} for a null key (no order to keep).
 *
 * <p>Every step runs through {@link Forwarding#step}: a step that throws completes the record's
 * stage exceptionally instead of being lost in a continuation nobody reads (the pipeline then tries
 * the record again).
 *
 * <p>Threading: {@link #process} never blocks; attempts continue on the dispatcher's and the
 * scheduler's threads. Thread-safe; one instance serves a route.
 */
public final class ForwardingProcessor implements RecordProcessor {
  private static final Logger log = LoggerFactory.getLogger(ForwardingProcessor.class);

  private final RouteConfig route;
  private final Dispatcher dispatcher;
  private final Scheduler scheduler;
  private final Backoff backoff;
  private final DeliveryIds ids;
  private final LogThrottle retryLog = new LogThrottle(Duration.ofSeconds(5), System::nanoTime);

  /** Uses, does not own, {@code dispatcher} and {@code scheduler}. */
  public ForwardingProcessor(RouteConfig route, Dispatcher dispatcher, Scheduler scheduler, Backoff backoff, DeliveryIds ids) {
    this.route = route;
    this.dispatcher = dispatcher;
    this.scheduler = scheduler;
    this.backoff = backoff;
    this.ids = ids;
  }

  @Override
  public String orderingKey(ConsumerRecord<byte[], byte[]> record) {
    byte[] key = record.key();
    return key == null
        ? "p" + record.partition() + "o" + record.offset()
        : new String(key, StandardCharsets.ISO_8859_1);
  }

  @Override
  public CompletionStage<Void> process(ConsumerRecord<byte[], byte[]> record, Cancellation cancel) {
    Forwarding f = new Forwarding(record);
    cancel.onCancel(f::cancelled);
    f.step(() -> f.attempt(1));
    return f.result;
  }

  /** One record's attempts. Fields are touched by one attempt at a time, plus {@link #cancelled}. */
  private final class Forwarding {
    final ConsumerRecord<byte[], byte[]> record;
    final CompletableFuture<Void> result = new CompletableFuture<>();
    /** The call or the backoff wait in progress; cancelled together with the record. */
    volatile CompletableFuture<?> current;

    Forwarding(ConsumerRecord<byte[], byte[]> record) {
      this.record = record;
    }

    void attempt(int n) {
      if (result.isDone()) {
        return;
      }
      Delivery d = Deliveries.fromRecord(route.name(), record)
          .setAttempt(n)
          .setRedelivery(false)
          .setDeliveryId(ids.next())
          .build();
      RecordTimeline.mark(record.topic(), record.partition(), record.offset(), RecordTimeline.Mark.CALL_START);
      CompletableFuture<DispatchResult> call = dispatcher.dispatch(d, route.delivery().handlerTimeout()).toCompletableFuture();
      follow(call);
      call.whenComplete((res, err) -> {
        RecordTimeline.mark(record.topic(), record.partition(), record.offset(), RecordTimeline.Mark.CALL_END);
        step(() -> onResult(n, res, err));
      });
    }

    void onResult(int n, DispatchResult res, Throwable err) {
      if (result.isDone()) {
        return; // cancelled meanwhile
      }
      if (err != null) {
        // Dispatchers map every failure to a result; an exception here is a dispatcher bug. Keep
        // the record unfinished and retry rather than lose it.
        fields(log.atError()).setCause(err).log("route {} {}-{}@{}: dispatcher failed instead of returning a result; retrying",
            route.name(), record.topic(), record.partition(), record.offset());
        res = DispatchResult.retry("dispatcher failed: " + err);
      }
      switch (res.kind()) {
        case OK -> result.complete(null);
        case REJECT -> {
          fields(log.atWarn()).log("route {} {}-{}@{}: business rejected the record at attempt {}: {} (finished without escalation)",
              route.name(), record.topic(), record.partition(), record.offset(), n, res.message());
          result.complete(null);
        }
        case RETRY -> retryLater(n, res);
      }
    }

    void retryLater(int n, DispatchResult res) {
      Duration wait = backoff.delay(n, res.retryAfter());
      // A business outage makes every record in flight retry at once: one WARN per route every few
      // seconds (with a count of the others), the rest at DEBUG.
      int heldBack = retryLog.tryAcquire();
      if (heldBack >= 0) {
        fields(log.atWarn()).log("route {} {}-{}@{}: attempt {} not applied ({}); retrying in {} ms{}",
            route.name(), record.topic(), record.partition(), record.offset(), n, res.message(), wait.toMillis(),
            heldBack == 0 ? "" : " (" + heldBack + " other retries since the last report not logged)");
      } else if (log.isDebugEnabled()) {
        log.debug("route {} {}-{}@{}: attempt {} not applied ({}); retrying in {} ms",
            route.name(), record.topic(), record.partition(), record.offset(), n, res.message(), wait.toMillis());
      }
      CompletableFuture<Void> delay = scheduler.delay(wait).toCompletableFuture();
      follow(delay);
      delay.whenComplete((v, e) -> step(() -> {
        if (e != null) {
          // the scheduler was closed under us: only happens while the sidecar stops
          result.completeExceptionally(new CancelledException("retry of " + where() + " (scheduler closed)"));
        } else {
          attempt(n + 1);
        }
      }));
    }

    /**
     * Runs one step of the record. What a step throws would otherwise vanish into the dependent
     * stage {@code whenComplete} returns, and the record would hang unfinished and unseen.
     */
    void step(Runnable s) {
      try {
        s.run();
      } catch (RuntimeException | Error e) {
        result.completeExceptionally(e);
      }
    }

    /** Makes {@code f} the step a cancellation aborts; aborts it at once if already cancelled. */
    void follow(CompletableFuture<?> f) {
      current = f;
      if (result.isDone()) {
        f.cancel(false);
      }
    }

    void cancelled() {
      result.completeExceptionally(new CancelledException(where()));
      CompletableFuture<?> c = current;
      if (c != null) {
        c.cancel(false);
      }
    }

    /** {@code line} with the record's structured fields. */
    LoggingEventBuilder fields(LoggingEventBuilder line) {
      return RecordLog.fields(line, route.name(), record, null, null, RecordSpan.NONE);
    }

    String where() {
      return "route " + route.name() + " " + record.topic() + "-" + record.partition() + "@" + record.offset();
    }
  }
}
