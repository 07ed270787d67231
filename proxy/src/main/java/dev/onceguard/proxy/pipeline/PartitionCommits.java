package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.time.Clock;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The commit bookkeeping of one route's partitions: per partition, an {@link OffsetTracker} (taken
 * and finished offsets, the contiguous finished prefix) and what was sent to and acknowledged by
 * the broker; route-wide, when and what to commit. Periodic commits are asynchronous, every
 * {@code interval}; {@link #commitSync} is for revocation, shutdown and failure.
 *
 * <p>What is committed for a partition is its lowest unfinished offset or, when everything taken
 * from it is finished, the consumer's position. The position also covers a partition that never
 * had a record (so the group's position is pinned even for an idle partition) and offsets after
 * the last record that hold no record for us (transaction markers), which would otherwise show as
 * lag forever.
 *
 * <p>Threading: confined to the route's poll thread, like the consumer it commits through (commit
 * callbacks run inside that thread's poll or commit calls). Uses, does not own, the consumer.
 */
final class PartitionCommits {
  private static final Logger log = LoggerFactory.getLogger(PartitionCommits.class);

  static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(10);
  /** Commits woken up this often in a row give up (the records are delivered again). */
  static final int SYNC_ATTEMPTS = 3;

  /** One assigned partition's offsets. Poll thread only. */
  static final class Partition {
    final TopicPartition tp;
    private final OffsetTracker offsets = new OffsetTracker();
    /** Highest offset handed to a commit (async or sync); -1 after a failed commit. */
    private long lastSent = -1;
    /** Highest offset the broker confirmed as committed by us. */
    private long lastAcked = -1;

    private Partition(TopicPartition tp) {
      this.tp = tp;
    }

    /** Records that would be delivered again if the partition were committed now: taken, at or after the first unfinished one. */
    int uncommitted() {
      return offsets.size();
    }

    /** When the oldest unfinished record was taken (clock millis); -1 if none is unfinished. */
    long oldestUnfinishedTakenAt() {
      return offsets.oldestUnfinishedTakenAt();
    }
  }

  private final String route;
  private final Consumer<?, ?> consumer;
  private final Duration interval;
  private final Clock clock;
  private final Map<TopicPartition, Partition> partitions = new HashMap<>();
  private long nextCommitAt;

  PartitionCommits(String route, Consumer<?, ?> consumer, Duration interval, Clock clock) {
    this.route = route;
    this.consumer = consumer;
    this.interval = interval;
    this.clock = clock;
    this.nextCommitAt = clock.nowMillis() + interval.toMillis();
  }

  /** Starts the bookkeeping of a newly assigned partition (a reassigned one starts afresh). */
  Partition assigned(TopicPartition tp) {
    Partition p = new Partition(tp);
    partitions.put(tp, p);
    return p;
  }

  /** Forgets a partition: late acknowledgements of its commits are ignored. */
  void forget(TopicPartition tp) {
    partitions.remove(tp);
  }

  /** A record was taken from the partition; offsets must increase. */
  void taken(Partition p, long offset) {
    p.offsets.track(offset, clock.nowMillis());
  }

  /** A taken record is finished; the committable prefix may grow. */
  void finished(Partition p, long offset) {
    p.offsets.complete(offset);
  }

  /** When the next periodic commit is due (clock millis). */
  long nextDueAt() {
    return nextCommitAt;
  }

  /** Sends the grown prefixes of all partitions with {@code commitAsync}, if the interval is up. */
  void commitIfDue() {
    long now = clock.nowMillis();
    if (now < nextCommitAt) {
      return;
    }
    nextCommitAt = now + interval.toMillis();
    Map<TopicPartition, OffsetAndMetadata> offsets = candidates(partitions.values(), false);
    if (offsets.isEmpty()) {
      return;
    }
    consumer.commitAsync(offsets, (done, error) -> {
      if (error == null) {
        acknowledged(done);
        log.debug("route {}: committed {}", route, done);
        return;
      }
      log.warn("route {}: commit of {} failed ({}); retrying at the next interval", route, offsetsText(done), error.toString());
      forgetSent(done);
    });
  }

  /**
   * Commits the finished prefixes of {@code tps} and waits for the answer; never throws. A
   * {@link WakeupException} (a completion or a stop request woke the consumer) is no reason to skip
   * the commit: it is retried.
   */
  void commitSync(Collection<TopicPartition> tps, String why) {
    Map<TopicPartition, OffsetAndMetadata> offsets =
        candidates(tps.stream().map(partitions::get).filter(p -> p != null).toList(), true);
    if (offsets.isEmpty()) {
      return;
    }
    for (int attempt = 1; ; attempt++) {
      try {
        consumer.commitSync(offsets, COMMIT_TIMEOUT);
        acknowledged(offsets);
        log.info("route {}: committed {} ({})", route, offsetsText(offsets), why);
        return;
      } catch (WakeupException e) {
        if (attempt >= SYNC_ATTEMPTS) {
          log.warn("route {}: commit of {} ({}) kept being woken up; giving up", route, offsetsText(offsets), why);
          forgetSent(offsets);
          return;
        }
      } catch (KafkaException e) {
        log.warn("route {}: commit of {} ({}) failed: {}; records after the last committed offsets will be delivered again",
            route, offsetsText(offsets), why, e.toString());
        forgetSent(offsets);
        return;
      }
    }
  }

  /**
   * The offsets to commit; marks them sent. Periodic commits skip what was already sent; final
   * (synchronous) commits only skip what the broker acknowledged, since an async commit still on
   * its way may yet fail.
   */
  private Map<TopicPartition, OffsetAndMetadata> candidates(Collection<Partition> ps, boolean sync) {
    Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
    for (Partition p : ps) {
      long o = commitOffset(p);
      if (o >= 0 && o > (sync ? p.lastAcked : p.lastSent)) {
        out.put(p.tp, new OffsetAndMetadata(o));
        p.lastSent = o;
      }
    }
    return out;
  }

  private long commitOffset(Partition p) {
    long o = p.offsets.commitOffset();
    if (p.offsets.size() == 0) {
      try {
        // a local lookup once the position is initialised; zero timeout: never wait for it here
        o = Math.max(o, consumer.position(p.tp, Duration.ZERO));
      } catch (KafkaException e) {
        // position not known yet (still being reset): commit what the tracker knows, if anything
      }
    }
    return o;
  }

  private void acknowledged(Map<TopicPartition, OffsetAndMetadata> offsets) {
    offsets.forEach((tp, om) -> {
      Partition p = partitions.get(tp);
      if (p != null) {
        p.lastAcked = Math.max(p.lastAcked, om.offset());
      }
    });
  }

  private void forgetSent(Map<TopicPartition, OffsetAndMetadata> offsets) {
    offsets.forEach((tp, om) -> {
      Partition p = partitions.get(tp);
      if (p != null && p.lastSent == om.offset()) {
        p.lastSent = -1;
      }
    });
  }

  static String offsetsText(Map<TopicPartition, OffsetAndMetadata> offsets) {
    StringBuilder sb = new StringBuilder("{");
    offsets.entrySet().stream()
        .sorted(Map.Entry.comparingByKey((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic())))
        .forEach(e -> sb.append(sb.length() > 1 ? ", " : "").append(e.getKey()).append('=').append(e.getValue().offset()));
    return sb.append('}').toString();
  }
}
