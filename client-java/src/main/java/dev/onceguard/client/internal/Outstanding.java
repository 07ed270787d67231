package dev.onceguard.client.internal;

import dev.onceguard.v1.Delivery;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Deliveries that {@code poll()} returned and that are not yet acknowledged, by partition and
 * offset. Commits take from here: what poll returned is what a commit acknowledges. Not
 * thread-safe; used by the consumer thread only.
 */
final class Outstanding {
  private final Map<TopicPartition, NavigableMap<Long, Delivery>> byPartition = new LinkedHashMap<>();

  void add(TopicPartition partition, Delivery delivery) {
    byPartition.computeIfAbsent(partition, p -> new TreeMap<>()).put(delivery.getRecord().getOffset(), delivery);
  }

  boolean isEmpty() {
    return byPartition.isEmpty();
  }

  int size() {
    int n = 0;
    for (NavigableMap<Long, Delivery> m : byPartition.values()) {
      n += m.size();
    }
    return n;
  }

  /** Removes and returns the deliveries of a partition at or after an offset, in offset order. */
  List<Delivery> takeFrom(TopicPartition partition, long offset) {
    NavigableMap<Long, Delivery> m = byPartition.get(partition);
    if (m == null) {
      return List.of();
    }
    NavigableMap<Long, Delivery> tail = m.tailMap(offset, true);
    List<Delivery> taken = new ArrayList<>(tail.values());
    tail.clear();
    if (m.isEmpty()) {
      byPartition.remove(partition);
    }
    return taken;
  }

  void clear() {
    byPartition.clear();
  }

  /** Removes and returns every delivery. */
  List<Delivery> takeAll() {
    List<Delivery> all = new ArrayList<>();
    byPartition.values().forEach(m -> all.addAll(m.values()));
    byPartition.clear();
    return all;
  }

  /**
   * Removes and returns, for each given partition, the deliveries with an offset below the given
   * one (a Kafka commit names the next offset to consume).
   */
  List<Delivery> takeBelow(Map<TopicPartition, OffsetAndMetadata> offsets) {
    List<Delivery> taken = new ArrayList<>();
    offsets.forEach((partition, next) -> {
      NavigableMap<Long, Delivery> m = byPartition.get(partition);
      if (m != null && next != null) {
        NavigableMap<Long, Delivery> below = m.headMap(next.offset(), false);
        taken.addAll(below.values());
        below.clear();
        if (m.isEmpty()) {
          byPartition.remove(partition);
        }
      }
    });
    return taken;
  }

  /** Removes and returns one delivery, or {@code null} if it is not outstanding. */
  Delivery take(TopicPartition partition, long offset) {
    NavigableMap<Long, Delivery> m = byPartition.get(partition);
    Delivery d = m == null ? null : m.remove(offset);
    if (m != null && m.isEmpty()) {
      byPartition.remove(partition);
    }
    return d;
  }

  /** What a Kafka commit of all outstanding deliveries would name. */
  Map<TopicPartition, OffsetAndMetadata> nextOffsets() {
    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
    byPartition.forEach((p, m) -> next.put(p, new OffsetAndMetadata(m.lastKey() + 1)));
    return next;
  }

  /** The next offset per partition for a list of deliveries: highest offset + 1. */
  static Map<TopicPartition, OffsetAndMetadata> nextOffsets(List<Delivery> deliveries) {
    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
    for (Delivery d : deliveries) {
      long candidate = d.getRecord().getOffset() + 1;
      next.merge(
          RecordConverter.topicPartition(d),
          new OffsetAndMetadata(candidate),
          (a, b) -> a.offset() >= b.offset() ? a : b);
    }
    return next;
  }
}
