package dev.onceguard.client.internal;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;

/**
 * The drop-in consumer's own counters, exposed as Kafka {@link Metric}s by
 * {@code OnceGuardConsumer.metrics()} (group {@value #GROUP}, tags {@code client-id} and
 * {@code route}). Written by the consumer thread, read by any thread (a metrics reporter):
 * every value is atomic or volatile, and {@link #metrics()} takes no lock.
 */
public final class ConsumerMetrics {
  /** The metric group of every metric here. */
  public static final String GROUP = "onceguard-consumer-metrics";

  final AtomicLong polled = new AtomicLong();
  final AtomicLong acknowledged = new AtomicLong();
  final AtomicLong rejected = new AtomicLong();
  final AtomicLong retried = new AtomicLong();
  final AtomicLong refused = new AtomicLong();
  final AtomicLong reconnects = new AtomicLong();
  final AtomicLong escalations = new AtomicLong();
  volatile int inFlight;
  volatile boolean connected;

  private final Map<MetricName, Metric> metrics;

  ConsumerMetrics(String clientId, String route) {
    Map<String, String> tags = new LinkedHashMap<>();
    tags.put("client-id", clientId);
    tags.put("route", route);
    Map<MetricName, Metric> m = new LinkedHashMap<>();
    add(m, tags, "records-polled-total", "Records returned by poll().", polled::get);
    add(m, tags, "records-acknowledged-total", "Records acknowledged OK (committed) to the sidecar.", acknowledged::get);
    add(m, tags, "records-rejected-total", "Records answered REJECT with reject().", rejected::get);
    add(m, tags, "records-retried-total", "Records answered RETRY with retry().", retried::get);
    add(m, tags, "records-refused-total",
        "Records not returned because their key or value could not be deserialized (answered REJECT or RETRY).",
        refused::get);
    add(m, tags, "records-in-flight", "Records returned by poll() and not yet acknowledged.", () -> (double) inFlight);
    add(m, tags, "sidecar-reconnects-total", "Subscriptions reopened after the stream to the sidecar ended unexpectedly.",
        reconnects::get);
    add(m, tags, "escalation-notices-total", "Escalation notices received (only with an escalation listener).",
        escalations::get);
    add(m, tags, "sidecar-connected", "1 while the stream to the sidecar is up, else 0.", () -> connected ? 1.0 : 0.0);
    this.metrics = Map.copyOf(m);
  }

  private static void add(
      Map<MetricName, Metric> m, Map<String, String> tags, String name, String doc, Supplier<Number> value) {
    MetricName n = new MetricName(name, GROUP, doc, tags);
    m.put(n, new ClientMetric(n, value));
  }

  /** Every metric, live: values are read when asked. */
  public Map<MetricName, Metric> metrics() {
    return metrics;
  }

  /**
   * One counter or gauge. {@code value()} is what kafka-clients 3.x's {@code Metric} declares
   * (removed in 4.0); it is here so that 3.x reporters get a number, not an AbstractMethodError.
   */
  private static final class ClientMetric implements Metric {
    private final MetricName name;
    private final Supplier<Number> value;

    ClientMetric(MetricName name, Supplier<Number> value) {
      this.name = name;
      this.value = value;
    }

    @Override
    public MetricName metricName() {
      return name;
    }

    @Override
    public Object metricValue() {
      return value.get().doubleValue();
    }

    /** The value as a double, as kafka-clients 3.x's {@code Metric.value()}. */
    public double value() {
      return value.get().doubleValue();
    }
  }
}
