package dev.onceguard.bench;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.guard.VerdictListener;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Verdict;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * {@code make bench}: the sidecar's Kafka-to-gRPC pipeline with and without the guard, and two
 * hand-rolled dedup loops, measured in one run on the real broker, MariaDB and Redis with one
 * in-process business container, so that the ratios compare like with like on this (shared,
 * noisy) machine. The scenarios are listed in {@link Scenario}.
 *
 * <ol>
 *   <li><b>Throughput</b>: every scenario {@code --repeats} times, interleaved. A backlog of
 *       {@code --records} is produced first, then the consumer starts; records ended per second
 *       between the first and the last one (group join excluded), and over the same window this
 *       JVM's and MariaDB's CPU per record.
 *   <li><b>Record age</b>: at half the median {@code guard_machine} rate of step 1, for the
 *       scenarios with {@link Scenario#paced}: a warm-up backlog, then records produced on a fixed
 *       schedule for {@code --paced-seconds}; age = end minus the record's create timestamp.
 *   <li><b>Memory</b>: the standalone sidecar jar's RSS, idle and under a guarded backlog.
 * </ol>
 *
 * Writes {@code bench/target/results.json} (with the FOR UPDATE vs CAS microbenchmark's
 * {@code bench/target/seed.json} merged in when present) and regenerates {@code docs/benchmarks.md}
 * with its charts.
 */
public final class Bench {
  private Bench() {}

  /**
   * @param only the scenarios to run (all when empty); a partial run prints its figures but writes
   *     no page (the page compares every scenario)
   * @param jfr where to write one JFR recording ({@code profile} settings) per measured throughput
   *     run, named {@code <scenario>-<run>.jfr}; null for none
   * @param pacedRate the paced runs' rate; 0: half the median {@code guard_machine} rate (the
   *     only choice of a full run: with {@code --only}, paced runs happen only at a given rate)
   * @param trace whether the paced runs at 100 rec/s (every paced run with {@code --only}) follow each
   *     record's steps ({@link dev.onceguard.proxy.trace.RecordTimeline}) and report where the time goes
   * @param pacedLeadSeconds seconds of records at the paced rate before each paced window, not
   *     counted (0, the default: none; the packaged process runs at least its own lead-in, see
   *     {@code Runner.PROCESS_LEAD_SECONDS}); the first window of an invocation meets the JIT still
   *     compiling, which the paced line's JIT figure shows
   */
  record Options(int records, int repeats, int partitions, int pacedSeconds, int warmup, int poolSize, String command,
      String label, Path out, Path docs, Path seedJson, Path sidecarJar, List<String> args, java.util.Set<Scenario> only, Path jfr,
      int pacedRate, boolean trace, int pacedLeadSeconds) {
    static Options parse(String[] args) {
      int records = 10_000;
      int repeats = 3;
      int partitions = 6;
      int paced = 10;
      int warmup = 2_000;
      int pool = 8;
      String command = "java -jar bench/target/onceguard-bench.jar";
      String label = "manual";
      Path out = Path.of("bench/target/results.json");
      Path docs = Path.of("docs");
      Path seed = Path.of("bench/target/seed.json");
      Path jar = Path.of("proxy/target/onceguard.jar");
      java.util.Set<Scenario> only = java.util.EnumSet.noneOf(Scenario.class);
      Path jfr = null;
      int pacedRate = 0;
      boolean trace = false;
      int lead = 0;
      List<String> shown = new ArrayList<>();
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--trace")) {
          trace = true;
          shown.add(a);
          continue;
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(a + ": needs a value");
        }
        String v = args[++i];
        switch (a) {
          case "--records" -> records = positive(a, v);
          case "--repeats" -> repeats = positive(a, v);
          case "--partitions" -> partitions = positive(a, v);
          case "--paced-seconds" -> paced = positive(a, v);
          case "--warmup" -> warmup = positive(a, v);
          case "--pool" -> pool = positive(a, v);
          case "--command" -> command = v;
          case "--label" -> label = v;
          case "--out" -> out = Path.of(v);
          case "--docs" -> docs = Path.of(v);
          case "--seed-json" -> seed = Path.of(v);
          case "--sidecar-jar" -> jar = Path.of(v);
          case "--only" -> {
            for (String name : v.split(",")) {
              only.add(Scenario.byId(name.trim()));
            }
          }
          case "--jfr" -> jfr = Path.of(v);
          case "--paced-rate" -> pacedRate = positive(a, v);
          case "--paced-lead-seconds" -> {
            lead = Integer.parseInt(v);
            if (lead < 0) {
              throw new IllegalArgumentException(a + ": must be 0 or more, was " + v);
            }
          }
          default -> throw new IllegalArgumentException("unknown option " + a + " (known: --records, --repeats, --partitions,"
              + " --paced-seconds, --warmup, --pool, --command, --label, --out, --docs, --seed-json, --sidecar-jar, --only, --jfr, --paced-rate,"
              + " --paced-lead-seconds, --trace)");
        }
        if (!a.equals("--command") && !a.equals("--label")) {
          shown.add(a + " " + v);
        }
      }
      return new Options(records, repeats, partitions, paced, warmup, pool, command, label, out, docs, seed, jar, shown, only, jfr,
          pacedRate, trace, lead);
    }

    boolean runs(Scenario s) {
      return only.isEmpty() || only.contains(s);
    }

    /** Records before a paced phase: enough for the group to settle (the JIT is warm by then). */
    int pacedWarmup() {
      return Math.min(warmup, 300);
    }

    private static int positive(String name, String v) {
      int n = Integer.parseInt(v);
      if (n <= 0) {
        throw new IllegalArgumentException(name + ": must be positive, was " + v);
      }
      return n;
    }
  }

  public static void main(String[] args) throws Exception {
    // before the first logger exists: the sidecar's logback.xml reads it (its INFO lines would bury the figures)
    System.setProperty("ONCEGUARD_LOG_LEVEL", System.getProperty("ONCEGUARD_LOG_LEVEL", "WARN"));
    System.setProperty("java.awt.headless", "true");
    // the clients' retry warnings on fresh topics (NOT_LEADER_OR_FOLLOWER) are not findings
    ((ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger("org.apache.kafka")).setLevel(ch.qos.logback.classic.Level.ERROR);
    Options o = Options.parse(args);
    Env env = Env.fromEnvironment();
    CpuMeter cpu = CpuMeter.forDatabaseAt(env.mysqlHost());
    RunInfo info = RunInfo.capture(o, env, cpu);
    System.out.printf(Locale.ROOT, "OnceGuard benchmark: %d records per throughput run, %d repeats, %d partitions, MySQL pool %d%n",
        o.records(), o.repeats(), o.partitions(), o.poolSize());
    System.out.printf(Locale.ROOT, "machine: %d cores, load average %s; Kafka %s, MySQL %s:%d (%s), Redis %s%n%n", info.cores(),
        info.loadAverage(), env.kafkaBootstrap(), env.mysqlHost(), env.mysqlPort(),
        cpu.dbPid() > 0 ? "local, mariadbd pid " + cpu.dbPid() : "not local: no database CPU", env.redisUri());

    Map<Scenario, List<Stats>> throughput = new EnumMap<>(Scenario.class);
    Map<Scenario, List<Stats>> paced = new EnumMap<>(Scenario.class);
    Map<Scenario, List<Stats>> pacedLow = new EnumMap<>(Scenario.class);
    SidecarRss.Result rss = null;
    List<ScaleCell> scale = new ArrayList<>();
    int rate;
    Timelines timelines = o.trace()
        ? new Timelines(o.only().isEmpty() ? LOW_PACED_RATE : o.pacedRate(), cpu.dbPid(), o.out().toAbsolutePath().resolveSibling("timelines"))
        : null;
    try (BenchKafka kafka = new BenchKafka(env.kafkaBootstrap()); Business business = Business.start();
        PackagedSidecar packaged = new PackagedSidecar(cpu)) {
      Runner runner = new Runner(o, env, kafka, business, cpu, new StepTimes(), timelines, packaged);
      // unrecorded: the JIT compiles the shared paths (Kafka, gRPC, lettuce, JDBC) before the first measured run
      List<Scenario> warm = o.only().isEmpty() ? List.of(Scenario.BASELINE, Scenario.GUARD_MACHINE, Scenario.HAND_A, Scenario.HAND_B)
          : o.only().stream().map(s -> s.machine() ? Scenario.GUARD_MACHINE : s).distinct().toList();
      for (Scenario s : warm) {
        Stats st = runner.throughput(s, null, Workload.fresh(o.warmup()), o.warmup());
        System.out.printf(Locale.ROOT, "warm-up %-22s %9.0f rec/s (not counted)%n", s.id, st.throughput());
      }
      boolean machineRuns = o.runs(Scenario.GUARD_MACHINE) || o.runs(Scenario.REPLAY) || o.runs(Scenario.REDIS_DOWN_DUPLICATES);
      for (int rep = 1; rep <= o.repeats(); rep++) {
        for (Scenario s : List.of(Scenario.BASELINE, Scenario.GUARD_NO_MACHINE, Scenario.HAND_A, Scenario.HAND_B)) {
          if (o.runs(s)) {
            record(throughput, rep, s, runner.measured(s, rep, null, Workload.fresh(o.records()), o.records()));
          }
        }
        if (!machineRuns) {
          continue;
        }
        // the machine run's database and records serve the two duplicate scenarios after it
        String db = newDatabaseName();
        try {
          Workload w = Workload.fresh(o.records());
          Stats machine = runner.measured(Scenario.GUARD_MACHINE, rep, db, w, o.records());
          if (o.runs(Scenario.GUARD_MACHINE)) {
            record(throughput, rep, Scenario.GUARD_MACHINE, machine);
          }
          for (Scenario s : List.of(Scenario.REPLAY, Scenario.REDIS_DOWN_DUPLICATES)) {
            if (o.runs(s)) {
              record(throughput, rep, s, runner.measured(s, rep, db, w, o.records()));
            }
          }
        } finally {
          env.dropDatabase(db);
        }
      }
      if (!o.only().isEmpty()) {
        for (int rep = 1; o.pacedRate() > 0 && rep <= o.repeats(); rep++) {
          for (Scenario s : o.only()) {
            if (s.paced) {
              Stats st = runner.paced(s, o.pacedRate());
              System.out.printf(Locale.ROOT, "paced %d  %-22s at %d rec/s: p50 %7.1f ms  p99 %7.1f ms  (%d records)%s%n", rep, s.id,
                  o.pacedRate(), st.p50(), st.p99(), st.count(), atBusiness(st) + cpuAndAcks(st));
            }
          }
        }
        if (timelines != null && !timelines.isEmpty()) {
          System.out.println("\nwhere the time goes (record timelines, runs pooled)\n\n" + timelines.markdown());
          Path file = o.out().resolveSibling("timeline.json");
          Files.createDirectories(file.toAbsolutePath().getParent());
          Results.writeTimeline(file, timelines.json());
          Path md = o.out().resolveSibling("timeline.md");
          Files.writeString(md, timelines.markdown());
          System.out.println("--only: a partial run, no RSS; wrote " + file + ", " + md + " and " + file.resolveSibling("timelines") + " only");
        } else {
          System.out.println("\n--only: a partial run, no RSS, nothing written");
        }
        return;
      }
      rate = (int) Math.max(1, Math.round(median(throughput.get(Scenario.GUARD_MACHINE).stream().mapToDouble(Stats::throughput)) / 2));
      System.out.printf(Locale.ROOT, "%npaced runs at %d rec/s (half the median guard_machine rate) for %d s each%n", rate,
          o.pacedSeconds());
      for (int rep = 1; rep <= o.repeats(); rep++) {
        for (Scenario s : Scenario.values()) {
          if (s.paced && (s != Scenario.GUARD_MACHINE_PROCESS || Files.isRegularFile(o.sidecarJar()))) {
            Stats st = runner.paced(s, rate);
            paced.computeIfAbsent(s, k -> new ArrayList<>()).add(st);
            System.out.printf(Locale.ROOT, "paced %d  %-22s p50 %7.1f ms  p99 %7.1f ms  (%d records)%s%n", rep, s.id, st.p50(), st.p99(),
                st.count(), atBusiness(st) + cpuAndAcks(st));
          }
        }
      }
      System.out.printf(Locale.ROOT, "%npaced runs at %d rec/s (low load: nothing saturated, the guard's own latency) for %d s each%n",
          LOW_PACED_RATE, o.pacedSeconds());
      for (int rep = 1; rep <= o.repeats(); rep++) {
        for (Scenario s : LOW_PACED) {
          if (s != Scenario.GUARD_MACHINE_PROCESS || Files.isRegularFile(o.sidecarJar())) {
            Stats st = runner.paced(s, LOW_PACED_RATE);
            pacedLow.computeIfAbsent(s, k -> new ArrayList<>()).add(st);
            System.out.printf(Locale.ROOT, "paced %d  %-22s p50 %7.1f ms  p99 %7.1f ms  (%d records)%s%n", rep, s.id, st.p50(), st.p99(),
                st.count(), atBusiness(st) + cpuAndAcks(st));
          }
        }
      }
      // its last window is over: the scale phase and the RSS check do not share the cores with it
      packaged.close();
      System.out.printf(Locale.ROOT, "%nscale: the guarded pipeline at 1 and 4 instances in one group, MySQL RTT 0 and 2 ms (delaying proxy)%n");
      for (double rtt : new double[] {0, 2}) {
        for (int instances : new int[] {1, 4}) {
          try {
            ScaleCell cell = runner.scale(instances, rtt, Math.min(o.records(), 5_000));
            scale.add(cell);
            System.out.printf(Locale.ROOT, "scale  %d instance(s), RTT %s ms: %7.0f rec/s   paced %d rec/s: p50 %6.1f ms  p99 %6.1f ms%n",
                instances, rtt == 0 ? "0" : "2", cell.recPerS(), SCALE_PACED_RATE, cell.p50Ms(), cell.p99Ms());
          } catch (Exception e) {
            System.err.println("scale cell " + instances + " instances, RTT " + rtt + " ms not measured: " + e);
          }
        }
      }
      if (Files.isRegularFile(o.sidecarJar())) {
        try {
          rss = runner.sidecarRss();
          System.out.printf(Locale.ROOT, "%nsidecar RSS: idle %.0f MB, under load %.0f MB%n", rss.idleMb(), rss.loadMb());
        } catch (Exception e) {
          System.err.println("sidecar RSS not measured: " + e);
        }
      } else {
        System.err.println("sidecar RSS not measured: no " + o.sidecarJar() + " (make build packages it)");
      }
    }
    Results results = Results.of(info, throughput, paced, rate, rss, o.seedJson(), scale, new Results.Paced(LOW_PACED_RATE, pacedLow));
    if (timelines != null && !timelines.isEmpty()) {
      results.timeline(timelines.json(), timelines.markdown());
    }
    results.print();
    results.writeJson(o.out());
    Path copy = o.docs().resolve("benchmarks").resolve("results-" + o.label() + ".json");
    Files.createDirectories(copy.getParent());
    results.writeJson(copy);
    new BenchPage(o, info, results, copy).write();
    System.out.println("\nwrote " + o.out() + ", " + copy + ", " + o.docs().resolve("benchmarks.md") + " and its charts");
  }

  private static void record(Map<Scenario, List<Stats>> into, int rep, Scenario s, Stats st) {
    into.computeIfAbsent(s, k -> new ArrayList<>()).add(st);
    System.out.printf(Locale.ROOT, "run %d  %-22s %9.0f rec/s   JVM %6.3f ms/rec (JIT %5.3f)   MariaDB %s ms/rec%s%n", rep, s.id,
        st.throughput(), st.jvmCpuMsPerRecord(), st.jitCpuMsPerRecord(), st.dbCpuMsPerRecord() == null ? "-" : String.format(Locale.ROOT, "%6.3f", st.dbCpuMsPerRecord()),
        st.answeredBy().isEmpty() ? "" : "   answered by " + st.answeredBy());
  }

  static String newDatabaseName() {
    return "og_bench_" + UUID.randomUUID().toString().replace("-", "").substring(0, 10);
  }

  /**
   * "; at the business p50 … p99 …; claim p50/p99 …, handle …, confirm …" for a guarded paced run
   * (the packaged process: its steps alone, its records end at the business), else empty.
   */
  static String atBusiness(Stats st) {
    StringBuilder sb = new StringBuilder();
    if (st.atBusiness() != null) {
      sb.append(String.format(Locale.ROOT, "; at the business p50 %.1f ms  p99 %.1f ms", st.atBusiness().p50(), st.atBusiness().p99()));
    }
    if (st.steps() != null && !st.steps().isEmpty()) {
      sb.append(";");
      st.steps().forEach((step, q) -> sb.append(String.format(Locale.ROOT, " %s p50/p99 %.1f/%.1f ms", step, q[0], q[1])));
    }
    return sb.toString();
  }

  /**
   * "; CPU … ms/rec (JIT …)" of this JVM, and of the packaged sidecar's process where it ran; and
   * "; acks p99/max … ms" (send to callback) for a paced run; else empty.
   */
  static String cpuAndAcks(Stats st) {
    return (st.jvmCpuMsPerRecord() == null ? "" : String.format(Locale.ROOT, "; CPU %.3f ms/rec", st.jvmCpuMsPerRecord()))
        + (st.jitCpuMsPerRecord() == null ? "" : String.format(Locale.ROOT, " (JIT %.3f)", st.jitCpuMsPerRecord()))
        + (st.sidecarCpu() == null ? "" : String.format(Locale.ROOT, "; sidecar process CPU %.3f ms/rec (JIT %.3f)",
            st.sidecarCpu().msPerRecord(), st.sidecarCpu().jitMsPerRecord()))
        + (st.acks() == null ? "" : String.format(Locale.ROOT, "; acks p99/max %.1f/%.1f ms", st.acks().p99Ms(), st.acks().maxMs()));
  }

  /** Median of the values, or NaN for none. */
  static double median(java.util.stream.DoubleStream values) {
    double[] s = values.filter(v -> !Double.isNaN(v)).sorted().toArray();
    if (s.length == 0) {
      return Double.NaN;
    }
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  /** Where and when the run happened, for the page. */
  record RunInfo(String date, String commit, int cores, String loadAverage, String mariadbVersion, long mariadbPid) {
    static RunInfo capture(Options o, Env env, CpuMeter cpu) {
      String load;
      try {
        String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split(" ");
        load = f[0] + " / " + f[1] + " / " + f[2];
      } catch (Exception e) {
        load = "?";
      }
      String version;
      try (var c = java.sql.DriverManager.getConnection(env.jdbcUrl(env.mysqlDatabase()), env.mysqlUser(), env.mysqlPassword());
          var rs = c.createStatement().executeQuery("SELECT VERSION()")) {
        version = rs.next() ? rs.getString(1) : "?";
      } catch (Exception e) {
        version = "?";
      }
      String date = ZonedDateTime.now(ZoneOffset.UTC).format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'", Locale.ROOT));
      return new RunInfo(date, gitCommit(), Runtime.getRuntime().availableProcessors(), load, version, cpu.dbPid());
    }

    /** The checkout's commit, with {@code -dirty} when files differ from it; {@code unknown} outside git. */
    private static String gitCommit() {
      try {
        Process p = new ProcessBuilder("git", "describe", "--always", "--dirty", "--abbrev=10").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).trim();
        return p.waitFor() == 0 && !out.isEmpty() ? out : "unknown";
      } catch (Exception e) {
        return "unknown";
      }
    }
  }

  /**
   * The low paced rate: far below any scenario's maximum, so record age there is the pipeline's own
   * latency, not a queue. Baseline and guard run at it in the same run, for their difference.
   */
  static final int LOW_PACED_RATE = 100;

  /** The scenarios paced at {@link #LOW_PACED_RATE}. */
  static final List<Scenario> LOW_PACED =
      List.of(Scenario.BASELINE, Scenario.GUARD_MACHINE, Scenario.GUARD_NO_MACHINE, Scenario.GUARD_MACHINE_PROCESS);

  /** Record age in the scale cells is measured at this rate, low enough for one instance at 2 ms RTT. */
  static final int SCALE_PACED_RATE = 100;

  /** One cell of the scale phase. */
  record ScaleCell(int instances, double rttMs, double recPerS, double p50Ms, double p99Ms) {}

  /** A running packaged sidecar (process {@code pid}) and its step times, read from its admin listener. */
  private record ProcessRun(long pid, ScrapedSteps steps, AutoCloseable stop) implements AutoCloseable {
    @Override
    public void close() throws Exception {
      stop.close();
    }
  }

  /**
   * The packaged sidecar that serves every paced window of {@code guard_machine_process}: one
   * process for the whole bench, as the in-process pipeline is one JVM for the whole bench, so that
   * its later windows meet a JIT as warm as this JVM's. Started at its first window on a topic and
   * database of its own (each window's records are new orders); closing it stops the process and
   * drops the database.
   */
  private static final class PackagedSidecar implements AutoCloseable {
    private String topic;
    private String db;
    private Completions done;
    private ProcessRun run;
    private Env env;

    boolean started() {
      return run != null;
    }

    String topic(Runner r) throws Exception {
      if (topic == null) {
        topic = r.kafka().createTopic("bench-paced-" + Scenario.GUARD_MACHINE_PROCESS.id.replace('_', '-'), r.o().partitions());
      }
      return topic;
    }

    Completions done() {
      return done;
    }

    /** The running process, started on first use (after {@link #topic}). */
    ProcessRun running(Runner r) throws Exception {
      if (run == null) {
        env = r.env();
        db = newDatabaseName();
        run = r.startSidecarProcess(topic(r), db, done);
      }
      return run;
    }

    PackagedSidecar(CpuMeter cpu) {
      this.done = new Completions(cpu);
    }

    /** Stops the process and drops its database; a second call does nothing. */
    @Override
    public void close() throws Exception {
      ProcessRun r = run;
      String d = db;
      run = null;
      db = null;
      try {
        if (r != null) {
          r.close();
        }
      } finally {
        if (d != null) {
          env.dropDatabase(d);
        }
      }
    }
  }

  /** Runs one scenario against the shared broker, business and services. */
  private record Runner(Options o, Env env, BenchKafka kafka, Business business, CpuMeter cpu, StepTimes steps, Timelines timelines,
      PackagedSidecar packaged) {

    /** {@link #throughput}, recorded by JFR when {@code --jfr} asks for it. */
    Stats measured(Scenario s, int rep, String database, Workload w, int records) throws Exception {
      if (o.jfr() == null) {
        return throughput(s, database, w, records);
      }
      Files.createDirectories(o.jfr());
      try (jdk.jfr.Recording r = new jdk.jfr.Recording(jdk.jfr.Configuration.getConfiguration("profile"))) {
        r.start();
        Stats st = throughput(s, database, w, records);
        r.stop();
        r.dump(o.jfr().resolve(s.id + "-" + rep + ".jfr"));
        return st;
      }
    }

    /**
     * A backlog of {@code w} then the consumer; until every record ended. {@code database}: the
     * machine run's, shared with the duplicate scenarios after it (the caller drops it); null for
     * a scenario that makes its own.
     */
    Stats throughput(Scenario s, String database, Workload w, int records) throws Exception {
      String topic = kafka.createTopic("bench-" + s.id.replace('_', '-'), o.partitions());
      kafka.produce(topic, w.backlog());
      Completions done = new Completions(cpu);
      done.reset(records);
      String db = database != null ? database : s.ownDatabase() ? newDatabaseName() : null;
      try (AutoCloseable consumer = start(s, topic, db, done)) {
        done.await(records, Duration.ofMinutes(5));
        return done.stats();
      } finally {
        if (database == null && db != null) {
          env.dropDatabase(db);
        }
      }
    }

    /** The packaged sidecar's warm-up backlog before its paced runs, in units of {@code --records}. */
    static final int PROCESS_WARMUP_RUNS = 6;

    /**
     * Seconds of records at the paced rate that the packaged process runs before each of its
     * windows, not counted. After its warm-up backlog alone its JIT compilers still used 0.11-0.15
     * ms of CPU per record in the window at 2,700 rec/s, about 40% of the process's CPU (0.28-0.32
     * ms/rec); after 15 s more at the paced rate, 0.02 ms/rec. A sidecar in production runs
     * for days on a warm JIT; the comparison with the in-process pipeline is about the deployment,
     * not about its first minute.
     */
    static final int PROCESS_LEAD_SECONDS = 15;

    /**
     * A warm-up backlog, then {@code rate} records a second for {@code --paced-seconds}. The
     * packaged process is one for all its windows ({@link PackagedSidecar}), and runs a paced
     * lead-in before each ({@link #PROCESS_LEAD_SECONDS}).
     */
    Stats paced(Scenario s, int rate) throws Exception {
      boolean process = s == Scenario.GUARD_MACHINE_PROCESS;
      // a sidecar process of its own starts cold: its JIT warms up on a backlog first, as the
      // in-process pipeline did on the throughput runs before. One of --records was not enough:
      // measured at 2,350 rec/s, p50 7.8 s after 10,000 records and 50-490 ms after 60,000 (its
      // JIT was still compiling; in one cold JVM four 20,000-record guarded runs went from 2,097 to
      // 3,498 rec/s, still speeding up after 65,000 records)
      int warmup = process && !packaged.started() ? Math.max(o.pacedWarmup(), PROCESS_WARMUP_RUNS * o.records()) : o.pacedWarmup();
      Workload w = Workload.fresh(warmup);
      String topic = process ? packaged.topic(this) : kafka.createTopic("bench-paced-" + s.id.replace('_', '-'), o.partitions());
      // reset before the backlog goes out: a running packaged process may end its first records
      // while the producer still waits for their acknowledgements
      Completions done = process ? packaged.done() : new Completions(cpu);
      done.reset(warmup);
      kafka.produce(topic, w.backlog());
      String db = s.ownDatabase() && !process ? newDatabaseName() : null;
      boolean guardedInProcess = s == Scenario.GUARD_MACHINE || s == Scenario.GUARD_NO_MACHINE;
      Completions atBusiness = guardedInProcess ? new Completions(cpu) : null;
      // in this process only: the packaged sidecar's records are not followed
      boolean traced = timelines != null && timelines.rate == rate && !process && s.sidecar();
      Scenario tracedOk = null;
      // the packaged process outlives the window: the bench closes it at its end
      ProcessRun running = process ? packaged.running(this) : null;
      try (AutoCloseable consumer = process ? () -> { } : start(s, topic, db, done)) {
        ScrapedSteps processSteps = running != null ? running.steps() : null;
        done.await(warmup, Duration.ofMinutes(3));
        // the paced regime itself, not counted (--paced-lead-seconds; the packaged process at least
        // PROCESS_LEAD_SECONDS)
        int lead = rate * (process ? Math.max(o.pacedLeadSeconds(), PROCESS_LEAD_SECONDS) : o.pacedLeadSeconds());
        if (lead > 0) {
          done.reset(lead);
          kafka.producePaced(topic, w.paced(lead), rate);
          done.await(lead, Duration.ofMinutes(3));
        }
        int n = rate * o.pacedSeconds();
        done.reset(n);
        if (guardedInProcess) {
          atBusiness.reset(n);
          business.onReceive(topic, atBusiness);
          steps.arm();
        } else if (processSteps != null) {
          processSteps.arm();
        }
        if (traced) {
          timelines.start();
        }
        long[] sidecarFrom = running != null ? CpuMeter.processTicks(running.pid()) : null;
        BenchKafka.Acks acks = kafka.producePaced(topic, w.paced(n), rate);
        done.await(n, Duration.ofMinutes(3));
        long[] sidecarTo = running != null ? CpuMeter.processTicks(running.pid()) : null;
        tracedOk = s;
        Stats st = guardedInProcess ? done.stats().withAtBusiness(atBusiness.stats(), steps.disarm())
            : processSteps != null ? done.stats().withAtBusiness(null, processSteps.disarm()) : done.stats();
        return st.withAcks(acks).withSidecarCpu(cpu.processMsPerRecord(sidecarFrom, sidecarTo, n));
      } finally {
        if (traced) {
          timelines.stop(tracedOk, rate * o.pacedSeconds());
        }
        if (db != null) {
          env.dropDatabase(db);
        }
      }
    }

    private AutoCloseable start(Scenario s, String topic, String db, Completions done) throws Exception {
      return switch (s) {
        case HAND_A -> {
          String prefix = "ogbench:hand:" + topic + ":";
          AutoCloseable consumer = HandRolled.redisSetNx(env, topic, business.target(), done, prefix);
          yield () -> {
            try {
              consumer.close();
            } finally {
              env.deleteRedisKeys(prefix);
            }
          };
        }
        case HAND_B -> HandRolled.insertIgnore(env, topic, business.target(), done, db);
        case GUARD_MACHINE_PROCESS -> throw new IllegalArgumentException("the packaged process is started by PackagedSidecar");
        default -> startSidecar(s, topic, db, done);
      };
    }

    private AutoCloseable startSidecar(Scenario s, String topic, String db, Completions done) throws Exception {
      return startSidecar(env, s, topic, db, done);
    }

    /** The packaged sidecar as its own process on the machine route; records end where the business receives them. */
    private ProcessRun startSidecarProcess(String topic, String db, Completions done) throws Exception {
      kafka.createTopicNamed(topic + ".escalate", o.partitions()); // it refuses to start without its escalation topic
      int port = SidecarRss.freePort();
      int adminPort = SidecarRss.freePort();
      String yaml = env.yaml(true, topic, db, business.target(), o.poolSize(), env.redisUri(), "127.0.0.1:" + port,
          "127.0.0.1:" + adminPort);
      business.onReceive(topic, done);
      try {
        SidecarRss.Running sidecar = SidecarRss.start(o.sidecarJar(), o.out().toAbsolutePath().getParent(), "paced-sidecar", yaml, port);
        return new ProcessRun(sidecar.process().pid(), new ScrapedSteps(adminPort), () -> {
          try {
            sidecar.close();
          } finally {
            business.onReceive(topic, null);
          }
        });
      } catch (Exception | Error e) {
        business.onReceive(topic, null);
        throw e;
      }
    }

    private AutoCloseable startSidecar(Env env, Scenario s, String topic, String db, Completions done) throws Exception {
      String redis = s == Scenario.REDIS_DOWN_DUPLICATES ? "redis://127.0.0.1:" + SidecarRss.freePort() : env.redisUri();
      SidecarConfig cfg = new ConfigReader(Map.of()).parse(
          env.yaml(s.machine(), topic, db, business.target(), o.poolSize(), redis, "127.0.0.1:0"), "bench-" + s.id);
      business.onReceive(topic, s == Scenario.BASELINE ? done : null);
      GuardRuntime runtime = s == Scenario.BASELINE ? null : new GuardRuntime(cfg, Clock.SYSTEM);
      ProcessorFactory processors = runtime == null ? ProcessorFactory.forwarding()
          : runtime.processors(new VerdictListener() {
            @Override
            public void onVerdict(ConsumerRecord<byte[], byte[]> record, Verdict verdict, boolean forwarded) {
              if (verdict.getDisposition() != Disposition.ILLEGAL_TRANSITION_ESCALATE) {
                done.add(record.timestamp(), verdict.getLayer().name());
              } else {
                done.failed(verdict.getReason() + ": " + verdict.getDetail());
              }
            }

            @Override
            public void onStep(String route, Step step, long nanos) {
              steps.add(step, nanos);
            }
          });
      Sidecar sidecar = new Sidecar(cfg, processors, runtime == null ? List.of() : runtime.services());
      AutoCloseable stop = () -> {
        try {
          sidecar.close();
          if (runtime != null) {
            runtime.close();
          }
        } finally {
          business.onReceive(topic, null);
        }
      };
      try {
        sidecar.start();
        return stop;
      } catch (Exception | Error e) {
        stop.close();
        throw e;
      }
    }

    /**
     * The guarded (state-machine) pipeline as {@code instances} sidecars in one consumer group, with
     * MySQL reached through a delaying proxy adding {@code rttMs} of round-trip time: records ended
     * per second over a backlog (produced once the group settled), then record age at
     * {@link #SCALE_PACED_RATE} rec/s for {@code --paced-seconds}.
     */
    ScaleCell scale(int instances, double rttMs, int records) throws Exception {
      String topic = kafka.createTopic("bench-scale-" + instances + "-" + (int) (rttMs * 10), o.partitions());
      String db = newDatabaseName();
      List<AutoCloseable> sidecars = new ArrayList<>();
      try (dev.onceguard.bench.seed.DelayProxy proxy = new dev.onceguard.bench.seed.DelayProxy(env.mysqlHost(), env.mysqlPort())) {
        proxy.setRtt(rttMs);
        Env via = new Env(env.kafkaBootstrap(), "127.0.0.1", proxy.port(), env.mysqlUser(), env.mysqlPassword(), env.mysqlDatabase(),
            env.redisUri());
        Completions done = new Completions(cpu);
        done.reset(Integer.MAX_VALUE);
        try {
          for (int i = 0; i < instances; i++) {
            sidecars.add(startSidecar(via, Scenario.GUARD_MACHINE, topic, db, done));
          }
          Thread.sleep(6_000); // the group settles before the backlog arrives
          done.reset(records);
          kafka.produce(topic, Workload.fresh(records).backlog());
          done.await(records, Duration.ofMinutes(5));
          Stats tp = done.stats();
          int n = SCALE_PACED_RATE * o.pacedSeconds();
          done.reset(n);
          kafka.producePaced(topic, Workload.fresh(n).paced(n), SCALE_PACED_RATE);
          done.await(n, Duration.ofMinutes(3));
          Stats paced = done.stats();
          return new ScaleCell(instances, rttMs, tp.throughput(), paced.p50(), paced.p99());
        } finally {
          for (AutoCloseable c : sidecars) {
            c.close();
          }
        }
      } finally {
        env.dropDatabase(db);
      }
    }

    /** The packaged sidecar as its own process, on a guarded (state-machine) backlog of {@code --records}. */
    SidecarRss.Result sidecarRss() throws Exception {
      String topic = kafka.createTopic("bench-rss", o.partitions());
      // the sidecar checks its topics at start and refuses to run without its escalation topic
      kafka.createTopicNamed(topic + ".escalate", o.partitions());
      String db = newDatabaseName();
      int port = SidecarRss.freePort();
      Completions seen = new Completions(cpu);
      seen.reset(o.records());
      business.onReceive(topic, seen);
      try {
        String yaml = env.yaml(true, topic, db, business.target(), o.poolSize(), env.redisUri(), "127.0.0.1:" + port);
        return SidecarRss.measure(o.sidecarJar(), o.out().toAbsolutePath().getParent(), yaml, port, () -> {
          kafka.produce(topic, Workload.fresh(o.records()).backlog());
          seen.await(o.records(), Duration.ofMinutes(5));
        });
      } finally {
        business.onReceive(topic, null);
        env.dropDatabase(db);
      }
    }
  }
}
