package dev.onceguard.bench.contention;

/**
 * What the orchestrator asks of one worker process for one cell (sent as a JSON line on its stdin).
 *
 * @param instance this worker's index among the cell's instances
 * @param cell the cell's index in the run, which keeps the facts of different cells distinct
 * @param earlyArrivalRetryMs the claim route's {@code early-arrival-retry}; 0: its default
 */
record Order(Variant variant, ClaimSide.Target target, int entities, int holdMs, long warmupMs, long measureMs, int instance,
    int cell, long earlyArrivalRetryMs) {

  /** The same order for worker {@code i}. */
  Order forInstance(int i) {
    return new Order(variant, target, entities, holdMs, warmupMs, measureMs, i, cell, earlyArrivalRetryMs);
  }
}
