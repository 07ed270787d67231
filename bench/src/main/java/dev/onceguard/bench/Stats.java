package dev.onceguard.bench;

/**
 * @param throughput records ended per second, first to last
 * @param p50 median latency from the record's create timestamp to its end, ms
 * @param p99 99th percentile of the same, ms
 */
record Stats(int count, double throughput, double p50, double p99) {}
