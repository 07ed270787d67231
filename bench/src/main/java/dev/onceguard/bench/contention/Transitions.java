package dev.onceguard.bench.contention;

/** One instance's transitions in one cell, on resources it owns (a connection, a guard). */
interface Transitions extends AutoCloseable {
  /** Makes transitions until the recorder's window ends, and finishes those begun; blocks. */
  Samples run(Recorder rec) throws Exception;

  @Override
  void close() throws Exception;
}
