package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.v1.Verdict;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Counts final verdicts per route, disposition, layer and reason; {@link #snapshot()} renders
 * them for the periodic log line. Thread-safe and allocation-light on the hot path.
 */
public final class VerdictStats implements VerdictListener {
  private final Map<String, LongAdder> counts = new ConcurrentHashMap<>();

  @Override
  public void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict v, boolean forwarded) {
    String k = v.getRoute() + " " + v.getDisposition().name() + "/" + v.getLayer().name() + "/" + v.getReason().name();
    counts.computeIfAbsent(k, x -> new LongAdder()).increment();
  }

  /** {@code route DISPOSITION/LAYER/REASON=count}, sorted; empty if nothing was decided yet. */
  public String snapshot() {
    Map<String, Long> sorted = new TreeMap<>();
    counts.forEach((k, v) -> sorted.put(k, v.sum()));
    StringBuilder sb = new StringBuilder();
    sorted.forEach((k, v) -> sb.append(sb.length() == 0 ? "" : ", ").append(k).append('=').append(v));
    return sb.toString();
  }
}
