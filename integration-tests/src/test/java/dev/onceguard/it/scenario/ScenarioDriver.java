package dev.onceguard.it.scenario;

import static org.awaitility.Awaitility.await;

import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.scenario.OrderScenario.Planned;
import dev.onceguard.it.scenario.OrderScenario.Transition;
import dev.onceguard.it.scenario.OrderScenario.Wave;
import dev.onceguard.v1.Delivery;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.awaitility.core.ConditionTimeoutException;

/**
 * Produces a scenario's waves into the run's topics and waits, after each wave, until the
 * business received every transition the wave must deliver. A concurrent wave's route streams are
 * produced by one thread and one producer each, in chunks at the {@link #streamPace}, a route's
 * stream starting late by its {@link #lag}.
 * Hooks run in the driver's thread while a wave is in progress (add or kill sidecars, kill MySQL
 * connections). Not thread-safe: one test thread calls it.
 */
final class ScenarioDriver {
  /** Generous: a wave that stalls past this is a failure, with the missing transitions listed. */
  static final Duration WAVE_TIMEOUT = Duration.ofSeconds(120);

  /** Records per acknowledged chunk of a concurrent stream. */
  static final int CHUNK = 10;

  /** One produced record, with where it landed and when its acknowledgement arrived. */
  record Produced(Planned planned, String topic, int partition, long offset, long ackedAtNanos) {
    String coordinates() {
      return topic + "-" + partition + "@" + offset;
    }
  }

  /** Something to do once wave {@code wave} (index) is {@code fraction} delivered. */
  record Hook(int wave, double fraction, String what, Runnable action) {}

  private final OrderScenario scenario;
  private final ScenarioEnv env;
  private final RecordingBusiness business;
  private final List<Produced> produced = new CopyOnWriteArrayList<>();
  private final Map<String, Duration> lag = new HashMap<>();
  private Duration streamPace = Duration.ofMillis(50);
  /** 0: every batch at once; else the pause per record produced, from {@link #spreadOver}. */
  private long nanosPerRecord;
  private long startNanos;
  private long l1KeysWiped = -1;
  /** Wait for commits rather than deliveries after each wave (see {@link #settleEachWave}). */
  private boolean settleEachWave;
  /** When set, a wave that wipes L1 first waits this long instead (see {@link #expireL1By}). */
  private Duration l1Expiry;

  ScenarioDriver(OrderScenario scenario, ScenarioEnv env, RecordingBusiness business) {
    this.scenario = scenario;
    this.env = env;
    this.business = business;
  }

  /** Makes the route's stream of a concurrent wave start this much later than the others. */
  ScenarioDriver lag(String route, Duration startDelay) {
    lag.put(route, startDelay);
    return this;
  }

  /** The pause before each chunk of a concurrent stream (default 50 ms), so that streams overlap. */
  ScenarioDriver streamPace(Duration pausePerChunk) {
    streamPace = pausePerChunk;
    return this;
  }

  /**
   * Produces the scenario's records at a steady rate, so that producing them all takes about
   * {@code duration} (plus the waits for each wave's deliveries): a round under faults then has
   * traffic for that long. Without it a wave's batches are produced as fast as they are
   * acknowledged.
   */
  ScenarioDriver spreadOver(Duration duration) {
    nanosPerRecord = duration.toNanos() / Math.max(1, scenario.records());
    return this;
  }

  /**
   * After each wave, waits until every route group committed its topic's end offsets instead of
   * until the wave's transitions were delivered: for runs whose configuration may lose
   * transitions (an ablation), where waiting for them would only time out.
   */
  ScenarioDriver settleEachWave() {
    settleEachWave = true;
    return this;
  }

  /**
   * A wave that would delete the L1 keys first waits {@code wait} instead, once everything before
   * it finished: keys then expire by their route's {@code redis-ttl}, or live on when it is longer.
   */
  ScenarioDriver expireL1By(Duration wait) {
    l1Expiry = wait;
    return this;
  }

  List<Produced> produced() {
    return produced;
  }

  long startNanos() {
    return startNanos;
  }

  /** Redis keys found (and deleted) when the L1 cache was wiped; -1 before. */
  long l1KeysWiped() {
    return l1KeysWiped;
  }

  void run(Hook... hooks) {
    startNanos = System.nanoTime();
    List<Wave> waves = scenario.waves();
    for (int w = 0; w < waves.size(); w++) {
      Wave wave = waves.get(w);
      long t0 = System.nanoTime();
      if (wave.wipeL1First()) {
        // the last confirms of the previous wave write L1 after the business answered: let every
        // record produced so far finish first, or a late key would survive the "expiry"
        awaitAllCommitted();
        if (l1Expiry != null) {
          log("wave %s: waiting %d ms before producing (L1 keys expire by their TTL)", wave.name(), l1Expiry.toMillis());
          pause(l1Expiry);
        } else {
          l1KeysWiped = env.wipeL1();
          log("wave %s: deleted %d L1 keys (Redis prefix %s) before producing", wave.name(), l1KeysWiped, env.redisPrefix);
        }
      }
      if (wave.concurrent()) {
        produceConcurrently(wave);
      } else {
        for (List<Planned> batch : wave.batches()) {
          if (nanosPerRecord == 0) {
            produce(batch);
            continue;
          }
          for (int i = 0; i < batch.size(); i += CHUNK) {
            List<Planned> chunk = batch.subList(i, Math.min(batch.size(), i + CHUNK));
            pause(chunk.size());
            produce(chunk);
          }
        }
      }
      for (Hook h : hooks) {
        if (h.wave() == w) {
          awaitWave(wave, h.fraction());
          log("wave %s: %.0f%% delivered; %s", wave.name(), h.fraction() * 100, h.what());
          h.action().run();
        }
      }
      if (settleEachWave) {
        awaitAllCommitted();
      } else {
        awaitWave(wave, 1.0);
      }
      log("wave %s: %d records, %d transitions delivered in %d ms", wave.name(), wave.size(), wave.expected().size(),
          TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    }
  }

  /** One thread per stream; returns once every stream is produced (hooks then run, as for other waves). */
  private void produceConcurrently(Wave wave) {
    ExecutorService pool = Executors.newFixedThreadPool(wave.batches().size());
    try {
      List<Future<?>> streams = new ArrayList<>();
      for (List<Planned> stream : wave.batches()) {
        streams.add(pool.submit(() -> {
          if (stream.isEmpty()) {
            return null;
          }
          Thread.sleep(lag.getOrDefault(stream.get(0).route(), Duration.ZERO).toMillis());
          try (KafkaProducer<byte[], byte[]> producer = streamProducer()) {
            for (int i = 0; i < stream.size(); i += CHUNK) {
              Thread.sleep(Math.max(streamPace.toMillis(), TimeUnit.NANOSECONDS.toMillis(nanosPerRecord * CHUNK * wave.batches().size())));
              produce(producer, stream.subList(i, Math.min(stream.size(), i + CHUNK)));
            }
          }
          return null;
        }));
      }
      for (Future<?> f : streams) {
        f.get(WAVE_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while producing wave " + wave.name(), e);
    } catch (ExecutionException | TimeoutException e) {
      throw new AssertionError("wave " + wave.name() + ": producing a stream failed", e);
    } finally {
      pool.shutdownNow();
    }
  }

  /** One stream's own producer: acks=all, idempotent, one request in flight, as {@link dev.onceguard.it.KafkaSupport#produce}. */
  private KafkaProducer<byte[], byte[]> streamProducer() {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, env.kafka.bootstrap());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
  }

  /** Sends a chunk and waits for every acknowledgement. */
  private void produce(KafkaProducer<byte[], byte[]> producer, List<Planned> chunk) throws InterruptedException, ExecutionException {
    List<Future<RecordMetadata>> fs = new ArrayList<>(chunk.size());
    for (Planned p : chunk) {
      fs.add(producer.send(new ProducerRecord<>(env.topic(p.route()), p.partition(), p.key(), p.value())));
    }
    producer.flush();
    List<Produced> out = new ArrayList<>(chunk.size());
    for (int i = 0; i < chunk.size(); i++) {
      RecordMetadata md = fs.get(i).get();
      out.add(new Produced(chunk.get(i), md.topic(), md.partition(), md.offset(), System.nanoTime()));
    }
    produced.addAll(out);
  }

  private void pause(int records) {
    pause(Duration.ofNanos(nanosPerRecord * records));
  }

  private static void pause(Duration d) {
    try {
      TimeUnit.NANOSECONDS.sleep(d.toNanos());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while producing", e);
    }
  }

  private void produce(List<Planned> batch) {
    if (batch.isEmpty()) {
      return;
    }
    List<ProducerRecord<byte[], byte[]>> rs = new ArrayList<>(batch.size());
    for (Planned p : batch) {
      rs.add(new ProducerRecord<>(env.topic(p.route()), p.partition(), p.key(), p.value()));
    }
    List<RecordMetadata> md = env.kafka.produce(rs);
    long acked = System.nanoTime();
    List<Produced> out = new ArrayList<>(batch.size());
    for (int i = 0; i < batch.size(); i++) {
      out.add(new Produced(batch.get(i), md.get(i).topic(), md.get(i).partition(), md.get(i).offset(), acked));
    }
    produced.addAll(out);
  }

  /** Until every route group committed its topic's end offsets: everything produced is finished. */
  void awaitAllCommitted() {
    try {
      await().atMost(WAVE_TIMEOUT).pollInterval(Duration.ofMillis(200)).until(() -> OrderScenario.ROUTES.stream().allMatch(r -> uncommitted(r).isEmpty()));
    } catch (ConditionTimeoutException e) {
      throw new AssertionError("records still unfinished after " + WAVE_TIMEOUT + ": "
          + OrderScenario.ROUTES.stream().map(r -> r + " " + uncommitted(r)).toList(), e);
    }
  }

  /** Partitions of the route's topic whose group's committed offset is below the end offset, with both. */
  Map<Integer, String> uncommitted(String route) {
    Map<TopicPartition, Long> committed = env.kafka.committedOffsets(env.groups.get(route), env.topic(route));
    Map<Integer, String> out = new TreeMap<>();
    env.kafka.endOffsets(env.topic(route)).forEach((tp, end) -> {
      long c = committed.getOrDefault(tp, 0L);
      if (c != end) {
        out.put(tp.partition(), c + "/" + end);
      }
    });
    return out;
  }

  /** Transitions the business answered OK at least once. */
  Set<Transition> delivered() {
    Set<Transition> out = new HashSet<>();
    for (Delivery d : business.okDeliveries()) {
      out.add(new Transition(d.getEntityId(), d.getEvent()));
    }
    return out;
  }

  private void awaitWave(Wave wave, double fraction) {
    int need = (int) Math.ceil(wave.expected().size() * fraction);
    try {
      await().atMost(WAVE_TIMEOUT).pollInterval(Duration.ofMillis(100)).until(() -> countDelivered(wave) >= need);
    } catch (ConditionTimeoutException e) {
      Set<Transition> got = delivered();
      Set<String> missing = wave.expected().stream().filter(t -> !got.contains(t)).map(Transition::toString)
          .collect(Collectors.toCollection(TreeSet::new));
      throw new AssertionError("wave " + wave.name() + ": " + missing.size() + " of " + wave.expected().size()
          + " transitions not delivered within " + WAVE_TIMEOUT + ", e.g. " + missing.stream().limit(20).toList(), e);
    }
  }

  private int countDelivered(Wave wave) {
    Set<Transition> got = delivered();
    int n = 0;
    for (Transition t : wave.expected()) {
      if (got.contains(t)) {
        n++;
      }
    }
    return n;
  }

  void log(String fmt, Object... args) {
    System.out.printf("%s [%6.1fs] %s%n", env.name, (System.nanoTime() - startNanos) / 1e9, String.format(fmt, args));
  }
}
