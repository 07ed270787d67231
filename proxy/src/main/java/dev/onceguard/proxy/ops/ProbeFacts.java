package dev.onceguard.proxy.ops;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionStage;

/**
 * What {@link Probes} judge, read from the running process: its phase, each route's consumer, and
 * the two remote checks (MySQL, Kafka metadata). The seam that unit tests fake.
 *
 * <p>Threading: any thread, concurrently. The local reads never block; the remote checks return
 * at once and complete later (the caller bounds the wait).
 */
public interface ProbeFacts {

  /**
   * Why the sidecar is not consuming yet, e.g. {@code "waiting for MySQL … (attempt 3)"}; {@code null}
   * once every route consumer has started.
   */
  String startupWait();

  /** True from the stop signal on: the sidecar is draining and will exit. */
  boolean draining();

  /** The route's consumer as of now, or {@code null} when it is not running (not started yet). */
  RouteFacts route(String name);

  /** Completes when MySQL answered one statement; exceptionally, with the reason, when it did not. */
  CompletionStage<Void> pingMysql();

  /**
   * The partition count of each topic of {@code topics} that exists; missing topics are absent
   * from the map. Completes exceptionally, with the reason, when Kafka's metadata cannot be read.
   */
  CompletionStage<Map<String, Integer>> topics(Set<String> topics);

  /**
   * One route consumer.
   *
   * @param inGroup joined its consumer group and got an assignment (possibly empty)
   * @param assignedPartitions partitions assigned now
   * @param lastTurnAtMillis when its poll loop last began a turn (clock millis)
   * @param failure why the consumer stopped, or {@code null} while it runs
   */
  record RouteFacts(boolean inGroup, int assignedPartitions, long lastTurnAtMillis, Throwable failure) {}
}
