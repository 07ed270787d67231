package dev.onceguard.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ResultsTest {
  private static Stats run(double throughput, double p50, double p99, Stats atBusiness) {
    return new Stats(1000, throughput, p50, p99, null, null, null, new double[0], Map.of(), atBusiness, null, null, null);
  }

  private static Stats aged(double p50, double p99) {
    return run(Double.NaN, p50, p99, null);
  }

  @Test
  void ageVsBaseline_comparesAtTheSameRate_andTheProcessWithTheInProcessAgeAtTheBusiness() throws Exception {
    Map<Scenario, List<Stats>> throughput = Map.of(Scenario.BASELINE, List.of(run(10_000, 0, 0, null)),
        Scenario.GUARD_MACHINE, List.of(run(4_000, 0, 0, null)));
    // half the maximum: the guard's verdict at 40 ms p99, its records at the business at 20 ms
    Map<Scenario, List<Stats>> half = Map.of(Scenario.BASELINE, List.of(aged(3, 10)),
        Scenario.GUARD_MACHINE, List.of(run(Double.NaN, 15, 40, aged(9, 20))),
        Scenario.GUARD_MACHINE_PROCESS, List.of(aged(20, 50)));
    Results.Paced low = new Results.Paced(100, Map.of(Scenario.BASELINE, List.of(aged(4, 8), aged(4, 9), aged(5, 7)),
        Scenario.GUARD_MACHINE, List.of(run(Double.NaN, 6, 12, aged(5, 10))),
        Scenario.GUARD_MACHINE_PROCESS, List.of(aged(6, 15))));
    Results r = Results.of(null, throughput, half, 2000, null, Path.of("no-such-seed.json"), List.of(), low);

    Map<String, Object> vs = r.ageVsBaseline();

    assertThat(vs.get("r100")).isEqualTo(Map.of("p50_diff_ms", 2.0, "p99_diff_ms", 4.0, "process_p99_ratio", 1.5));
    assertThat(vs.get("half_max")).isEqualTo(Map.of("p99_ratio", 4.0));
    assertThat(vs.get("process_p99_ratio")).isEqualTo(2.5);
  }

  @Test
  void acks_p99AndSlowest_leaveOutRecordsWithoutAnAcknowledgement() {
    long[] micros = new long[200];
    for (int i = 0; i < micros.length; i++) {
      micros[i] = 1_000 + i;
    }
    micros[7] = 250_000;
    micros[8] = 0;
    micros[9] = -1;

    BenchKafka.Acks a = BenchKafka.Acks.of(micros);

    // 198 acknowledged: the 99th percentile is the 197th (ceil(0.99 * 198)) of them in order
    assertThat(a.maxMs()).isEqualTo(250.0);
    assertThat(a.p99Ms()).isEqualTo(1.199);
    assertThat(BenchKafka.Acks.of(new long[] {0, -1}).maxMs()).isNaN();
  }

  @Test
  void pacedWindows_pairEachRunsP99WithItsSlowestAck_inRunOrder() {
    Stats slow = aged(3, 172).withAcks(new BenchKafka.Acks(120.5, 240.25));
    Stats quiet = aged(2, 6).withAcks(new BenchKafka.Acks(2.0, 31.0));

    Stats process = aged(4, 11).withSidecarCpu(new CpuMeter.ProcessCpu(0.32349, 0.14512));

    List<Map<String, Object>> w = Results.windows(List.of(slow, quiet, aged(2, 5), process));

    assertThat(w).hasSize(4);
    assertThat(w.get(0)).containsEntry("p99_ms", 172.0).containsEntry("slowest_ack_ms", 240.25)
        .doesNotContainKey("sidecar_process_cpu_ms_per_record");
    assertThat(w.get(1)).containsEntry("p99_ms", 6.0).containsEntry("slowest_ack_ms", 31.0);
    assertThat(w.get(2)).containsEntry("p99_ms", 5.0).containsEntry("slowest_ack_ms", null);
    // this JVM's CPU in every window, null where it was not sampled
    assertThat(w).allSatisfy(m -> assertThat(m).containsKeys("jvm_cpu_ms_per_record", "jit_cpu_ms_per_record"));
    // the packaged process's own CPU (and its JIT's part) beside its age, to four places
    assertThat(w.get(3)).containsEntry("p99_ms", 11.0).containsEntry("sidecar_process_cpu_ms_per_record", 0.3235)
        .containsEntry("sidecar_process_jit_ms_per_record", 0.1451);
    assertThat(Results.windows(List.of())).isNull();
  }
}
