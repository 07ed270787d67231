package dev.onceguard.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.pipeline.ProcessorFactory;
import dev.onceguard.v1.KafkaRecord;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Stopping with records in flight: nothing committed past an unfinished record, a restart delivers the rest. */
class ShutdownIT {
  private static final Duration SLOW = Duration.ofMillis(100);

  /** Every offset below the committed one was accepted by the business at least once. */
  private static void assertNothingCommittedPastUnfinished(Map<TopicPartition, Long> committed, Set<String> ok) {
    committed.forEach((tp, c) -> {
      for (long o = 0; o < c; o++) {
        assertThat(ok).as("%s committed at %d but offset %d was never accepted", tp, c, o).contains(tp.topic() + "-" + tp.partition() + "@" + o);
      }
    });
  }

  @Test
  void close_whileRecordsInFlight_commitsOnlyTheFinishedPrefix_andARestartDeliversTheRest() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport(); RecordingBusiness business = RecordingBusiness.start()) {
      String topic = kafka.createTopic("shutdown", 2);
      String group = "shutdown-it-" + ItEnv.uniqueSuffix();
      TopicPartition p0 = new TopicPartition(topic, 0);
      kafka.produce(RetryIT.records(topic, 2, 100));
      // slow answers; partition 0 offset 50 never answers (a hung business call)
      business.behave(d -> {
        KafkaRecord r = d.getRecord();
        return r.getPartition() == 0 && r.getOffset() == 50 ? Reply.hang() : Reply.ok().after(SLOW);
      });
      // a hung call's deadline (60 s) far beyond the drain (1 s): close must not wait for it
      ForwardConfig cfg = ForwardConfig.route(topic, group, business.target()).shutdownTimeout("1s").handlerTimeout("60s")
          .inFlight(4, 8);

      Sidecar first = new Sidecar(cfg.build(), ProcessorFactory.forwarding());
      Map<TopicPartition, Long> committedAtStop;
      try {
        first.start();
        await().atMost(Duration.ofSeconds(20)).until(() -> business.calls().stream()
            .anyMatch(c -> c.delivery().getRecord().getPartition() == 0 && c.delivery().getRecord().getOffset() == 50));
      } finally {
        long t0 = System.nanoTime();
        first.close();
        long closeMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        System.out.printf("ShutdownIT: first sidecar closed in %d ms%n", closeMs);
        // bounded by the 1 s drain plus commit and close, not by the hung call (60 s handler timeout)
        assertThat(closeMs).isLessThan(30_000);
      }
      committedAtStop = kafka.committedOffsets(group, topic);
      Set<String> okAfterFirst = business.okCoordinates();
      System.out.printf("ShutdownIT: committed at stop %s, %d records accepted%n", committedAtStop, okAfterFirst.size());
      assertThat(committedAtStop.get(p0)).as("stops exactly at the hung record").isEqualTo(50);
      assertNothingCommittedPastUnfinished(committedAtStop, okAfterFirst);
      assertThat(business.cancelledByCaller()).as("the hung call was cancelled, not left running").isGreaterThanOrEqualTo(1);
      int callsOfFirstRun = business.calls().size();

      // restart: a new sidecar in the same group takes over from the committed offsets
      business.behave(d -> Reply.ok());
      try (Sidecar second = new Sidecar(cfg.build(), ProcessorFactory.forwarding())) {
        second.start();
        await().atMost(Duration.ofSeconds(30)).until(() -> business.okCoordinates().size() == 200);
        Map<TopicPartition, Long> end = kafka.endOffsets(topic);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
      }
      List<Call> secondRun = business.calls().subList(callsOfFirstRun, business.calls().size());
      // the second run starts at the committed offsets: nothing below them is delivered again
      for (Call c : secondRun) {
        KafkaRecord r = c.delivery().getRecord();
        long from = committedAtStop.getOrDefault(new TopicPartition(r.getTopic(), r.getPartition()), 0L);
        assertThat(r.getOffset()).isGreaterThanOrEqualTo(from);
      }
      assertThat(secondRun).anySatisfy(c -> assertThat(c.delivery().getRecord().getOffset()).isEqualTo(50));
    }
  }

  @Test
  void close_readinessGoesNotServingBeforeTheDrainEnds() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport(); RecordingBusiness business = RecordingBusiness.start()) {
      String topic = kafka.createTopic("readiness", 1);
      String group = "readiness-it-" + ItEnv.uniqueSuffix();
      kafka.produce(RetryIT.records(topic, 1, 3));
      // a slow call (6 s) well inside both the call deadline and the drain (30 s each)
      business.behave(d -> d.getRecord().getOffset() == 1 ? Reply.ok().after(Duration.ofSeconds(6)) : Reply.ok());
      Sidecar sidecar = new Sidecar(ForwardConfig.route(topic, group, business.target()).shutdownTimeout("30s").handlerTimeout("30s")
          .build(), ProcessorFactory.forwarding());
      sidecar.start();
      int port = sidecar.grpcPort();
      await().atMost(Duration.ofSeconds(20)).until(() -> business.inFlight() == 1);
      assertThat(ForwardIT.health(port)).isEqualTo(ServingStatus.SERVING);
      CompletableFuture<Void> closing = new CompletableFuture<>();
      new Thread(() -> {
        sidecar.close();
        closing.complete(null);
      }, "closer").start();
      await().atMost(Duration.ofSeconds(5)).until(() -> ForwardIT.health(port) == ServingStatus.NOT_SERVING);
      assertThat(closing).as("still draining the 6 s call").isNotDone();
      closing.get(45, TimeUnit.SECONDS);
      // the drain let the slow call finish: everything committed
      assertThat(kafka.committedOffset(group, new TopicPartition(topic, 0))).isEqualTo(3);
    }
  }

  @Test
  void sigterm_toTheSidecarProcess_drainsCommitsAndExitsZero(@TempDir Path dir) throws Exception {
    String jar = System.getProperty("onceguard.jar");
    assertThat(jar).as("system property onceguard.jar (set by the failsafe configuration)").isNotNull();
    assertThat(new File(jar)).as("the runnable jar; build it with mvn package").exists();
    try (KafkaSupport kafka = new KafkaSupport(); RecordingBusiness business = RecordingBusiness.start()) {
      String topic = kafka.createTopic("sigterm", 2);
      kafka.createTopicNamed(topic + ".escalate", 1); // run refuses to start without its escalation topic
      String group = "sigterm-it-" + ItEnv.uniqueSuffix();
      kafka.produce(RetryIT.records(topic, 2, 200));
      business.behave(d -> Reply.ok().after(Duration.ofMillis(20)));
      Path config = dir.resolve("onceguard.yaml");
      Files.writeString(config, ForwardConfig.route(topic, group, business.target()).shutdownTimeout("5s").inFlight(2, 4).yaml());
      Path log = dir.resolve("sidecar.log");
      Process p = new ProcessBuilder(javaBin(), "-jar", jar, "run", "--config", config.toString())
          .redirectErrorStream(true).redirectOutput(log.toFile()).start();
      try {
        await().atMost(Duration.ofSeconds(30)).until(() -> business.okCoordinates().size() >= 20 || !p.isAlive());
        assertThat(p.isAlive()).as("sidecar process died early:%n%s", Files.readString(log)).isTrue();
        p.destroy(); // SIGTERM
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        String out = Files.readString(log);
        System.out.printf("ShutdownIT: process exited %d; its log:%n%s%n", p.exitValue(), out);
        assertThat(p.exitValue()).as("exit code after a clean drain").isZero();
        assertThat(out).contains("stop signal received").contains("sidecar stopped");
      } finally {
        p.destroyForcibly();
      }
      Map<TopicPartition, Long> committed = kafka.committedOffsets(group, topic);
      assertThat(committed).isNotEmpty();
      assertNothingCommittedPastUnfinished(committed, business.okCoordinates());
      // the drain committed what was accepted: at most the in-flight records lie beyond the commit
      long accepted = business.okCoordinates().size();
      long committedTotal = committed.values().stream().mapToLong(Long::longValue).sum();
      assertThat(accepted - committedTotal).isBetween(0L, 4L);
      assertThat(business.okCoordinates().stream().filter(c -> c.startsWith(topic)).collect(Collectors.toSet())).hasSize((int) accepted);
    }
  }

  private static String javaBin() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }
}
