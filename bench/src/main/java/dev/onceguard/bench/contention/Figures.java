package dev.onceguard.bench.contention;

/**
 * One cell's row of the table.
 *
 * @param count transitions measured
 * @param perSecond transitions per second, all instances together
 * @param p50Ms median transition latency, business call included
 * @param p99Ms 99th percentile of the same
 * @param waitP50Ms median wait: the time in {@code SELECT … FOR UPDATE}, or until the claim was accepted
 * @param waitP99Ms 99th percentile of the same
 * @param metBusyShare share of transitions that found their entity busy at least once (claim only; 0 for FOR UPDATE,
 *     whose waits are not told apart from its round trip)
 */
record Figures(int count, double perSecond, double p50Ms, double p99Ms, double waitP50Ms, double waitP99Ms, double metBusyShare) {}
