package dev.onceguard.bench.contention;

/**
 * What the orchestrator asks of one worker process for one cell (sent as a JSON line on its stdin).
 *
 * @param instance this worker's index among the cell's instances
 * @param cell the cell's index in the run, which keeps the facts of different cells distinct
 */
record Order(Variant variant, ClaimSide.Target target, int entities, int holdMs, long warmupMs, long measureMs, int instance,
    int cell) {}
