package dev.onceguard.it.scenario;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.it.RedisProcess;
import dev.onceguard.it.RelayProcess;
import dev.onceguard.it.client.TcpGate;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.kafka.common.TopicPartition;

/**
 * Faults injected at random, from a seed, into a running scenario: a thread that, until
 * {@link #stop()}, waits a moment, picks one or two faults of different kinds, holds them for a
 * moment, heals them, and measures how long all five groups then take to commit what had been
 * produced by the heal ("recovery"). Every fault can be healed: {@link #stop()} heals what is
 * still injected, so the scenario can finish and be checked.
 *
 * <p>The faults a single machine allows: kill -9 and SIGTERM of a sidecar process (then a new one
 * with the same instance id, as a restarted pod), the business answering slowly or not at all
 * (in the test JVM: a hung handler, the connection and its PINGs alive) or a SIGSTOPped process
 * in front of it (nothing answers at all, what was sent arrives after SIGCONT), one sidecar's
 * link to MySQL slowed or cut (a relay),
 * the private Redis killed and restarted empty, and the Kafka broker killed with kill -9 and
 * restarted on its data ({@code scripts/stack.sh kafka-kill|kafka-start}); on the local cluster
 * stack ({@code scripts/cluster.sh}) instead one of three brokers or one of three Galera nodes
 * killed and restarted on its data.
 */
final class Chaos implements AutoCloseable {
  /** What can go wrong. */
  enum Kind {
    SIDECAR_KILL9, SIDECAR_SIGTERM, BUSINESS_SLOW,
    /** The business's handler never answers; its connections, HTTP/2 PINGs included, stay alive. */
    BUSINESS_HUNG,
    /**
     * The process in front of the business ({@link RelayProcess}) is SIGSTOPped, then SIGCONTed:
     * connections stay open and nothing answers, not even a PING; what was sent meanwhile arrives
     * late (held past the route's handler-timeout, after the sidecar gave up on the call).
     */
    BUSINESS_SIGSTOP,
    MYSQL_SLOW, MYSQL_CUT, REDIS_RESTART,
    /** The single broker of {@code scripts/stack.sh}. */
    KAFKA_RESTART,
    /** One of the three brokers of the local cluster stack (sometimes the controller or a partition's leader). */
    BROKER_RESTART,
    /** One of the three Galera nodes (a sidecar connected to it pauses until it is back). */
    GALERA_RESTART,
    /**
     * Cluster mode only: every Galera node stopped (SIGTERM, one after the other), then the cluster
     * started again from the node with the latest commit: a full MariaDB restart.
     */
    GALERA_FULL_RESTART
  }

  /**
   * One injected fault: whether it was one of the round's plan or picked at random after it, when
   * (seconds into the round), how long it was held, how long all groups
   * then took to catch up after its heal (a restart included in the heal), and from the injection.
   */
  record Injection(Kind kind, String detail, boolean planned, double atSeconds, long heldMillis, long recoveryMillis, long sinceInjectionMillis) {}

  /** A fault in place; healing it may take a while (a restart). */
  @FunctionalInterface
  private interface Heal {
    void run() throws Exception;
  }

  private final Random random;
  private final Fleet fleet;
  private final RecordingBusiness business;
  private final RelayProcess businessFront;
  private final RedisProcess redis;
  private final ScenarioEnv env;
  private final Path stackScript;
  private final dev.onceguard.it.ClusterScript cluster;
  private final List<Kind> kinds;
  private final Consumer<String> log;
  private final long startNanos = System.nanoTime();
  private final List<Injection> injections = Collections.synchronizedList(new ArrayList<>());
  private final List<Heal> pending = new ArrayList<>();
  /** Sidecar restarts: healed after everything else, so that a new process finds its services up. */
  private final List<Heal> restarts = new ArrayList<>();
  private final Thread thread;
  private final java.util.Deque<List<Kind>> plan;
  private final java.util.concurrent.CountDownLatch planDone = new java.util.concurrent.CountDownLatch(1);
  private volatile boolean stopping;
  private final java.util.concurrent.CountDownLatch stopSignal = new java.util.concurrent.CountDownLatch(1);
  private volatile Throwable failure;

  /**
   * @param plan faults to inject first, in this order, each entry at once (kinds the machine
   *     cannot inject are left out); then faults at random
   * @param businessFront the process the sidecars reach the business through, else null
   * @param stackScript {@code scripts/stack.sh} when the broker is its single broker, else null
   * @param cluster the local cluster stack (Kafka and Galera) the run uses, else null
   */
  Chaos(long seed, List<List<Kind>> plan, Fleet fleet, RecordingBusiness business, RelayProcess businessFront, RedisProcess redis,
      ScenarioEnv env, Path stackScript, dev.onceguard.it.ClusterScript cluster, Consumer<String> log) {
    this.random = new Random(seed);
    this.fleet = fleet;
    this.business = business;
    this.businessFront = businessFront;
    this.redis = redis;
    this.env = env;
    this.stackScript = stackScript;
    this.cluster = cluster;
    this.log = log;
    List<Kind> k = new ArrayList<>(List.of(Kind.values()));
    if (businessFront == null) {
      k.remove(Kind.BUSINESS_SIGSTOP);
    }
    if (stackScript == null) {
      k.remove(Kind.KAFKA_RESTART);
    }
    if (cluster == null) {
      k.remove(Kind.BROKER_RESTART);
      k.remove(Kind.GALERA_RESTART);
      k.remove(Kind.GALERA_FULL_RESTART);
    }
    log.accept("chaos: faults " + k);
    this.kinds = List.copyOf(k);
    this.plan = new java.util.ArrayDeque<>();
    for (List<Kind> step : plan) {
      List<Kind> possible = step.stream().filter(kinds::contains).toList();
      if (!possible.isEmpty()) {
        this.plan.add(possible);
      }
    }
    this.thread = new Thread(this::loop, "chaos");
    this.thread.setDaemon(true);
  }

  void start() {
    thread.start();
  }

  /**
   * Stops injecting, waits for the thread and heals whatever is still injected. The thread is
   * woken from its pauses, never interrupted: an injection or a heal cut off half-way (a Galera
   * node stopped by a script whose wait was interrupted, its heal never queued) would leave a
   * fault nobody heals.
   */
  void stop() throws InterruptedException {
    stopping = true;
    stopSignal.countDown();
    thread.join(TimeUnit.MINUTES.toMillis(3));
    if (thread.isAlive()) {
      throw new AssertionError("the chaos thread did not end within 3 minutes of stop()");
    }
    synchronized (pending) {
      healAll();
    }
    if (failure != null) {
      throw new AssertionError("the chaos thread failed", failure);
    }
  }

  @Override
  public void close() throws InterruptedException {
    stop();
  }

  /** Until the planned faults were injected and healed (or the thread ended); false on timeout. */
  boolean awaitPlan(Duration timeout) throws InterruptedException {
    return planDone.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** The kinds this machine can inject. */
  List<Kind> kinds() {
    return kinds;
  }

  List<Injection> injections() {
    synchronized (injections) {
      return List.copyOf(injections);
    }
  }

  private void loop() {
    try {
      while (!stopping) {
        if (plan.isEmpty()) {
          planDone.countDown();
        }
        sleep(500 + random.nextInt(plan.isEmpty() ? 3_000 : 1_000));
        boolean planned = !plan.isEmpty();
        List<Kind> now = planned ? plan.poll() : pick();
        long t0 = System.nanoTime();
        List<String> details = new ArrayList<>();
        synchronized (pending) {
          for (Kind k : now) {
            details.add(inject(k));
            log.accept("chaos: injected " + details.get(details.size() - 1));
          }
        }
        sleep(1_000 + random.nextInt(plan.isEmpty() ? 5_000 : 2_000));
        long held = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        synchronized (pending) {
          healAll();
        }
        long recovery = recoveryMillis();
        long total = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        double at = (t0 - startNanos) / 1e9;
        for (int i = 0; i < now.size(); i++) {
          injections.add(new Injection(now.get(i), details.get(i), planned, at, held, recovery, total));
        }
        log.accept(String.format("chaos: %s held %d ms; all groups caught up %d ms after the heal, %d ms after the injection", details,
            held, recovery, total));
      }
    } catch (Stopped e) {
      // stop() came during a pause: it heals what is injected
    } catch (Throwable t) {
      failure = t;
      log.accept("chaos: failed: " + t);
    } finally {
      planDone.countDown();
    }
  }

  /** One fault, or two of different kinds at once (a third of the time). */
  private List<Kind> pick() {
    Kind first = kinds.get(random.nextInt(kinds.size()));
    if (random.nextInt(3) != 0) {
      return List.of(first);
    }
    Kind second;
    do {
      second = kinds.get(random.nextInt(kinds.size()));
    } while (second == first || (isSidecarFault(first) && isSidecarFault(second)) || (isGaleraFault(first) && isGaleraFault(second)));
    return List.of(first, second);
  }

  private static boolean isSidecarFault(Kind k) {
    return k == Kind.SIDECAR_KILL9 || k == Kind.SIDECAR_SIGTERM;
  }

  /** One node's restart inside a restart of them all would heal in the wrong order (the node first, with no cluster to join). */
  private static boolean isGaleraFault(Kind k) {
    return k == Kind.GALERA_RESTART || k == Kind.GALERA_FULL_RESTART;
  }

  /** Injects {@code k} now and queues its heal; returns what was done, for the log. */
  private String inject(Kind k) throws Exception {
    int i = random.nextInt(fleet.size());
    switch (k) {
      case SIDECAR_KILL9 -> {
        fleet.kill(i);
        restarts.add(() -> fleet.restart(i));
        return "kill -9 of sidecar " + i;
      }
      case SIDECAR_SIGTERM -> {
        int exit = fleet.terminate(i);
        restarts.add(() -> fleet.restart(i));
        return "SIGTERM of sidecar " + i + " (exit " + exit + ")";
      }
      case BUSINESS_SLOW -> {
        Duration d = Duration.ofMillis(100 + random.nextInt(700));
        business.behave(x -> Reply.ok().after(d));
        pending.add(() -> business.behave(x -> Reply.ok()));
        return "business answers after " + d.toMillis() + " ms";
      }
      case BUSINESS_HUNG -> {
        business.behave(x -> Reply.hang());
        pending.add(() -> business.behave(x -> Reply.ok()));
        return "business hung";
      }
      case BUSINESS_SIGSTOP -> {
        businessFront.pause();
        pending.add(businessFront::resume);
        return "business front SIGSTOPped (pid " + businessFront.pid() + ")";
      }
      case MYSQL_SLOW -> {
        Duration d = Duration.ofMillis(5 + random.nextInt(45));
        fleet.gate(i).delay(d);
        pending.add(() -> fleet.gate(i).delay(Duration.ZERO));
        return "MySQL link of sidecar " + i + " delayed " + d.toMillis() + " ms each way";
      }
      case MYSQL_CUT -> {
        fleet.gate(i).cut();
        pending.add(() -> fleet.gate(i).restore());
        return "MySQL link of sidecar " + i + " cut";
      }
      case REDIS_RESTART -> {
        redis.kill();
        pending.add(redis::restart);
        return "Redis killed (restarted empty)";
      }
      case KAFKA_RESTART -> {
        stack("kafka-kill");
        pending.add(() -> stack("kafka-start"));
        return "Kafka broker killed (kill -9, restarted on its data)";
      }
      case BROKER_RESTART, GALERA_RESTART -> {
        String node = (k == Kind.BROKER_RESTART ? "kafka-" : "galera-") + (1 + random.nextInt(3));
        cluster.kill(node);
        pending.add(() -> cluster.start(node));
        return node + " killed (kill -9, restarted on its data)";
      }
      case GALERA_FULL_RESTART -> {
        for (int n = 1; n <= 3; n++) {
          cluster.stop("galera-" + n);
        }
        pending.add(() -> cluster.restart("galera"));
        return "every Galera node stopped (the cluster restarts from the latest commit)";
      }
      default -> throw new IllegalStateException(k.name());
    }
  }

  private void healAll() {
    List<Heal> heals = new ArrayList<>(pending);
    Collections.reverse(heals);
    heals.addAll(restarts);
    pending.clear();
    restarts.clear();
    for (Heal h : heals) {
      try {
        h.run();
      } catch (Exception e) {
        throw new IllegalStateException("healing a fault failed", e);
      }
    }
  }

  /** Until every group committed the end offsets its topic had now (bounded by the driver's wave timeout). */
  private long recoveryMillis() throws InterruptedException {
    long t0 = System.nanoTime();
    Map<String, Map<TopicPartition, Long>> ends = new java.util.HashMap<>();
    for (String r : OrderScenario.ROUTES) {
      ends.put(r, env.kafka.endOffsets(env.topic(r)));
    }
    long deadline = t0 + ScenarioDriver.WAVE_TIMEOUT.toNanos();
    while (System.nanoTime() < deadline) {
      boolean all = true;
      for (String r : OrderScenario.ROUTES) {
        Map<TopicPartition, Long> committed = env.kafka.committedOffsets(env.groups.get(r), env.topic(r));
        for (Map.Entry<TopicPartition, Long> e : ends.get(r).entrySet()) {
          all &= committed.getOrDefault(e.getKey(), 0L) >= e.getValue();
        }
      }
      if (all) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      }
      Thread.sleep(100);
    }
    throw new AssertionError("the groups did not catch up within " + ScenarioDriver.WAVE_TIMEOUT + " of a heal");
  }

  private void stack(String command) throws IOException, InterruptedException {
    Process p = new ProcessBuilder("bash", stackScript.toString(), command).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    if (!p.waitFor(150, TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IllegalStateException("scripts/stack.sh " + command + " failed:\n" + out);
    }
  }

  /** A pause that {@link #stop()} cuts short. */
  private void sleep(long millis) throws InterruptedException, Stopped {
    if (stopSignal.await(millis, TimeUnit.MILLISECONDS)) {
      throw new Stopped();
    }
  }

  /** {@link #stop()} was called during a pause. */
  private static final class Stopped extends Exception {
    Stopped() {
      super(null, null, false, false);
    }
  }

  /** {@code scripts/stack.sh} of this checkout when the broker under test is its own, else null. */
  static Path stackScriptOwningTheBroker() {
    for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
      Path script = d.resolve("scripts/stack.sh");
      Path port = d.resolve(".stack/state/kafka.port");
      if (Files.isRegularFile(script)) {
        try {
          String bootstrap = System.getenv("ONCEGUARD_KAFKA_BOOTSTRAP");
          return Files.isRegularFile(port) && bootstrap != null && bootstrap.trim().equals("127.0.0.1:" + Files.readString(port).trim())
              ? script : null;
        } catch (IOException e) {
          return null;
        }
      }
    }
    return null;
  }

  /** Counts per kind, for the report. */
  static Map<Kind, Integer> counts(List<Injection> injections) {
    Map<Kind, Integer> out = new EnumMap<>(Kind.class);
    for (Injection i : injections) {
      out.merge(i.kind(), 1, Integer::sum);
    }
    return out;
  }

  /**
   * The sidecar processes of a round, each reaching MySQL through its own {@link TcpGate}; a
   * restarted one gets the same instance id and configuration (a restarted pod).
   */
  static final class Fleet implements AutoCloseable {
    private final ScenarioEnv env;
    private final String target;
    private final String name;
    private final List<TcpGate> gates = new ArrayList<>();
    private final List<SidecarProcess> processes = new ArrayList<>();
    private final List<Integer> starts = new ArrayList<>();

    /**
     * @param target the business's host:port
     * @param mysqlPorts MySQL servers on loopback: sidecar {@code i} reaches the {@code i % n}-th (a Galera node each)
     */
    Fleet(ScenarioEnv env, String target, String name, int size, List<Integer> mysqlPorts) throws InterruptedException {
      this.env = env;
      this.target = target;
      this.name = name;
      try {
        for (int i = 0; i < size; i++) {
          gates.add(new TcpGate(dev.onceguard.it.ItEnv.mysqlHost(), mysqlPorts.get(i % mysqlPorts.size())));
          processes.add(null);
          starts.add(0);
          restart(i);
        }
      } catch (RuntimeException | InterruptedException | Error e) {
        close();
        throw e;
      }
    }

    int size() {
      return gates.size();
    }

    TcpGate gate(int i) {
      return gates.get(i);
    }

    synchronized void kill(int i) throws InterruptedException {
      processes.get(i).kill();
    }

    /** SIGTERM and the exit code once it drained (the shutdown timeout is 10 s). */
    synchronized int terminate(int i) throws InterruptedException {
      return processes.get(i).stop(Duration.ofSeconds(60));
    }

    /** A new process for slot {@code i} (the old one, if still alive, is killed first); returns once SERVING. */
    synchronized void restart(int i) throws InterruptedException {
      SidecarProcess old = processes.get(i);
      if (old != null) {
        old.close();
      }
      int n = starts.get(i) + 1;
      starts.set(i, n);
      int port = RecordingBusiness.freePort();
      String yaml = env.yaml(ScenarioEnv.Instance.of(name + "-" + i, target).grpcPort(port).mysqlPort(gates.get(i).port()).lease("10s"));
      SidecarProcess p = SidecarProcess.start(name + "-" + i + "-" + n, yaml, port);
      processes.set(i, p);
      p.awaitServing(Duration.ofSeconds(90));
    }

    @Override
    public synchronized void close() {
      for (SidecarProcess p : processes) {
        if (p != null) {
          p.close();
        }
      }
      gates.forEach(TcpGate::close);
    }
  }
}
