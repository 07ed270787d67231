package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.ConfigException;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.Secrets;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.pipeline.ConsumerProperties;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.Migrations;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.proxy.trace.Tracing;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * Command line: {@code onceguard run --config FILE}, {@code onceguard validate --config FILE} and
 * {@code onceguard migrate --config FILE}.
 *
 * <p>Exit codes: 0 success (for {@code run}: stopped by SIGTERM/SIGINT after a drain); 1 runtime
 * failure (a route consumer died, the port could not be bound, {@code run --fail-fast} could not
 * reach MySQL or Kafka); 2 bad configuration or usage; 3 an operator command refused
 * ({@link AdminCommands#EXIT_REFUSED}); 4 the environment is not ready for the configuration
 * ({@code validate --connect} found a problem, or {@code run} found an escalation or verdict topic
 * missing). Configuration errors print one line {@code config error: <path>: <message>}
 * per problem on stderr, every problem at once, without a stack trace.
 */
@Command(name = "onceguard", mixinStandardHelpOptions = true, versionProvider = Main.Version.class,
    description = "Kafka-to-gRPC sidecar that rejects duplicates and illegal state transitions.",
    subcommands = {CommandLine.HelpCommand.class, Main.Run.class, Main.Validate.class, Main.Migrate.class, AdminCommands.Explain.class,
        AdminCommands.ResetEntity.class,
        AdminCommands.Redrive.class, TtlAdviceCommand.class, AuditKeyCommand.class})
public final class Main implements Runnable {
  /** Environment variable naming the configuration file when {@code --config} is not given. */
  static final String CONFIG_ENV = "ONCEGUARD_CONFIG";
  static final int EXIT_OK = 0;
  static final int EXIT_FAILURE = 1;
  static final int EXIT_CONFIG = 2;
  static final int EXIT_NOT_READY = 4;

  @Spec
  CommandSpec spec;

  public static void main(String[] args) {
    LogFormat.applyEnvironment();
    System.exit(commandLine().execute(args));
  }

  /** The configured command line; tests call {@code execute} on it with their own writers. */
  static CommandLine commandLine() {
    return new CommandLine(new Main());
  }

  @Override
  public void run() {
    throw new CommandLine.ParameterException(spec.commandLine(), "missing command: run, validate, migrate, explain, redrive,"
        + " reset-entity, ttl-advice, audit-key or help");
  }

  /**
   * A subcommand that takes {@code --config FILE}: reads and validates it first, and exits
   * {@link #EXIT_CONFIG} with the error (naming the setting) if it is invalid.
   */
  abstract static class ConfigCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = {"-c", "--config"}, paramLabel = "FILE", defaultValue = "${env:" + CONFIG_ENV + "}",
        description = "YAML configuration file (default: the " + CONFIG_ENV + " environment variable)")
    Path config;

    @Override
    public final Integer call() throws InterruptedException {
      PrintWriter err = spec.commandLine().getErr();
      if (config == null) {
        throw new CommandLine.ParameterException(spec.commandLine(),
            "missing the configuration: give --config FILE (or -c FILE), or set " + CONFIG_ENV);
      }
      SidecarConfig cfg;
      try {
        cfg = new ConfigReader().read(config);
      } catch (ConfigException e) {
        return configErrors(err, e);
      }
      List<String> clientProblems = Preflight.clientConfigProblems(cfg);
      if (!clientProblems.isEmpty()) {
        return configErrors(err, new ConfigException(clientProblems));
      }
      LogFormat.apply(cfg.logFormat());
      return call(cfg, spec.commandLine().getOut(), err);
    }

    abstract int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) throws InterruptedException;
  }

  @Command(name = "validate", mixinStandardHelpOptions = true,
      description = {"Parse and check the configuration, print a summary, exit 0 (valid) or 2 (invalid).",
          "With --connect, also check the environment and exit 4 when it is not ready."})
  static final class Validate extends ConfigCommand {
    @Option(names = "--connect", description = "Also connect: the topics exist (partition counts), MySQL answers and grants "
        + "what the sidecar needs, Redis answers PING, each push route's target accepts connections.")
    boolean connect;

    @Override
    int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) throws InterruptedException {
      out.print(summary(config, cfg));
      out.flush();
      if (!connect) {
        return EXIT_OK;
      }
      // the report names every problem; the clients' own log lines (retries, WARNs) would only repeat them
      silenceLogging();
      Probes.Report report = new Preflight(cfg, Preflight.DEFAULT_TIMEOUT).check();
      out.print(report.text());
      out.flush();
      if (report.ok()) {
        return EXIT_OK;
      }
      report.failures().forEach(f -> err.println("not ready: " + f));
      err.flush();
      return EXIT_NOT_READY;
    }

    private static void silenceLogging() {
      if (LoggerFactory.getILoggerFactory() instanceof ch.qos.logback.classic.LoggerContext ctx) {
        ctx.getLoggerList().forEach(l -> l.setLevel(ch.qos.logback.classic.Level.OFF));
      }
    }
  }

  @Command(name = "migrate", mixinStandardHelpOptions = true,
      description = "Apply the versioned MySQL schema migration and exit (also done by run when mysql.migrate-on-start).")
  static final class Migrate extends ConfigCommand {
    @Override
    int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) {
      try (Db db = new Db(cfg.mysql())) {
        int v = new Migrations(db, cfg.mysql().tablePrefix()).migrate();
        out.println("schema version " + v + " (" + cfg.mysql() + ")");
        out.flush();
        return EXIT_OK;
      } catch (RuntimeException e) {
        err.println("error: migration failed: " + e.getMessage());
        err.flush();
        return EXIT_FAILURE;
      }
    }
  }

  @Command(name = "run", mixinStandardHelpOptions = true,
      description = "Run the sidecar until SIGTERM or SIGINT, then drain and exit.")
  static final class Run extends ConfigCommand {
    private static final Logger log = LoggerFactory.getLogger(Run.class);

    @CommandLine.Option(names = "--fail-fast",
        description = "Exit at once (code 1) when MySQL or Kafka cannot be reached at start, instead of waiting for them with backoff.")
    boolean failFast;

    /** The longest wait between two attempts to reach MySQL at start. */
    static final java.time.Duration MAX_START_WAIT = java.time.Duration.ofSeconds(30);

    /** How often each route's gRPC health service is set from a readiness report. */
    static final java.time.Duration ROUTE_HEALTH_EVERY = java.time.Duration.ofSeconds(2);

    @Override
    int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) throws InterruptedException {
      // the admin listener comes first, so that probes answer (live, not ready, and why) while
      // start-up waits for MySQL
      Metrics metrics = new Metrics();
      BuildInfo build = BuildInfo.current();
      metrics.buildInfo(build.version(), build.commit());
      log.info("{}", build.text());
      LiveProbeFacts facts = new LiveProbeFacts(cfg, Probes.DEFAULT_CHECK_TIMEOUT);
      Probes probes = new Probes(cfg, facts, Clock.SYSTEM);
      AdminServer admin;
      try {
        admin = cfg.adminListen() == null ? null : AdminServer.start(cfg.adminListen(), probes, metrics::scrape);
      } catch (IOException | RuntimeException e) {
        facts.close();
        metrics.close();
        err.println("error: " + (e instanceof IOException ? e.getMessage()
            : "cannot listen on sidecar.admin-listen " + cfg.adminListen() + ": " + e.getMessage()));
        err.flush();
        return EXIT_FAILURE;
      }
      if (admin != null) {
        log.info("admin HTTP on {} (bound port {}): /healthz, /readyz, /metrics", cfg.adminListen(), admin.port());
      }
      // off unless tracing.otlp-endpoint is set; closed last, so that the last records' spans go out
      Tracing tracing = Tracing.fromConfig(cfg.tracing(), cfg.instanceId());
      Runnable closeOps = () -> {
        if (admin != null) {
          admin.close();
        }
        facts.close();
        metrics.close();
        tracing.close();
      };
      GuardRuntime started = null;
      long waitMillis = 1_000;
      for (int attempt = 1; started == null; attempt++) {
        try {
          started = new GuardRuntime(cfg, Clock.SYSTEM, tracing);
        } catch (RuntimeException e) {
          if (failFast || !storeUnavailable(e)) {
            closeOps.run();
            err.println("error: cannot start the guard (MySQL " + cfg.mysql() + "): " + e.getMessage());
            err.flush();
            return EXIT_FAILURE;
          }
          // a database pod that starts after this one is not a reason to crash-loop: wait for it
          facts.waiting("waiting for MySQL " + cfg.mysql() + " (attempt " + attempt + " failed, next in " + waitMillis + " ms): "
              + e.getMessage());
          log.warn("waiting for MySQL {} (attempt {}, next in {} ms; --fail-fast exits instead): {}", cfg.mysql(), attempt, waitMillis,
              e.getMessage());
          Thread.sleep(waitMillis);
          waitMillis = Math.min(waitMillis * 2, MAX_START_WAIT.toMillis());
        }
      }
      GuardRuntime runtime = started;
      // after MySQL, so that --fail-fast still exits on an unreachable MySQL first; before any
      // consumer starts, so that no record is taken while its escalation topic is missing
      Integer topicsExit = prepareTopics(cfg, facts, err);
      if (topicsExit != null) {
        runtime.close();
        closeOps.run();
        return topicsExit;
      }
      facts.runtime(runtime);
      runtime.registerMetrics(metrics);
      if (cfg.metricsListen() != null) {
        try {
          metrics.serve(cfg.metricsListen());
          log.info("Prometheus metrics on http://{}/metrics", cfg.metricsListen());
        } catch (IOException | RuntimeException e) {
          runtime.close();
          closeOps.run();
          err.println("error: cannot serve metrics on sidecar.metrics-listen " + cfg.metricsListen() + ": " + e.getMessage());
          err.flush();
          return EXIT_FAILURE;
        }
      }
      java.util.concurrent.ScheduledExecutorService opsTimer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "onceguard-stats");
        t.setDaemon(true);
        return t;
      });
      opsTimer.scheduleAtFixedRate(() -> {
        String s = metrics.snapshot();
        if (!s.isEmpty()) {
          log.info("verdicts so far: {}", s);
        }
      }, 30, 30, java.util.concurrent.TimeUnit.SECONDS);
      // the cleanup runs inside runUntilStopped, before the exit code is released to the shutdown
      // hook (which halts the JVM): the producer, pools and clients close on SIGTERM too
      Sidecar sidecar = new Sidecar(cfg, runtime.processors(metrics), runtime.services());
      sidecar.registerGauges(metrics);
      facts.sidecar(sidecar);
      opsTimer.scheduleWithFixedDelay(() -> {
        try {
          sidecar.routeReadiness(probes.readiness());
        } catch (RuntimeException e) {
          log.warn("route readiness check failed (retried in {}): {}", ROUTE_HEALTH_EVERY, e.toString());
        }
      }, ROUTE_HEALTH_EVERY.toMillis(), ROUTE_HEALTH_EVERY.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
      return runUntilStopped(sidecar, err, () -> {
        opsTimer.shutdownNow();
        try {
          runtime.close();
        } catch (RuntimeException e) {
          log.warn("closing the guard's resources failed: {}", e.toString());
        }
        log.info("final verdict counts: {}", metrics.snapshot());
        closeOps.run();
      });
    }

    /**
     * Checks the topics before the consumers start (waiting for Kafka's metadata like for MySQL,
     * unless {@code --fail-fast}), creating missing escalation and verdict topics when
     * {@code kafka.create-topics}.
     *
     * @return {@code null} to go on, else the exit code (the reason is printed)
     */
    private Integer prepareTopics(SidecarConfig cfg, LiveProbeFacts facts, PrintWriter err) throws InterruptedException {
      long waitMillis = 1_000;
      // while start-up waits for the broker, its own line says what it waits for; the Kafka
      // client's warnings for every connection attempt (several a second) would only bury it
      try (KafkaTopics topics = new KafkaTopics(cfg, "onceguard-start-" + cfg.instanceId(), Preflight.DEFAULT_TIMEOUT);
          QuietLogger quiet = QuietLogger.of("org.apache.kafka.clients.NetworkClient")) {
        for (int attempt = 1; ; attempt++) {
          try {
            String missing = Preflight.prepareTopics(cfg, topics, Preflight.DEFAULT_TIMEOUT, log);
            if (missing == null) {
              return null;
            }
            err.println("not ready: " + missing);
            err.flush();
            return EXIT_NOT_READY;
          } catch (IllegalStateException e) {
            if (failFast) {
              err.println("error: cannot check the topics: " + e.getMessage());
              err.flush();
              return EXIT_FAILURE;
            }
            String where = cfg.kafka().bootstrapServers();
            facts.waiting("waiting for Kafka at " + where + " (attempt " + attempt + " failed, next in " + waitMillis + " ms): "
                + e.getMessage());
            log.warn("waiting for Kafka at {} to check the topics (attempt {}, next in {} ms; --fail-fast exits instead): {}."
                    + " Check kafka.bootstrap-servers, that the broker runs, and that this host reaches it", where, attempt, waitMillis,
                e.getMessage());
            Thread.sleep(waitMillis);
            waitMillis = Math.min(waitMillis * 2, MAX_START_WAIT.toMillis());
          }
        }
      }
    }

    /** A logger held at ERROR until closed, then put back at its own level. */
    private static final class QuietLogger implements AutoCloseable {
      private final ch.qos.logback.classic.Logger logger;
      private final ch.qos.logback.classic.Level before;

      private QuietLogger(ch.qos.logback.classic.Logger logger) {
        this.logger = logger;
        this.before = logger.getLevel();
        logger.setLevel(ch.qos.logback.classic.Level.ERROR);
      }

      /** Quiets {@code name}; does nothing when logging is not logback. */
      static QuietLogger of(String name) {
        return org.slf4j.LoggerFactory.getLogger(name) instanceof ch.qos.logback.classic.Logger l ? new QuietLogger(l) : null;
      }

      @Override
      public void close() {
        logger.setLevel(before);
      }
    }

    private static boolean storeUnavailable(Throwable e) {
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t instanceof dev.onceguard.proxy.store.JdbcTarget.TlsFailure) {
          return false; // mysql.ssl-* do not match the server: waiting would not change that
        }
      }
      for (Throwable t = e; t != null; t = t.getCause()) {
        if (t instanceof dev.onceguard.proxy.store.StoreUnavailableException) {
          return true;
        }
      }
      return false;
    }

    /**
     * Starts the sidecar and blocks until a signal (through a shutdown hook) or a route failure,
     * then drains. The hook is in place before start-up, so a signal during start-up still drains.
     * On a signal the JVM is already exiting with 128+signal; the hook waits for the drain and
     * halts with our own code instead, so a clean drain exits 0.
     */
    private static int runUntilStopped(Sidecar sidecar, PrintWriter err, Runnable afterStop) throws InterruptedException {
      CountDownLatch stop = new CountDownLatch(1);
      CompletableFuture<Integer> exitCode = new CompletableFuture<>();
      Thread hook = new Thread(() -> {
        log.info("stop signal received");
        stop.countDown();
        Runtime.getRuntime().halt(exitCode.join());
      }, "onceguard-shutdown");
      Runtime.getRuntime().addShutdownHook(hook);
      int code = EXIT_FAILURE;
      try {
        try {
          sidecar.start();
        } catch (ConfigException e) {
          code = configErrors(err, e);
          return code;
        } catch (IOException e) {
          err.println("error: " + e.getMessage());
          err.flush();
          return code;
        }
        sidecar.failure().thenRun(stop::countDown);
        stop.await();
        boolean failed = sidecar.failure().toCompletableFuture().isDone();
        try {
          sidecar.close();
          code = failed ? EXIT_FAILURE : EXIT_OK;
        } catch (RuntimeException e) {
          log.error("shutdown failed", e);
        }
        return code;
      } finally {
        afterStop.run();
        exitCode.complete(code);
        try {
          Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
          // the hook runs and halts the JVM with our code; returning would call System.exit,
          // which blocks during a shutdown anyway
          hook.join();
        }
      }
    }
  }

  /** Prints every problem as a line {@code config error: <path>: <message>}; returns {@link #EXIT_CONFIG}. */
  static int configErrors(PrintWriter err, ConfigException e) {
    e.problems().forEach(p -> err.println("config error: " + p));
    err.flush();
    return EXIT_CONFIG;
  }

  static String summary(Path file, SidecarConfig c) {
    StringBuilder sb = new StringBuilder();
    sb.append("configuration ").append(file).append(" is valid\n");
    sb.append("sidecar: instance-id=").append(c.instanceId()).append(", grpc-listen=").append(c.grpcListen())
        .append(c.security().tls() == null ? "" : c.security().tls().caFile() == null ? " (TLS)" : " (mTLS)")
        .append(c.security().tokenFile() == null ? "" : ", bearer token from " + c.security().tokenFile())
        .append(c.security().allowedClients().isEmpty() ? "" : ", allowed clients " + c.security().allowedClients())
        .append(", shutdown-timeout=").append(c.shutdownTimeout()).append(", commit-interval=").append(c.commitInterval()).append('\n');
    sb.append("kafka: ").append(c.kafka().bootstrapServers()).append(", ").append(c.kafka().properties().size())
        .append(" extra properties\n");
    sb.append("mysql: ").append(c.mysql()).append('\n');
    sb.append("redis: ").append(c.redis().enabled() ? String.join(",", c.redis().uris().stream().map(Secrets::withoutUserInfo).toList())
        + (c.redis().sslCa() == null ? "" : ", ssl-ca " + c.redis().sslCa()) : "disabled (no L1 cache)").append('\n');
    sb.append("logs: ").append(c.logFormat()).append(", tracing: ").append(c.tracing().enabled()
        ? "OTLP http/protobuf to " + Secrets.withoutUserInfo(c.tracing().otlpEndpoint()) + ", sample ratio " + c.tracing().sampleRatio()
        : "off").append('\n');
    for (MachineConfig m : c.machines().values()) {
      sb.append("machine ").append(m.name()).append(": ").append(m.states().size()).append(" states, ")
          .append(m.events().size()).append(" events").append(m.cycles().isEmpty() ? "" : ", " + String.join("; ", m.cycles()))
          .append('\n');
    }
    for (RouteConfig r : c.routes()) {
      sb.append("route ").append(r.name()).append(": topics ").append(r.intake().topics()).append(", group ").append(r.intake().group())
          .append(", ").append(r.delivery().mode().name().toLowerCase(java.util.Locale.ROOT))
          .append(r.delivery().target() == null ? "" : " -> " + r.delivery().target())
          .append(r.delivery().tls() == null ? "" : r.delivery().tls().certFile() == null ? " (TLS)" : " (mTLS)")
          .append(r.hasMachine() ? ", machine " + r.machine() : ", no machine")
          .append(", business-key ").append(r.extraction().businessKey().stream().map(f -> f.spec()).collect(Collectors.joining(", ", "[", "]")))
          .append(", in flight ").append(r.intake().maxInFlightPerPartition()).append("/partition ")
          .append(r.intake().maxInFlight()).append(" total\n");
      for (String w : ConsumerProperties.of(c, r).ignored()) {
        sb.append("warning: ").append(w).append('\n');
      }
      for (String w : FingerprintWarnings.of(r)) {
        sb.append("warning: ").append(w).append('\n');
      }
    }
    return sb.toString();
  }

  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {BuildInfo.current().text()};
    }
  }
}
