package dev.onceguard.it.faults;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.faults.Fault.Call;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.RedisIdempotencyCache;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The fault model: every outcome of every call a record's way makes, tried by construction.
 *
 * <p>Each {@link Scenario} runs first without faults; its calls are numbered (claim, takeover,
 * renew, confirm, abort, heartbeat, the business call, the escalation and verdict writes). Then it
 * runs once per (call, fault) — every single-fault schedule — and on a seeded sample of pairs
 * (a second fault at a later call of the single-fault run). Each call meets one of: fail before any
 * effect, take effect then lose the answer, take effect then hang past its deadline, succeed as the
 * partition is revoked, crash before it, crash after it; a crashed or revoked record is consumed
 * again by a new instance, as Kafka would. The store is the real {@link MysqlGuardStore} on the
 * real MariaDB, so the SQL decides what a repeated or lost step did.
 *
 * <p>{@link Judge} checks the outcome of every schedule against the guarantees (applied once,
 * ignored only as a fact already applied, escalated with its reason, every later delivery flagged,
 * the last verdict true, no partition stalled, no entity left blocked). Deterministic: the same
 * schedule makes the same calls in the same order ({@link World}).
 *
 * <p>System properties: {@code faults.pairs} (pair schedules per scenario, default 120),
 * {@code faults.seed}. The report: {@code target/fault-model/report.md}.
 */
class FaultModelIT {
  static final String CONFIG = """
      machines:
        order:
          states: [created, paid, shipped]
          terminal: [shipped]
          events:
            create: {to: created}
            pay: {from: [created], to: paid}
            ship: {from: [paid], to: shipped}
      routes:
        - name: orders
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /event]
          fingerprint-exclude: [/sent_at]
          target: 127.0.0.1:1
          verdict-topic: orders.verdicts
        - name: pulled
          topics: [pulled]
          mode: pull
          machine: order
          entity-id: /order_id
          event: /event
          business-key: [/order_id, /event]
          fingerprint-exclude: [/sent_at]
          verdict-topic: pulled.verdicts
        - name: lines
          topics: [lines]
          business-key: [/line_id]
          fingerprint-exclude: [/sent_at]
          target: 127.0.0.1:1
          verdict-topic: lines.verdicts
          retry: {max-attempts: 2}
      """;

  /** Deliveries of one record before its partition counts as stalled. */
  static final int MAX_DELIVERIES = 6;
  /** Virtual time one record may take, first delivery to commit, before it counts as stalled: a lease, a hung Kafka write, and a minute. */
  static final long RECORD_BOUND_MILLIS = 30_000 + 120_000 + 60_000;

  static final int PAIRS = Integer.getInteger("faults.pairs", 120);
  static final long SEED = Long.getLong("faults.seed", 20261202L);

  static String database;
  static Db db;
  static MysqlGuardStore store;
  static RedisIdempotencyCache l1;
  static String redisPrefix;
  static SidecarConfig config;
  static String prefix;
  static int runs;

  @BeforeAll
  static void setUp() {
    database = "og_fm_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    String yaml = "kafka:\n  bootstrap-servers: 127.0.0.1:1\n"
        + "mysql:\n  host: " + ItEnv.mysqlHost() + "\n  port: " + ItEnv.mysqlPort() + "\n  user: " + ItEnv.mysqlUser()
        + "\n  password: '" + ItEnv.mysqlPassword() + "'\n  database: " + database + "\n  pool-size: 4\n" + CONFIG;
    config = new ConfigReader(Map.of()).parse(yaml, "fault-model");
    prefix = config.mysql().tablePrefix();
    db = new Db(config.mysql());
    new Migrations(db, prefix).migrate();
    store = new MysqlGuardStore(db, prefix);
    redisPrefix = "ogfm:" + database + ":";
    l1 = new RedisIdempotencyCache(new SidecarConfig.RedisConfig(ItEnv.redisUri(), java.time.Duration.ofSeconds(2), redisPrefix,
        java.time.Duration.ofSeconds(1)), store.ledgerId().toCompletableFuture().join(), dev.onceguard.proxy.time.Clock.SYSTEM);
    // connected before the first run, so that every run sees L1 as it is (the cache connects in the
    // background and answers "not seen" until then)
    long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    while (l1.hits() + l1.misses() == 0 && System.nanoTime() < deadline) {
      l1.seen("probe", "probe", "probe").toCompletableFuture().join();
      java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
    }
    assertThat(l1.hits() + l1.misses()).as("Redis L1 at %s answers", ItEnv.redisUri()).isPositive();
  }

  @AfterAll
  static void tearDown() {
    if (l1 != null) {
      l1.close();
      ItEnv.deleteRedisKeys(redisPrefix);
    }
    if (db != null) {
      try {
        db.execute("DROP DATABASE IF EXISTS " + database);
      } finally {
        db.close();
      }
    }
  }

  /** One schedule's run: the calls it made, and what the judge found wrong. */
  record Outcome(Scenario scenario, Map<Integer, Fault> plan, List<Call> calls, List<String> trace, List<String> violations,
      List<World.Written> verdicts, List<Business.Received> received) {
    String schedule() {
      StringBuilder sb = new StringBuilder();
      plan.forEach((n, f) -> sb.append(sb.isEmpty() ? "" : ", ").append(f).append(" at #").append(n).append(' ').append(calls.size() > n ? calls.get(n) : "?"));
      return plan.isEmpty() ? "no fault" : sb.toString();
    }
  }

  @Test
  void everySingleFaultAndSampledPairs_keepEveryRecordsGuarantees() throws IOException {
    List<Outcome> all = new ArrayList<>();
    Map<String, int[]> perScenario = new LinkedHashMap<>();
    for (Scenario s : Scenario.ALL) {
      Outcome base = run(s, Map.of());
      assertThat(base.violations()).as("%s without faults:\n%s", s.name(), String.join("\n", base.trace())).isEmpty();
      all.add(base);
      List<Outcome> singles = new ArrayList<>();
      for (int i = 0; i < base.calls().size(); i++) {
        for (Fault f : base.calls().get(i).faults()) {
          singles.add(run(s, Map.of(i, f)));
        }
      }
      all.addAll(singles);
      List<Map<Integer, Fault>> pairs = new ArrayList<>();
      for (Outcome o : singles) {
        int first = o.plan().keySet().iterator().next();
        for (int j = first + 1; j < o.calls().size(); j++) {
          for (Fault g : o.calls().get(j).faults()) {
            Map<Integer, Fault> p = new TreeMap<>(o.plan());
            p.put(j, g);
            pairs.add(p);
          }
        }
      }
      Collections.shuffle(pairs, new Random(SEED + s.name().hashCode()));
      int pairRuns = Math.min(PAIRS, pairs.size());
      for (Map<Integer, Fault> p : pairs.subList(0, pairRuns)) {
        all.add(run(s, p));
      }
      perScenario.put(s.name(), new int[] {base.calls().size(), singles.size(), pairRuns, pairs.size()});
    }
    List<Outcome> bad = all.stream().filter(o -> !o.violations().isEmpty()).toList();
    writeReport(all, bad, perScenario);
    String table = FailureTable.of(all);
    Files.writeString(Path.of("target", "fault-model", "failure-model-table.md"), table);
    if (Boolean.getBoolean("faults.write-doc")) {
      Files.writeString(FailureTable.DOC, FailureTable.page(table));
    }
    StringBuilder why = new StringBuilder();
    for (Outcome o : bad.subList(0, Math.min(6, bad.size()))) {
      why.append("\n\n").append(o.scenario().name()).append(": ").append(o.schedule()).append("\n  ")
          .append(String.join("\n  ", o.violations())).append("\n  calls:\n    ").append(String.join("\n    ", o.trace()));
    }
    assertThat(bad).as("%d of %d schedules broke a guarantee (report: target/fault-model/report.md); first ones:%s", bad.size(),
        all.size(), why).isEmpty();
    assertThat(FailureTable.published()).as("docs/failure-model.md is the table this model produces (regenerate it with"
        + " `make failure-model`; this run's table: target/fault-model/failure-model-table.md)").isEqualTo(table);
  }

  /** Runs {@code s} under {@code plan} with fresh entity ids, and judges it. */
  Outcome run(Scenario s, Map<Integer, Fault> plan) {
    String runId = "r" + (++runs);
    RouteConfig route = config.routes().stream().filter(r -> r.name().equals(s.route())).findFirst().orElseThrow();
    Business business = new Business(s.script());
    World w = new World(db, prefix, plan, business, System.currentTimeMillis());
    business.bind(w);
    List<ConsumerRecord<byte[], byte[]>> records = s.records(route.intake().topics().get(0), runId);
    List<String> violations = new ArrayList<>();
    int[] instances = {0};
    java.util.function.Supplier<Instance> next =
        () -> new Instance(w, runId + "-" + (++instances[0]), store, l1, config, route);
    try {
      Instance inst = next.get();
      for (ConsumerRecord<byte[], byte[]> r : records) {
        if (s.viaApi(r.offset())) {
          ApiCaller caller = new ApiCaller(w, runId, r, inst, next);
          boolean finished = caller.run(violations);
          inst = caller.inst;
          if (!finished) {
            break;
          }
          continue;
        }
        long firstAt = w.nowMillis();
        int deliveries = 0;
        boolean committed = false;
        while (!committed) {
          if (++deliveries > MAX_DELIVERIES) {
            violations.add("STALLED: record @" + r.offset() + " still unfinished after " + MAX_DELIVERIES + " deliveries");
            break;
          }
          if (inst.dead) {
            inst = next.get();
          }
          Instance cur = inst;
          CompletableFuture<Void> f = cur.process(r);
          if (!w.runUntil(() -> f.isDone() || cur.dead, firstAt + RECORD_BOUND_MILLIS)) {
            violations.add("STALLED: record @" + r.offset() + " neither finished nor failed within "
                + RECORD_BOUND_MILLIS / 1000 + " s (nothing left to happen, or past the bound)");
            break;
          }
          if (f.isDone() && !f.isCompletedExceptionally()) {
            committed = true;
          } else if (cur.dead || cancelled(f)) {
            // a crash, or a revocation: the partition goes to another instance, which consumes the
            // record again from the last committed offset (a revoked instance lives on)
            inst = next.get();
          }
          // else: a step threw; the pipeline gives the record to the same instance again
        }
        if (!committed) {
          break;
        }
      }
      w.awaitQuiet();
    } catch (World.Hung h) {
      violations.add("HUNG: " + h.getMessage());
    }
    if (violations.isEmpty()) {
      violations.addAll(new Judge(s, route, records, w).check());
    }
    return new Outcome(s, plan, List.copyOf(w.calls), List.copyOf(w.trace), violations, List.copyOf(w.verdicts),
        List.copyOf(business.received));
  }

  /**
   * A Guard API caller that is also the business for its fact: Submit with a request id of its
   * own; on ACCEPTED it applies the fact as the script says and Completes OK or REJECT. A transient
   * status (UNAVAILABLE, ABORTED) is retried after a second, the same call again; a crash of the
   * sidecar drops the connection and the caller submits again to the next instance; a Complete
   * answered NOT_FOUND (the claim was lost) starts over with a Submit.
   */
  final class ApiCaller {
    private final World w;
    private final ConsumerRecord<byte[], byte[]> r;
    private final java.util.function.Supplier<Instance> next;
    private final String requestId;
    Instance inst;

    ApiCaller(World w, String runId, ConsumerRecord<byte[], byte[]> r, Instance inst, java.util.function.Supplier<Instance> next) {
      this.w = w;
      this.r = r;
      this.inst = inst;
      this.next = next;
      this.requestId = "req-" + runId + "-" + r.offset();
    }

    /** One call's answer, or its status. */
    final class Answer<T> implements io.grpc.stub.StreamObserver<T> {
      volatile T value;
      volatile io.grpc.Status status;
      volatile boolean done;

      @Override
      public void onNext(T v) {
        value = v;
      }

      @Override
      public void onError(Throwable t) {
        status = io.grpc.Status.fromThrowable(t);
        done = true;
      }

      @Override
      public void onCompleted() {
        done = true;
      }
    }

    /** False if the step could not finish (a violation was added). */
    boolean run(List<String> violations) {
      long firstAt = w.nowMillis();
      for (int calls = 0; calls < 4 * MAX_DELIVERIES; calls++) {
        if (inst.dead) {
          inst = next.get();
        }
        Instance cur = inst;
        Answer<dev.onceguard.v1.SubmitResponse> sub = new Answer<>();
        cur.api.submit(dev.onceguard.v1.SubmitRequest.newBuilder().setRoute(cur.route.name()).setRequestId(requestId)
            .setKey(com.google.protobuf.ByteString.copyFrom(r.key())).setValue(com.google.protobuf.ByteString.copyFrom(r.value()))
            .build(), sub);
        if (!await(cur, () -> sub.done, firstAt, violations)) {
          return false;
        }
        if (cur.dead) {
          continue;
        }
        if (sub.status != null) {
          if (!transient_(sub.status, violations)) {
            return false;
          }
          pause(cur);
          continue;
        }
        dev.onceguard.v1.SubmitResponse resp = sub.value;
        if (resp.getClaimToken().isEmpty()) {
          w.verdicts.add(new World.Written(r.offset(), resp.getVerdict(), w.nextEvent(), cur.name));
          return true;
        }
        dev.onceguard.v1.Delivery d = dev.onceguard.v1.Delivery.newBuilder().setRoute(cur.route.name())
            .setDedupKey(resp.getVerdict().getDedupKey()).setEvent(resp.getVerdict().getEvent()).setRedelivery(resp.getRedelivery())
            .setDeliveryId(requestId + "#" + calls).setRecord(dev.onceguard.v1.KafkaRecord.newBuilder().setOffset(r.offset())
                .setKey(com.google.protobuf.ByteString.copyFrom(r.key())))
            .build();
        dev.onceguard.proxy.dispatch.DispatchResult applied = w.business.receive(d, cur.name + " (API caller)");
        dev.onceguard.v1.HandleResult.Outcome outcome = applied.kind() == dev.onceguard.proxy.dispatch.DispatchResult.Kind.OK
            ? dev.onceguard.v1.HandleResult.Outcome.OK : dev.onceguard.v1.HandleResult.Outcome.REJECT;
        while (true) {
          Answer<dev.onceguard.v1.CompleteResponse> co = new Answer<>();
          cur.api.complete(dev.onceguard.v1.CompleteRequest.newBuilder().setClaimToken(resp.getClaimToken()).setOutcome(outcome)
              .build(), co);
          if (!await(cur, () -> co.done, firstAt, violations)) {
            return false;
          }
          if (cur.dead || co.status != null && co.status.getCode() == io.grpc.Status.Code.NOT_FOUND) {
            break; // submit again: the claim is taken over, or the key is settled by its other holder
          }
          if (co.status != null) {
            if (!transient_(co.status, violations)) {
              return false;
            }
            pause(cur);
            continue;
          }
          w.verdicts.add(new World.Written(r.offset(), co.value.getVerdict(), w.nextEvent(), cur.name));
          return true;
        }
      }
      violations.add("STALLED: API step @" + r.offset() + " still unfinished after " + 4 * MAX_DELIVERIES + " calls");
      return false;
    }

    private boolean await(Instance cur, java.util.function.BooleanSupplier done, long firstAt, List<String> violations) {
      if (!w.runUntil(() -> done.getAsBoolean() || cur.dead, firstAt + RECORD_BOUND_MILLIS)) {
        violations.add("STALLED: API step @" + r.offset() + " got no answer within " + RECORD_BOUND_MILLIS / 1000 + " s");
        return false;
      }
      return true;
    }

    private boolean transient_(io.grpc.Status st, List<String> violations) {
      if (st.getCode() == io.grpc.Status.Code.UNAVAILABLE || st.getCode() == io.grpc.Status.Code.ABORTED) {
        return true;
      }
      violations.add("API_ERROR: API step @" + r.offset() + " answered " + st);
      return false;
    }

    /** The caller's backoff: a second of the run's time. */
    private void pause(Instance cur) {
      CompletableFuture<Void> t = w.timer(cur, java.time.Duration.ofSeconds(1));
      w.runUntil(() -> t.isDone() || cur.dead, Long.MAX_VALUE);
    }
  }

  private static boolean cancelled(CompletableFuture<Void> f) {
    try {
      f.join();
      return false;
    } catch (CompletionException e) {
      return e.getCause() instanceof dev.onceguard.proxy.pipeline.Cancellation.CancelledException;
    } catch (java.util.concurrent.CancellationException e) {
      return true;
    }
  }

  /** The guarantees, checked on what the business, the topics and the tables hold after a run. */
  final class Judge {
    private final Scenario s;
    private final RouteConfig route;
    private final List<ConsumerRecord<byte[], byte[]>> records;
    private final World w;
    private final Extractor extractor;

    Judge(Scenario s, RouteConfig route, List<ConsumerRecord<byte[], byte[]>> records, World w) {
      this.s = s;
      this.route = route;
      this.records = records;
      this.w = w;
      this.extractor = new Extractor(route, route.machine() == null ? null : config.machines().get(route.machine()));
    }

    private String key(ConsumerRecord<byte[], byte[]> r) {
      return ((Extraction.Ok) extractor.extract(r.key(), r.value(), r.headers())).event().dedupKey();
    }

    List<String> check() {
      List<String> out = new ArrayList<>();
      Business b = w.business;
      Map<String, List<Object>> ledger = new LinkedHashMap<>();
      for (ConsumerRecord<byte[], byte[]> r : records) {
        String k = key(r);
        List<List<Object>> rows = db.select("SELECT status, source_offset FROM " + prefix + "ledger WHERE route = ? AND dedup_key = ?",
            route.name(), k);
        if (!rows.isEmpty()) {
          ledger.put(k, rows.get(0));
        }
      }
      for (ConsumerRecord<byte[], byte[]> r : records) {
        long off = r.offset();
        String k = key(r);
        String at = "record @" + off + " (" + new String(r.value(), StandardCharsets.UTF_8) + ")";
        World.Written last = w.verdicts.stream().filter(v -> v.offset() == off).reduce((x, y) -> y).orElse(null);
        if (last == null) {
          out.add("NO_VERDICT: " + at + " was committed without a verdict on the verdict topic");
          continue;
        }
        Disposition d = last.verdict().getDisposition();
        Reason reason = last.verdict().getReason();
        Long applied = b.appliedAt.get(k);
        boolean appliedBefore = applied != null && applied < last.seq();
        String verdict = d + "/" + reason + " (" + last.verdict().getDetail() + ")";
        List<Object> row = ledger.get(k);
        // in flight: another owner holds the fact and finishes it, so it must be applied by the end
        boolean inFlightAndApplied = reason == Reason.IN_FLIGHT && applied != null;
        if (d == Disposition.DUPLICATE_IGNORE && !appliedBefore && !inFlightAndApplied) {
          out.add("LOST_FACT: " + at + " ended " + verdict + ", but the business had not applied its key");
        }
        if (d == Disposition.ACCEPTED && (!appliedBefore || row == null || !"DONE".equals(row.get(0)))) {
          out.add("FALSE_ACCEPT: " + at + " ended ACCEPTED, but applied=" + appliedBefore + ", ledger=" + row);
        }
        if (d == Disposition.ILLEGAL_TRANSITION_ESCALATE) {
          boolean written = w.escalations.stream().anyMatch(e -> e.offset() == off && e.verdict().getReason() == reason);
          if (!written && !s.viaApi(off)) {
            out.add("ESCALATION_MISSING: " + at + " ended " + verdict + ", but nothing was written to the escalation topic");
          }
          boolean businessRefused = reason == Reason.BUSINESS_REJECTED
              && b.received.stream().anyMatch(x -> x.offset() == off);
          if (!businessRefused && !s.allowed().getOrDefault(off, java.util.Set.of()).contains(reason.name())) {
            out.add("WRONG_ESCALATION: " + at + " ended " + verdict);
          }
        }
        if (row != null && "DONE".equals(row.get(0)) && ((Number) row.get(1)).longValue() == off && !s.viaApi(off)
            && d != Disposition.ACCEPTED) {
          out.add("UNTRUE_LAST_VERDICT: " + at + " is the record that applied its key (the DONE row's source), but its last"
              + " verdict is " + verdict);
        }
      }
      Map<String, List<Business.Received>> byKey = new LinkedHashMap<>();
      for (Business.Received x : b.received) {
        byKey.computeIfAbsent(x.delivery().getDedupKey(), q -> new ArrayList<>()).add(x);
      }
      byKey.forEach((k, list) -> {
        for (int i = 1; i < list.size(); i++) {
          Business.Received x = list.get(i);
          // unflagged is right only while every earlier delivery was answered "not applied" (RETRY)
          // by the business itself, and the sidecar heard that answer
          boolean neverMaybeApplied = list.subList(0, i).stream()
              .allMatch(p -> p.answer() == Business.Answer.RETRY && b.heardRetry.contains(p.delivery().getDeliveryId()));
          if (!x.delivery().getRedelivery() && !neverMaybeApplied) {
            out.add("UNFLAGGED_REDELIVERY: delivery " + (i + 1) + " of key " + k.substring(0, 12) + " (record @" + x.offset()
                + ", instance " + x.instance() + ") is not flagged, though the business may have applied the key before");
          }
        }
      });
      // a record given up after its attempts ran out, when an answer was lost, is escalated saying
      // the business may have applied it: the ledger and the business may then disagree, and the
      // escalation is what tells a human to look
      java.util.Set<String> mayHaveApplied = new java.util.HashSet<>();
      for (ConsumerRecord<byte[], byte[]> r : records) {
        w.verdicts.stream().filter(v -> v.offset() == r.offset()).reduce((x, y) -> y)
            .filter(v -> v.verdict().getReason() == Reason.BUSINESS_REJECTED
                && v.verdict().getDetail().contains(dev.onceguard.proxy.guard.GuardedProcessor.MAY_HAVE_APPLIED))
            .ifPresent(v -> mayHaveApplied.add(key(r)));
      }
      ledger.forEach((k, row) -> {
        if ("PENDING".equals(row.get(0))) {
          out.add("BLOCKED: ledger row " + k.substring(0, 12) + " is still PENDING after every record was committed");
        }
        if (b.appliedAt.containsKey(k) != "DONE".equals(row.get(0)) && !mayHaveApplied.contains(k)) {
          out.add("LEDGER_DISAGREES: key " + k.substring(0, 12) + " applied by the business=" + b.appliedAt.containsKey(k)
              + ", ledger " + row.get(0));
        }
      });
      for (String k : b.appliedAt.keySet()) {
        if (!ledger.containsKey(k)) {
          out.add("LEDGER_DISAGREES: key " + k.substring(0, 12) + " applied by the business, no ledger row");
        }
      }
      if (s.machine()) {
        String entityId = new String(records.get(0).key(), StandardCharsets.UTF_8); // a machine scenario's key is its entity id
        List<List<Object>> e = db.select("SELECT state, pending_key FROM " + prefix + "entity WHERE machine = ? AND entity_id = ?",
            route.machine(), entityId);
        String expected = b.received.stream().filter(x -> x.answer() == Business.Answer.OK && x.seq() == b.appliedAt.get(x.delivery().getDedupKey()))
            .reduce((x, y) -> y).map(x -> s.toState().get(x.delivery().getEvent())).orElse(null);
        String state = e.isEmpty() ? null : (String) e.get(0).get(0);
        if (!e.isEmpty() && e.get(0).get(1) != null) {
          out.add("BLOCKED: entity " + entityId + " still has pending transition " + e.get(0).get(1));
        }
        if (!java.util.Objects.equals(expected, state) && mayHaveApplied.isEmpty()) {
          out.add("WRONG_STATE: entity " + entityId + " is " + state + ", the business applied up to " + expected);
        }
      }
      return out;
    }
  }

  private static void writeReport(List<Outcome> all, List<Outcome> bad, Map<String, int[]> perScenario) throws IOException {
    Path dir = Path.of("target", "fault-model");
    Files.createDirectories(dir);
    StringBuilder sb = new StringBuilder("# Fault model report\n\n");
    sb.append("Schedules run: ").append(all.size()).append("; broke a guarantee: ").append(bad.size()).append("\n\n");
    sb.append("| scenario | calls without faults | single-fault schedules | pair schedules run (of) |\n|---|---|---|---|\n");
    perScenario.forEach((n, c) -> sb.append("| ").append(n).append(" | ").append(c[0]).append(" | ").append(c[1]).append(" | ")
        .append(c[2]).append(" (").append(c[3]).append(") |\n"));
    Map<String, List<Outcome>> byKind = new TreeMap<>();
    for (Outcome o : bad) {
      for (String v : o.violations()) {
        byKind.computeIfAbsent(v.substring(0, v.indexOf(':')), k -> new ArrayList<>()).add(o);
      }
    }
    byKind.forEach((k, list) -> {
      sb.append("\n## ").append(k).append(" (").append(list.size()).append(" schedules)\n");
      for (Outcome o : list.stream().distinct().limit(3).toList()) {
        sb.append("\n").append(o.scenario().name()).append(": ").append(o.schedule()).append("\n\n```\n")
            .append(String.join("\n", o.violations())).append("\n\n").append(String.join("\n", o.trace())).append("\n```\n");
      }
    });
    Files.writeString(dir.resolve("report.md"), sb.toString());
  }
}
