package dev.onceguard.proxy.pipeline;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * When a partition of a route pauses and resumes (backpressure). A partition is paused while any
 * of these holds, and resumed once none does:
 *
 * <ul>
 *   <li>it holds {@code maxInFlightPerPartition} records (running plus waiting for their turn);
 *   <li>the route holds {@code maxInFlight} records over all partitions;
 *   <li>its uncommitted span — records taken at or after its first unfinished one, which a crash
 *       would deliver again — reached {@code maxUncommittedPerPartition}: one stuck record must
 *       not let the replay after a crash grow without bound while its successors keep finishing.
 * </ul>
 *
 * <p>Threading: confined to the route's poll thread, which owns the consumer it pauses; uses, does
 * not own, the consumer.
 */
final class PausePolicy {
  private static final Logger log = LoggerFactory.getLogger(PausePolicy.class);

  /** A partition's load as of now. */
  record Load(TopicPartition tp, int held, int uncommitted) {}

  private final String route;
  private final Consumer<?, ?> consumer;
  private final int maxHeldPerPartition;
  private final int maxHeld;
  private final int maxUncommittedPerPartition;
  private final Set<TopicPartition> paused = new HashSet<>();

  PausePolicy(String route, Consumer<?, ?> consumer, int maxInFlightPerPartition, int maxInFlight, int maxUncommittedPerPartition) {
    this.route = route;
    this.consumer = consumer;
    this.maxHeldPerPartition = maxInFlightPerPartition;
    this.maxHeld = maxInFlight;
    this.maxUncommittedPerPartition = maxUncommittedPerPartition;
  }

  /**
   * Pauses and resumes partitions on the consumer to match the loads.
   *
   * @param routeHeld records held by the route over all its partitions
   * @param loads every assigned partition's load
   * @return how many partitions are paused now
   */
  int update(int routeHeld, Iterable<Load> loads) {
    boolean routeFull = routeHeld >= maxHeld;
    List<TopicPartition> pause = new ArrayList<>();
    List<TopicPartition> resume = new ArrayList<>();
    for (Load l : loads) {
      boolean full = routeFull || l.held() >= maxHeldPerPartition || l.uncommitted() >= maxUncommittedPerPartition;
      if (full && paused.add(l.tp())) {
        pause.add(l.tp());
      } else if (!full && paused.remove(l.tp())) {
        resume.add(l.tp());
      }
    }
    if (!pause.isEmpty()) {
      consumer.pause(pause);
      log.debug("route {}: paused {} (route holds {} records)", route, pause, routeHeld);
    }
    if (!resume.isEmpty()) {
      consumer.resume(resume);
      log.debug("route {}: resumed {} (route holds {} records)", route, resume, routeHeld);
    }
    return paused.size();
  }

  /** The partition is gone (revoked or lost): it is neither paused nor counted any more. */
  void forget(TopicPartition tp) {
    paused.remove(tp);
  }

  boolean isPaused(TopicPartition tp) {
    return paused.contains(tp);
  }
}
