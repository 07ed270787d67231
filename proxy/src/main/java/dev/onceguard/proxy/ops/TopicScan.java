package dev.onceguard.proxy.ops;

import java.io.PrintWriter;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * Reads topics read-only, from a start (the beginning, an instant, or the last N records of each
 * partition) to their end as it was when the scan began. The consumer has no group: it assigns and
 * seeks, and can neither commit offsets nor disturb a group's members. Prints progress to
 * {@code progress} every few seconds. Blocking; single use.
 */
final class TopicScan {
  /** Where each partition starts: exactly one of {@code from} and {@code last} is set, or neither (the beginning). */
  record Start(Instant from, Long last) {}

  static final Duration PROGRESS_EVERY = Duration.ofSeconds(2);

  private final KafkaConsumer<byte[], byte[]> consumer;
  private final PrintWriter progress;

  /** {@code consumer} has no {@code group.id} and is owned by the caller. */
  TopicScan(KafkaConsumer<byte[], byte[]> consumer, PrintWriter progress) {
    this.consumer = consumer;
    this.progress = progress;
  }

  /**
   * Hands every record of {@code topics} from {@code start} to the end to {@code sink}, partition
   * by partition in offset order within a poll. Returns how many were read.
   *
   * @throws IllegalArgumentException a topic does not exist (the message names it)
   * @throws IllegalStateException the end was not reached within {@code timeout} of no progress
   */
  long scan(List<String> topics, Start start, Duration timeout, Consumer<ConsumerRecord<byte[], byte[]>> sink) {
    List<TopicPartition> parts = new ArrayList<>();
    for (String t : topics) {
      List<PartitionInfo> infos = consumer.partitionsFor(t, Duration.ofSeconds(15));
      if (infos == null || infos.isEmpty()) {
        throw new IllegalArgumentException("topic '" + t + "' does not exist");
      }
      infos.forEach(p -> parts.add(new TopicPartition(t, p.partition())));
    }
    consumer.assign(parts);
    Map<TopicPartition, Long> end = consumer.endOffsets(parts);
    Map<TopicPartition, Long> begin = consumer.beginningOffsets(parts);
    Map<TopicPartition, Long> at = startOffsets(parts, start, begin, end);
    at.forEach(consumer::seek);
    long total = 0;
    for (TopicPartition tp : parts) {
      total += Math.max(0, end.get(tp) - at.get(tp));
    }
    Map<TopicPartition, Long> remaining = new HashMap<>(end);
    remaining.entrySet().removeIf(e -> at.get(e.getKey()) >= e.getValue());
    long read = 0;
    long lastProgress = System.nanoTime();
    long lastRecord = System.nanoTime();
    while (!remaining.isEmpty()) {
      var batch = consumer.poll(Duration.ofMillis(500));
      for (ConsumerRecord<byte[], byte[]> r : batch) {
        Long stop = end.get(new TopicPartition(r.topic(), r.partition()));
        if (stop != null && r.offset() < stop) {
          sink.accept(r);
          read++;
        }
      }
      if (!batch.isEmpty()) {
        lastRecord = System.nanoTime();
      } else if (System.nanoTime() - lastRecord > timeout.toNanos()) {
        throw new IllegalStateException("no record arrived for " + timeout.toSeconds() + " s before the end of " + remaining.keySet());
      }
      remaining.entrySet().removeIf(e -> consumer.position(e.getKey()) >= e.getValue());
      if (System.nanoTime() - lastProgress > PROGRESS_EVERY.toNanos()) {
        lastProgress = System.nanoTime();
        progress.printf(Locale.ROOT, "read %d of %d record(s) (%.0f%%)%n", read, total, total == 0 ? 100.0 : 100.0 * read / total);
        progress.flush();
      }
    }
    return read;
  }

  private Map<TopicPartition, Long> startOffsets(List<TopicPartition> parts, Start start, Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> end) {
    Map<TopicPartition, Long> at = new LinkedHashMap<>();
    if (start.from() != null) {
      Map<TopicPartition, Long> query = new LinkedHashMap<>();
      parts.forEach(tp -> query.put(tp, start.from().toEpochMilli()));
      Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(query);
      parts.forEach(tp -> at.put(tp, found.get(tp) == null ? end.get(tp) : found.get(tp).offset()));
    } else if (start.last() != null) {
      parts.forEach(tp -> at.put(tp, Math.max(begin.get(tp), end.get(tp) - start.last())));
    } else {
      parts.forEach(tp -> at.put(tp, begin.get(tp)));
    }
    return at;
  }
}
