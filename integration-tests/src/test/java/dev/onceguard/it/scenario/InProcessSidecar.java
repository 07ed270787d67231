package dev.onceguard.it.scenario;

import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.guard.GuardedProcessor;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.ops.Metrics;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.pipeline.RecordProcessor;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.trace.Tracing;
import dev.onceguard.v1.Disposition;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One sidecar instance in the test JVM, wired as {@code onceguard run} wires it: a
 * {@link GuardRuntime} (its own pool, Redis client, escalation producer and owner id) and a
 * {@link Sidecar} running the guarded processors. Counts the records it accepted and the store
 * failures its processors retried. {@link #close()} drains like SIGTERM would.
 */
final class InProcessSidecar implements AutoCloseable {
  final String instanceId;
  private final GuardRuntime runtime;
  private final Sidecar sidecar;
  private final List<GuardedProcessor> processors = new CopyOnWriteArrayList<>();
  private final AtomicLong accepted = new AtomicLong();
  /** "DISPOSITION/LAYER/REASON" -> verdicts taken, for the layer that decided each record. */
  private final java.util.Map<String, java.util.concurrent.atomic.LongAdder> verdicts = new java.util.concurrent.ConcurrentHashMap<>();
  private Metrics metrics;
  private boolean closed;

  private InProcessSidecar(SidecarConfig cfg, Tracing tracing) throws IOException {
    this.instanceId = cfg.instanceId();
    this.runtime = new GuardRuntime(cfg, Clock.SYSTEM, tracing);
    try {
      ProcessorFactory guarded = runtime.processors((r, v, forwarded) -> {
        verdicts.computeIfAbsent(v.getDisposition() + "/" + v.getLayer() + "/" + v.getReason(),
            k -> new java.util.concurrent.atomic.LongAdder()).increment();
        if (v.getDisposition() == Disposition.ACCEPTED && forwarded) {
          accepted.incrementAndGet();
        }
      });
      ProcessorFactory counting = ctx -> {
        RecordProcessor p = guarded.create(ctx);
        if (p instanceof GuardedProcessor g) {
          processors.add(g);
        }
        return p;
      };
      this.sidecar = new Sidecar(cfg, counting, runtime.services());
      sidecar.start();
    } catch (IOException | RuntimeException e) {
      runtime.close();
      throw e;
    }
  }

  static InProcessSidecar start(SidecarConfig cfg) throws IOException {
    return new InProcessSidecar(cfg, Tracing.off());
  }

  /** With {@code tracing} (the caller's, closed by it after this instance). */
  static InProcessSidecar start(SidecarConfig cfg, Tracing tracing) throws IOException {
    return new InProcessSidecar(cfg, tracing);
  }

  /** Records this instance forwarded and confirmed. */
  long accepted() {
    return accepted.get();
  }

  /** Verdicts taken so far, by "DISPOSITION/LAYER/REASON" (a copy). */
  java.util.Map<String, Long> verdicts() {
    java.util.Map<String, Long> copy = new java.util.TreeMap<>();
    verdicts.forEach((k, n) -> copy.put(k, n.sum()));
    return copy;
  }

  /** Store failures (MySQL) its processors saw and retried. */
  long storeFailures() {
    return processors.stream().mapToLong(GuardedProcessor::storeFailures).sum();
  }

  /**
   * The guard's counters as {@code GET /metrics} renders them ({@link GuardRuntime#registerMetrics}:
   * L1 hits and misses, MySQL round trips, …), registered at the first call.
   */
  synchronized String scrape() {
    if (metrics == null) {
      metrics = new Metrics();
      runtime.registerMetrics(metrics);
    }
    return metrics.scrape();
  }

  String owner() {
    return runtime.guard().owner();
  }

  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      sidecar.close();
    } finally {
      try {
        runtime.close();
      } finally {
        if (metrics != null) {
          metrics.close();
        }
      }
    }
  }
}
