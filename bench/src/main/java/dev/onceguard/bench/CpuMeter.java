package dev.onceguard.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * CPU time of this JVM and of the local MariaDB server, and of another process on request
 * ({@link #processTicks}), from {@code /proc/<pid>/stat} (utime +
 * stime, in clock ticks: 10 ms at the usual {@code CLK_TCK} of 100, so a window should hold a few
 * hundred ticks to be read to a few per cent). The server is found only when MySQL is on this
 * machine; otherwise {@link Sample#dbTicks()} is -1. Thread-safe; a sample reads two small files.
 */
public final class CpuMeter {
  private static final Set<String> LOCAL_HOSTS = Set.of("127.0.0.1", "localhost", "::1");
  private final Path self = Path.of("/proc/self/stat");
  private final Path db;
  private final long dbPid;
  private final double msPerTick;

  /**
   * @param jitTicks the part of {@code jvmTicks} spent by the JIT compiler threads alive now
   * @param dbTicks -1 when the database server's CPU is not measured
   */
  record Sample(long jvmTicks, long jitTicks, long dbTicks) {}

  private CpuMeter(long dbPid, double msPerTick) {
    this.dbPid = dbPid;
    this.db = dbPid > 0 ? Path.of("/proc/" + dbPid + "/stat") : null;
    this.msPerTick = msPerTick;
  }

  static CpuMeter forDatabaseAt(String mysqlHost) {
    return new CpuMeter(LOCAL_HOSTS.contains(mysqlHost) ? findMariadbd() : -1, 1000.0 / clockTicksPerSecond());
  }

  /** The MariaDB server's pid, or -1 when it does not run on this machine. */
  long dbPid() {
    return dbPid;
  }

  Sample sample() {
    return new Sample(ticks(self), jitTicks(Path.of("/proc/self/task")), db == null ? -1 : ticks(db));
  }

  /**
   * Another process's CPU: {@code {ticks, of which its JIT compiler threads'}}, or null when it is
   * gone. For a JVM of its own (the packaged sidecar) beside this one.
   */
  static long[] processTicks(long pid) {
    long t = ticks(Path.of("/proc/" + pid + "/stat"));
    return t < 0 ? null : new long[] {t, jitTicks(Path.of("/proc/" + pid + "/task"))};
  }

  /** Another process's CPU per record over a window, in ms: all of it, and its JIT compilers' part. */
  record ProcessCpu(double msPerRecord, double jitMsPerRecord) {}

  /**
   * CPU per record between two {@link #processTicks} of one process, or null when either is
   * missing or there were no records.
   */
  ProcessCpu processMsPerRecord(long[] from, long[] to, long records) {
    if (from == null || to == null || records <= 0) {
      return null;
    }
    return new ProcessCpu((to[0] - from[0]) * msPerTick / records, Math.max(0, to[1] - from[1]) * msPerTick / records);
  }

  /** Milliseconds of CPU per record between two samples; {@code null} for the database when not measured. */
  Double jvmMsPerRecord(Sample from, Sample to, long records) {
    return records <= 0 ? null : (to.jvmTicks() - from.jvmTicks()) * msPerTick / records;
  }

  /**
   * The JIT compiler's share of {@link #jvmMsPerRecord}: a window that still compiles is not
   * warm. Approximate when the JVM retired a compiler thread inside the window (its ticks leave
   * the sum), never below 0.
   */
  Double jitMsPerRecord(Sample from, Sample to, long records) {
    return records <= 0 ? null : Math.max(0, to.jitTicks() - from.jitTicks()) * msPerTick / records;
  }

  Double dbMsPerRecord(Sample from, Sample to, long records) {
    if (records <= 0 || from.dbTicks() < 0 || to.dbTicks() < 0) {
      return null;
    }
    return (to.dbTicks() - from.dbTicks()) * msPerTick / records;
  }

  /** CPU time (utime + stime) that process {@code pid} used so far, in milliseconds; -1 if it is gone. */
  public static double cpuMsOf(long pid) {
    long t = ticks(Path.of("/proc/" + pid + "/stat"));
    return t < 0 ? -1 : t * 1000.0 / clockTicksPerSecond();
  }

  private static long ticks(Path stat) {
    try {
      String s = Files.readString(stat, StandardCharsets.US_ASCII);
      // the command name (field 2) may hold spaces and parentheses: count fields after the last ')'
      String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(f[11]) + Long.parseLong(f[12]); // fields 14 (utime) and 15 (stime)
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /** The ticks of the JIT compiler threads alive now among {@code taskDir}'s threads. */
  private static long jitTicks(Path taskDir) {
    long sum = 0;
    try (var tasks = Files.newDirectoryStream(taskDir)) {
      for (Path t : tasks) {
        try {
          String comm = Files.readString(t.resolve("comm")).trim();
          if (comm.startsWith("C1 Compiler") || comm.startsWith("C2 Compiler")) {
            sum += Math.max(0, ticks(t.resolve("stat")));
          }
        } catch (IOException threadGone) {
          // ended while listed
        }
      }
    } catch (IOException e) {
      return 0;
    }
    return sum;
  }

  private static long findMariadbd() {
    for (String pidFile : new String[] {"/run/mysqld/mysqld.pid", "/var/run/mysqld/mysqld.pid"}) {
      try {
        long pid = Long.parseLong(Files.readString(Path.of(pidFile)).trim());
        if (isMariadbd(pid)) {
          return pid;
        }
      } catch (IOException | NumberFormatException notThere) {
        // next
      }
    }
    String out = run("pgrep", "-xo", "mariadbd");
    if (out == null || out.isBlank()) {
      out = run("pgrep", "-xo", "mysqld");
    }
    try {
      long pid = out == null ? -1 : Long.parseLong(out.trim());
      return pid > 0 && isMariadbd(pid) ? pid : -1;
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  private static boolean isMariadbd(long pid) {
    try {
      String comm = Files.readString(Path.of("/proc/" + pid + "/comm")).trim();
      return (comm.equals("mariadbd") || comm.equals("mysqld")) && ticks(Path.of("/proc/" + pid + "/stat")) >= 0;
    } catch (IOException e) {
      return false;
    }
  }

  private static long clockTicksPerSecond() {
    String out = run("getconf", "CLK_TCK");
    try {
      return out == null ? 100 : Long.parseLong(out.trim());
    } catch (NumberFormatException e) {
      return 100;
    }
  }

  private static String run(String... cmd) {
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      return p.waitFor(5, TimeUnit.SECONDS) && p.exitValue() == 0 ? out : null;
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }
}
