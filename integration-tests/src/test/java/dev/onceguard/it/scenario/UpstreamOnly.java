package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.DoubleTally.Counts;
import dev.onceguard.it.scenario.DoubleTally.Receipt;
import dev.onceguard.it.scenario.FactStream.Batch;
import dev.onceguard.it.scenario.InstanceGroup.Kind;
import dev.onceguard.it.scenario.UpstreamReport.Row;
import dev.onceguard.v1.Delivery;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Q5 of docs/answers.md: what a plain at-least-once consumer delivers twice when dedup is left to
 * upstream, next to the guarded sidecar on the same stream. Not an {@code *IT}: {@code make test}
 * does not run it; {@code make answers} does ({@code -Dit.test=UpstreamOnly}), writing its tables
 * to {@code answers.q5-out}.
 *
 * <p>One topic of facts ({@link FactStream}) on the stack's broker, read at the same time by two
 * consumer groups of two instances each, every instance a process of its own
 * ({@link StandbyConsumer}): the plain consumer (the benchmark's baseline: poll, call the business,
 * commit what was answered) and the guarded sidecar (L1, ledger, state machine). Each group calls a
 * business of its own, which records every call it receives. Two more instances per group start
 * up ahead and wait: the replacement of the killed one and the one that joins, so that they join
 * when the test says, not when a loaded machine has started their JVMs. A warm-up of facts of 9
 * days ago comes first; then each {@link UpstreamCase} produces {@code q5.records} records at
 * {@code q5.rate} per second, both groups go through its fault at the same moment, and both commit
 * to the end before the next case. Counted per case ({@link DoubleTally}): facts a business
 * received again, the consumer's own redeliveries apart from upstream's re-sends, and whether the
 * delivery was flagged {@code redelivery}.
 *
 * <p>Fails if the sidecar's business receives any fact twice unflagged, if either business misses
 * a fact, if the guard escalates anything, or if the plain consumer lets fewer re-sends through
 * than upstream made.
 */
class UpstreamOnly {
  static final long SEED = Long.getLong("q5.seed", 20261205L);
  static final int RECORDS = Integer.getInteger("q5.records", 10_000);
  static final int RATE = Integer.getInteger("q5.rate", 1_000);
  static final int PARTITIONS = 6;
  /** Facts of 9 days ago, delivered before the cases; the compensation re-runs some of them. */
  static final int WARM_UP = 500;
  static final Duration LATE = Duration.ofDays(9);
  /** Every 100th record of the re-keyed case is a re-send: 1%. */
  static final int REKEYED_EVERY = 100;
  /** The compensation re-publishes 2% of the case's records. */
  static final int COMPENSATION_PERCENT = 2;
  static final Duration START = Duration.ofSeconds(150);
  static final Duration CATCH_UP = Duration.ofSeconds(120);
  static final Path STACK = Path.of("..", "scripts", "stack.sh");

  @Test
  void plainConsumerReceivesRedeliveriesAndResends_guardedSidecarReceivesNoFactTwiceUnflagged() throws Exception {
    String loadAtStart = AnswerFiles.loadAverage();
    long t0 = System.nanoTime();
    FactStream stream = new FactStream(SEED, Instant.now());
    List<Batch> batches = new ArrayList<>();
    List<Row> rows = new ArrayList<>();
    try (UpstreamEnv env = new UpstreamEnv("q5", PARTITIONS);
        RecordingBusiness plainBusiness = RecordingBusiness.start();
        RecordingBusiness guardedBusiness = RecordingBusiness.start();
        InstanceGroup plain = new InstanceGroup("q5-plain", Kind.PLAIN, env.plainGroup,
            (id, port) -> env.yaml(env.plainGroup, id, port, plainBusiness.target()));
        InstanceGroup guarded = new InstanceGroup("q5-guarded", Kind.GUARDED, env.guardedGroup,
            (id, port) -> env.yaml(env.guardedGroup, id, port, guardedBusiness.target()))) {
      List<InstanceGroup> groups = List.of(plain, guarded);
      Map<InstanceGroup, Standbys> standbys = new HashMap<>();
      for (InstanceGroup g : groups) {
        g.join(g.standby("a"));
        g.join(g.standby("b"));
        standbys.put(g, new Standbys(g.standby("a2"), g.standby("c")));
      }
      for (InstanceGroup g : groups) {
        g.awaitReady(START);
        g.awaitServing(START);
      }
      log("two instances per group serving, two more per group waiting");
      Batch warmUp = stream.fresh("warm", WARM_UP, LATE);
      batches.add(warmUp);
      runCase(env, groups, warmUp, producer -> "");
      log("warm-up delivered");

      Map<UpstreamCase, Batch> caseBatches = Map.of(
          UpstreamCase.KILL_NINE, stream.fresh(UpstreamCase.KILL_NINE.id, RECORDS, Duration.ZERO),
          UpstreamCase.REBALANCE, stream.fresh(UpstreamCase.REBALANCE.id, RECORDS, Duration.ZERO),
          UpstreamCase.BROKER_RESTART, stream.fresh(UpstreamCase.BROKER_RESTART.id, RECORDS, Duration.ZERO),
          UpstreamCase.LATE_COMPENSATION, stream.compensation(UpstreamCase.LATE_COMPENSATION.id, RECORDS, warmUp,
              RECORDS * COMPENSATION_PERCENT / 100),
          UpstreamCase.REKEYED_RESEND, stream.rekeyed(UpstreamCase.REKEYED_RESEND.id, RECORDS, REKEYED_EVERY));
      Map<UpstreamCase, String> faults = new EnumMap<>(UpstreamCase.class);
      for (UpstreamCase c : UpstreamCase.values()) {
        Batch b = caseBatches.get(c);
        batches.add(b);
        long before = env.records();
        faults.put(c, runCase(env, groups, b, producer -> fault(c, env, groups, standbys, producer)));
        assertThat(env.records() - before).as("%s: records in the topic (an idempotent producer adds none)", c)
            .isEqualTo(b.records().size());
      }

      Map<String, Counts> plainCounts = DoubleTally.count(receipts(plainBusiness));
      Map<String, Counts> guardedCounts = DoubleTally.count(receipts(guardedBusiness));
      for (UpstreamCase c : UpstreamCase.values()) {
        Batch b = caseBatches.get(c);
        rows.add(new Row(c, b.records().size(), b.resends(), plainCounts.getOrDefault(c.id, Counts.NONE),
            guardedCounts.getOrDefault(c.id, Counts.NONE), faults.get(c)));
      }
      String md = UpstreamReport.summary(rows) + "\n\n" + setup(loadAtStart, AnswerFiles.loadAverage(),
          TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0)) + "\n\n" + UpstreamReport.markdown(rows);
      System.out.println("[q5]\n" + md);
      AnswerFiles.write("answers.q5-out", md);

      List<String> facts = batches.stream().flatMap(b -> b.facts().stream()).distinct().toList();
      assertThat(DoubleTally.missing(facts, receipts(plainBusiness))).as("facts the plain consumer never delivered").isEmpty();
      assertThat(DoubleTally.missing(facts, receipts(guardedBusiness))).as("facts the sidecar never delivered").isEmpty();
      assertThat(env.escalated()).as("records the guard escalated").isZero();
      for (Row r : rows) {
        assertThat(r.guarded().unflagged()).as("%s: facts the sidecar's business received twice unflagged", r.c()).isZero();
        assertThat(r.plain().resent()).as("%s: the plain consumer lets every re-send through", r.c()).isGreaterThanOrEqualTo(r.resends());
      }
    }
  }

  /** A group's instances started ahead: the replacement of the killed one, and the one that joins. */
  private record Standbys(SidecarProcess replacement, SidecarProcess joiner) {}

  /**
   * Produces {@code batch} at {@link #RATE}, runs {@code fault} meanwhile, waits until both groups
   * committed it all and every instance of theirs owns partitions (so that no join of this case
   * spills into the next).
   */
  private static String runCase(UpstreamEnv env, List<InstanceGroup> groups, Batch batch, FaultRun fault) throws Exception {
    try (PacedProducer producer = new PacedProducer(env.kafka.bootstrap(), env.topic, batch.records(), RATE)) {
      String what = fault.run(producer);
      producer.finish(CATCH_UP);
      for (InstanceGroup g : groups) {
        g.awaitServing(START);
        env.awaitCommitted(g.group, CATCH_UP);
        env.awaitMembers(g.group, g.size(), CATCH_UP);
      }
      log("%s: %,d records, %s; both groups committed", batch.caseId(), batch.records().size(), what);
      return what;
    }
  }

  /** A case's fault, injected while {@code producer} sends the case's records; returns what it did, as measured. */
  @FunctionalInterface
  private interface FaultRun {
    String run(PacedProducer producer) throws Exception;
  }

  /** Injects {@code c}'s fault into both groups while its records are produced; what it did, as measured. */
  private static String fault(UpstreamCase c, UpstreamEnv env, List<InstanceGroup> groups, Map<InstanceGroup, Standbys> standbys,
      PacedProducer producer) throws Exception {
    Duration wait = Duration.ofSeconds(RECORDS / RATE + 60);
    switch (c) {
      case KILL_NINE -> {
        int at = RECORDS * 4 / 10;
        producer.awaitHandedOver(at, wait);
        for (InstanceGroup g : groups) {
          g.kill(g.instance(0));
        }
        for (InstanceGroup g : groups) {
          g.join(standbys.get(g).replacement());
        }
        return String.format(Locale.ROOT, "at record %,d; the replacement %s", at, serving(groups, producer, RECORDS));
      }
      case REBALANCE -> {
        int join = RECORDS / 4;
        int leave = RECORDS * 65 / 100;
        producer.awaitHandedOver(join, wait);
        for (InstanceGroup g : groups) {
          g.join(standbys.get(g).joiner());
        }
        String joined = serving(groups, producer, leave);
        producer.awaitHandedOver(leave, wait);
        List<SidecarProcess> leaving = groups.stream().map(g -> g.instance(0)).toList();
        leaving.forEach(SidecarProcess::signalStop);
        for (int i = 0; i < groups.size(); i++) {
          groups.get(i).forget(leaving.get(i));
          // a JVM ended by SIGTERM exits 143 (128 + 15) once its shutdown hook drained the consumer
          assertThat(leaving.get(i).awaitExit(Duration.ofSeconds(40))).as("%s drained and left", leaving.get(i).name).isIn(0, 143);
        }
        return String.format(Locale.ROOT, "one joins at record %,d and %s; one leaves at record %,d", join, joined, leave);
      }
      case BROKER_RESTART -> {
        int at = RECORDS * 4 / 10;
        producer.awaitHandedOver(at, wait);
        long t = System.nanoTime();
        stack("kafka-kill");
        stack("kafka-start");
        return String.format(Locale.ROOT, "at record %,d; broker back %.1f s later, at record %,d", at, seconds(t), producer.handedOver());
      }
      case LATE_COMPENSATION -> {
        return String.format(Locale.ROOT, "%d%% of the records; the guard's L1 keys deleted first, as a 7-day TTL would have: %,d",
            COMPENSATION_PERCENT, env.wipeL1());
      }
      case REKEYED_RESEND -> {
        return String.format(Locale.ROOT, "every %dth record", REKEYED_EVERY);
      }
      default -> throw new IllegalArgumentException(c.name());
    }
  }

  /**
   * Waits until every instance of both groups serves (its consumer started), or until
   * {@code record} was produced; says at which record they served, if they did by then.
   */
  private static String serving(List<InstanceGroup> groups, PacedProducer producer, int record) throws InterruptedException {
    long t = System.nanoTime();
    while (producer.handedOver() < record) {
      boolean all = true;
      for (InstanceGroup g : groups) {
        all &= g.serving();
      }
      if (all) {
        return String.format(Locale.ROOT, "serving at record %,d (%.1f s)", producer.handedOver(), seconds(t));
      }
      TimeUnit.MILLISECONDS.sleep(250);
    }
    return String.format(Locale.ROOT, "not serving yet at record %,d (%.1f s)", record, seconds(t));
  }

  /** Every call a business received, as receipts in arrival order. */
  private static List<Receipt> receipts(RecordingBusiness business) {
    List<Receipt> out = new ArrayList<>();
    for (RecordingBusiness.Call call : business.calls()) {
      Delivery d = call.delivery();
      byte[] value = d.getRecord().getValue().toByteArray();
      String messageId = OneRouteEnv.field(value, "message_id");
      out.add(new Receipt(OneRouteEnv.field(value, FactStream.FACT_FIELD), call.coordinates(), FactStream.caseOf(messageId),
          d.getRedelivery(), d.getAttempt()));
    }
    return out;
  }

  private static String setup(String loadAtStart, String loadAtEnd, long seconds) {
    return String.format(Locale.ROOT, "%,d records per case at %,d records/s into one topic of %d partitions on the stack's broker,"
        + " after a warm-up of %d facts of 9 days ago. Each pipeline: two instances, each a JVM of its own, in a consumer group of"
        + " its own on that topic, committing every 200 ms, `session.timeout.ms` 6000; its business (gRPC, in the test JVM) answers OK"
        + " at once. Plain consumer: the sidecar's pipeline forwarding every record (the benchmark's `baseline`). OnceGuard: the"
        + " sidecar's guard, L1 + ledger + state machine, wired as `onceguard run` wires it. The replacement and the joining"
        + " instance start up ahead and join when the fault comes. Both pipelines read the same records at the same time and go"
        + " through each fault at the same moment. Received twice: facts a business received again after a first call for them"
        + " (every call it received counts, answered or not). The experiment took %d s; load average %s at its start, %s at its end.",
        RECORDS, RATE, PARTITIONS, WARM_UP, seconds, loadAtStart, loadAtEnd);
  }

  private static void stack(String command) throws IOException, InterruptedException {
    Process p = new ProcessBuilder("bash", STACK.toString(), command).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(150, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IllegalStateException("scripts/stack.sh " + command + " failed:\n" + out);
    }
  }

  private static final long T0 = System.nanoTime();

  private static void log(String format, Object... args) {
    System.out.printf(Locale.ROOT, "[q5 %5.1fs] %s%n", seconds(T0), String.format(Locale.ROOT, format, args));
  }

  private static double seconds(long sinceNanos) {
    return (System.nanoTime() - sinceNanos) / 1e9;
  }

  /** The 1, 5 and 15-minute load averages, as "a / b / c". */}
