package dev.onceguard.it.scenario;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RedisProcess;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.v1.Delivery;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * The soak: the packaged sidecar as its own process on a route with a machine, fed at a steady
 * rate with a seeded mix of new facts (order lines walking create → pay → prepare → ship →
 * deliver, some starting with a swapped pair) and re-sent duplicates, while a private
 * redis-server (its own port; the machine's Redis on 6379 is not touched) is killed and
 * restarted periodically. The sidecar's RSS,
 * heap-after-full-GC and number of exported metric series are sampled throughout; the run fails
 * on growth beyond {@link SoakReport}'s bounds, and unless every distinct fact reached the
 * business exactly once, nothing was escalated and every partition was committed to its end.
 *
 * <p>{@code make test} runs a short version (60 s, the fixed seed); {@code make soak} a long one.
 * System properties: {@code soak.seconds} (60), {@code soak.rate} records/s (40),
 * {@code soak.seed} (20261201), {@code soak.out} (target/soak: samples.csv, memory.png,
 * summary.txt, the sidecar's and Redis's logs).
 */
class SoakIT {
  private static final String[] LIFE = {"create", "pay", "prepare", "ship", "deliver"};

  private final long seconds = Long.getLong("soak.seconds", 60);
  private final int rate = Integer.getInteger("soak.rate", 40);
  private final long seed = Long.getLong("soak.seed", 20261201L);
  private final Path out = Path.of(System.getProperty("soak.out", "target/soak"));

  /**
   * The seeded mix: about a fifth of the records re-send an earlier fact under a new message id;
   * one new line in ten arrives swapped (pay, then create), so the pay parks as an early arrival
   * and the create heals it through the reorder window.
   */
  private static final class Load {
    final Random random;
    final OneRouteEnv env;
    final Set<String> facts = new HashSet<>();
    final List<String[]> recent = new ArrayList<>();
    final List<String> active = new ArrayList<>();
    final Map<String, Integer> nextStep = new java.util.HashMap<>();
    int lines;
    long produced;
    long duplicates;
    long swapped;
    private ProducerRecord<byte[], byte[]> held;

    Load(long seed, OneRouteEnv env) {
      this.random = new Random(seed);
      this.env = env;
    }

    ProducerRecord<byte[], byte[]> next() {
      produced++;
      if (held != null) {
        ProducerRecord<byte[], byte[]> r = held;
        held = null;
        return r;
      }
      if (!recent.isEmpty() && random.nextInt(5) == 0) {
        String[] f = recent.get(random.nextInt(recent.size()));
        duplicates++;
        return env.record(f[0], f[1], "dup-" + produced);
      }
      String line;
      if (active.size() < 20 || random.nextInt(4) == 0) {
        line = "L-" + lines++;
        active.add(line);
        nextStep.put(line, 0);
        if (random.nextInt(10) == 0) {
          swapped++;
          nextStep.put(line, 2);
          remember(line, "create");
          remember(line, "pay");
          held = env.record(line, "create", "m-" + produced + "-c");
          return env.record(line, "pay", "m-" + produced);
        }
      } else {
        line = active.get(random.nextInt(active.size()));
      }
      int step = nextStep.merge(line, 1, Integer::sum) - 1;
      if (step == LIFE.length - 1) {
        active.remove(line);
        nextStep.remove(line);
      }
      String event = LIFE[step];
      remember(line, event);
      return env.record(line, event, "m-" + produced);
    }

    private void remember(String line, String event) {
      facts.add(line + "/" + event);
      if (recent.size() < 2_000) {
        recent.add(new String[] {line, event});
      } else {
        recent.set(random.nextInt(recent.size()), new String[] {line, event});
      }
    }
  }

  @Test
  void steadyLoad_withRedisRestarts_keepsMemoryFlat_andDeliversEveryFactOnce() throws Exception {
    long sampleEveryMs = Math.max(2_000, Math.min(10_000, seconds * 10));
    long restartEveryMs = Math.max(10_000, Math.min(120_000, seconds * 1000 / 6));
    long redisDownMs = 2_000;
    SoakReport report = new SoakReport();
    java.nio.file.Files.deleteIfExists(out.resolve("redis.log")); // appended to across restarts, not across runs
    try (OneRouteEnv env = new OneRouteEnv("soak", 3);
        RecordingBusiness business = RecordingBusiness.start().behave(d -> Reply.ok());
        RedisProcess redis = RedisProcess.start(out.resolve("redis.log"))) {
      int grpcPort = RecordingBusiness.freePort();
      String admin = "127.0.0.1:" + RecordingBusiness.freePort();
      String yaml = env.yaml("/line_id", business.target(), redis.uri(), grpcPort, ", admin-listen: " + admin);
      Load load = new Load(seed, env);
      try (SidecarProcess sidecar = SidecarProcess.start("soak", yaml, grpcPort);
          KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
              env.kafka.bootstrap(), ProducerConfig.LINGER_MS_CONFIG, 5, ProducerConfig.ACKS_CONFIG, "all"),
              new ByteArraySerializer(), new ByteArraySerializer())) {
        sidecar.awaitServing(Duration.ofSeconds(90));
        try (SidecarMemory memory = new SidecarMemory(sidecar.pid(), admin)) {
          long start = System.nanoTime();
          long nextSample = 0;
          long nextRestart = restartEveryMs;
          long redisBackAt = -1;
          long elapsed;
          while ((elapsed = (System.nanoTime() - start) / 1_000_000) < seconds * 1000) {
            long due = elapsed * rate / 1000;
            while (load.produced < due) {
              producer.send(load.next());
            }
            if (elapsed >= nextSample) {
              SidecarMemory.Sample s = memory.sample();
              report.add(new SoakReport.Point(elapsed / 1000.0, s.rssMb(), s.heapAfterGcMb(), s.metricSeries()));
              nextSample += sampleEveryMs;
            }
            if (redisBackAt < 0 && elapsed >= nextRestart) {
              redis.kill();
              report.redisRestartAt(elapsed / 1000.0);
              redisBackAt = elapsed + redisDownMs;
              nextRestart += restartEveryMs;
            } else if (redisBackAt >= 0 && elapsed >= redisBackAt) {
              redis.restart();
              redisBackAt = -1;
            }
            if (!sidecar.alive()) {
              throw new AssertionError("the sidecar exited during the soak; its log:\n" + sidecar.tail());
            }
            TimeUnit.MILLISECONDS.sleep(20);
          }
          producer.flush();
          if (redisBackAt >= 0) {
            redis.restart();
          }
          long loadEnded = System.nanoTime();
          awaitAllDelivered(business, load.facts, Duration.ofSeconds(120));
          double drainSeconds = (System.nanoTime() - loadEnded) / 1e9;
          TimeUnit.SECONDS.sleep(2); // a late second delivery would show up here
          SidecarMemory.Sample last = memory.sample();
          report.add(new SoakReport.Point((System.nanoTime() - start) / 1e9, last.rssMb(), last.heapAfterGcMb(), last.metricSeries()));

          SoakReport.Judgement j = SoakReport.judge(report.points(), seconds);
          String header = String.format(Locale.ROOT, """
              soak: %d s of load at %d records/s, seed %d, Redis killed every %d s for %d s
              records produced: %d (%d re-sent duplicates, %d lines starting pay-before-create), distinct facts: %d over %d lines
              business calls: %d (OK: %d); drained %.1f s after the load ended
              """, seconds, rate, seed, restartEveryMs / 1000, redisDownMs / 1000, load.produced, load.duplicates, load.swapped, load.facts.size(),
              load.lines, business.calls().size(), business.okDeliveries().size(), drainSeconds);
          report.write(out, header, j);
          System.out.println(java.nio.file.Files.readString(out.resolve("summary.txt")));

          Map<String, Long> perFact = business.okDeliveries().stream()
              .collect(Collectors.groupingBy(d -> d.getEntityId() + "/" + d.getEvent(), Collectors.counting()));
          assertThat(perFact.keySet()).as("every distinct fact reached the business").containsExactlyInAnyOrderElementsOf(load.facts);
          assertThat(perFact).as("each exactly once").allSatisfy((fact, n) -> assertThat(n).as(fact).isEqualTo(1L));
          assertThat(env.kafka.readAll(env.escalations)).as("nothing escalated").isEmpty();
          env.awaitCommittedToEnd(Duration.ofSeconds(30));
          assertThat(j.problems()).as("memory growth (see %s)", out.resolve("summary.txt")).isEmpty();
        } finally {
          java.nio.file.Files.createDirectories(out);
          java.nio.file.Files.copy(sidecar.log, out.resolve("sidecar.log"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
      }
    }
  }

  private static void awaitAllDelivered(RecordingBusiness business, Set<String> facts, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      Set<String> seen = new HashSet<>();
      for (Delivery d : business.okDeliveries()) {
        seen.add(d.getEntityId() + "/" + d.getEvent());
      }
      if (seen.containsAll(facts)) {
        return;
      }
      TimeUnit.MILLISECONDS.sleep(250);
    }
  }
}
