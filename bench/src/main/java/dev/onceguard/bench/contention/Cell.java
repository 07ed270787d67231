package dev.onceguard.bench.contention;

/**
 * One measured setting: a variant at a MySQL round-trip time, a business call of {@code holdMs}
 * between reading and writing the state, and a number of instance processes.
 */
record Cell(Variant variant, double rttMs, int holdMs, int instances) {}
