package dev.onceguard.bench;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CpuMeterTest {
  @Test
  void processTicks_ofALiveJvm_growWithItsWork_andItsJitPartIsNeverMore() {
    long pid = ProcessHandle.current().pid();
    long[] before = CpuMeter.processTicks(pid);
    long sink = 0;
    long until = System.nanoTime() + 300_000_000L;
    while (System.nanoTime() < until) {
      sink += Long.numberOfTrailingZeros(sink + System.nanoTime());
    }
    long[] after = CpuMeter.processTicks(pid);

    assertThat(sink).isNotNegative();
    assertThat(before).hasSize(2);
    assertThat(after[0]).isGreaterThan(before[0]); // 300 ms of CPU is about 30 ticks
    assertThat(after[1]).isBetween(0L, after[0]);
  }

  @Test
  void processTicks_ofAProcessThatIsGone_areNull_andSoIsItsCpuPerRecord() throws Exception {
    Process p = new ProcessBuilder("true").start();
    p.waitFor();
    CpuMeter cpu = CpuMeter.forDatabaseAt("db.example");

    assertThat(CpuMeter.processTicks(p.pid())).isNull();
    assertThat(cpu.processMsPerRecord(null, new long[] {10, 1}, 100)).isNull();
    assertThat(cpu.processMsPerRecord(new long[] {0, 0}, new long[] {10, 1}, 0)).isNull();
  }

  @Test
  void processMsPerRecord_isTheTicksBetweenTwoSamplesPerRecord_jitNeverBelowZero() {
    CpuMeter cpu = CpuMeter.forDatabaseAt("db.example");
    double msPerTick = cpu.processMsPerRecord(new long[] {0, 0}, new long[] {1, 0}, 1).msPerRecord();

    CpuMeter.ProcessCpu perRecord = cpu.processMsPerRecord(new long[] {100, 40}, new long[] {300, 60}, 1000);
    // a compiler thread retired inside the window takes its ticks out of the sum
    CpuMeter.ProcessCpu retired = cpu.processMsPerRecord(new long[] {100, 40}, new long[] {300, 30}, 1000);

    assertThat(msPerTick).isPositive();
    assertThat(perRecord.msPerRecord()).isEqualTo(200 * msPerTick / 1000);
    assertThat(perRecord.jitMsPerRecord()).isEqualTo(20 * msPerTick / 1000);
    assertThat(retired.jitMsPerRecord()).isZero();
  }
}
