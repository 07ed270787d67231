package dev.onceguard.bench;

/**
 * One measured window.
 *
 * @param throughput records ended per second, first to last
 * @param p50 median age of a record at its end (from its Kafka create timestamp), ms
 * @param p99 99th percentile of the same, ms
 * @param jvmCpuMsPerRecord this JVM's CPU over the window per record, or null when not sampled
 * @param jitCpuMsPerRecord the JIT compiler threads' part of {@code jvmCpuMsPerRecord}, or null
 * @param dbCpuMsPerRecord the local MariaDB server's CPU over the window per record, or null
 * @param agesMs every record's age at its end, sorted, ms (whole milliseconds: Kafka timestamps)
 * @param answeredBy guarded records per layer of their verdict (empty without a guard)
 * @param atBusiness for a guarded paced run, the same records' ages when the business received
 *     them (before the confirm that ends them); else null
 * @param steps for a guarded paced run, per step the pipeline reports (claim, handle, confirm)
 *     its {p50, p99} in ms over the same records; else null
 * @param acks for a paced run, how long its records waited for their acknowledgement, send to
 *     callback (in every scenario's age, whatever consumes them); else null
 * @param sidecarCpu for a paced run of the packaged sidecar, its process's CPU per record over the
 *     window; else null
 */
record Stats(int count, double throughput, double p50, double p99, Double jvmCpuMsPerRecord, Double jitCpuMsPerRecord,
    Double dbCpuMsPerRecord,
    double[] agesMs, java.util.Map<String, Integer> answeredBy, Stats atBusiness, java.util.Map<String, double[]> steps,
    BenchKafka.Acks acks, CpuMeter.ProcessCpu sidecarCpu) {
  /** The p50 age at the business of a guarded in-process paced run, else null. */
  Double businessP50() {
    return atBusiness == null ? null : atBusiness.p50();
  }

  /** The p99 age at the business of a guarded in-process paced run, else null. */
  Double businessP99() {
    return atBusiness == null ? null : atBusiness.p99();
  }

  Stats withAtBusiness(Stats b, java.util.Map<String, double[]> stepTimes) {
    return new Stats(count, throughput, p50, p99, jvmCpuMsPerRecord, jitCpuMsPerRecord, dbCpuMsPerRecord, agesMs, answeredBy, b,
        stepTimes, acks, sidecarCpu);
  }

  Stats withAcks(BenchKafka.Acks a) {
    return new Stats(count, throughput, p50, p99, jvmCpuMsPerRecord, jitCpuMsPerRecord, dbCpuMsPerRecord, agesMs, answeredBy, atBusiness,
        steps, a, sidecarCpu);
  }

  Stats withSidecarCpu(CpuMeter.ProcessCpu msPerRecord) {
    return new Stats(count, throughput, p50, p99, jvmCpuMsPerRecord, jitCpuMsPerRecord, dbCpuMsPerRecord, agesMs, answeredBy, atBusiness,
        steps, acks, msPerRecord);
  }

  /** The slowest acknowledgement of a paced run's records (send to callback), ms, or null. */
  Double slowestAck() {
    return acks == null || Double.isNaN(acks.maxMs()) ? null : acks.maxMs();
  }
}
