package dev.onceguard.it.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.ops.GuardRuntime;
import dev.onceguard.proxy.ops.Sidecar;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.time.Clock;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Node.js example business container ({@code examples/node-business}) behind a real sidecar:
 * real Kafka, MariaDB and Redis, the sidecar in-process ({@link GuardRuntime} + {@link Sidecar}),
 * the business as a {@code node server.js} child process speaking the generated-from-proto gRPC
 * contract. Proves that a business in another language sees every legitimate record exactly once
 * with the guard's metadata, and nothing else; and that what it must not see lands on the
 * escalation topic with the {@code onceguard-*} headers.
 *
 * <p>Without {@code node} on the PATH it fails in CI (environment {@code CI=true}), where a missing
 * Node.js is a broken build image, and is skipped elsewhere, on a developer's machine.
 */
class NodeBusinessIT {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int ORDERS = 30;
  private static final int PARTITIONS = 3;
  private static final Duration DEADLINE = Duration.ofSeconds(40);

  /** One produced record and what the sidecar must make of it. */
  private record Sent(String note, ProducerRecord<byte[], byte[]> record, Expect expect, String entity, String event,
      String from, String to) {}

  private enum Expect { DELIVER, DUPLICATE, ILLEGAL, REJECT, MALFORMED }

  private static String order(String id, String event, String extra) {
    return "{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\",\"sku_id\":\"sku-7\",\"amount\":" + (100 + id.length())
        + ",\"message_id\":\"" + UUID.randomUUID() + "\"" + extra + "}";
  }

  private static ProducerRecord<byte[], byte[]> rec(String topic, String key, String value) {
    RecordHeaders h = new RecordHeaders();
    h.add("trace-id", ("trace-" + key).getBytes(StandardCharsets.UTF_8));
    return new ProducerRecord<>(topic, null, key.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8), h);
  }

  @Test
  void nodeBusiness_receivesEveryLegitimateRecordOnce_andTheRestIsEscalatedOrIgnored() throws Exception {
    requireNode(System.getenv("CI"));
    Path dir = nodeBusinessDir();
    ensureNodeModules(dir);

    String suffix = ItEnv.uniqueSuffix();
    String database = "og_it_" + suffix;
    String redisPrefix = "og-it-node:" + suffix + ":";
    Path out = Files.createDirectories(Path.of("target")).resolve("node-business-" + suffix + ".jsonl").toAbsolutePath();
    Path nodeLog = out.resolveSibling("node-business-" + suffix + ".log");

    try (KafkaSupport kafka = new KafkaSupport(); NodeProcess node = NodeProcess.start(dir, out, nodeLog)) {
      String topic = kafka.createTopic("node-orders", PARTITIONS);
      String escalations = kafka.createTopic("node-orders-escalate", 1);
      String group = "node-it-" + suffix;
      SidecarConfig cfg = new ConfigReader(Map.of()).parse(yaml(topic, escalations, group, database, redisPrefix, node.port()), "node-it");
      RouteConfig route = cfg.routes().get(0);

      // the order stream: each order keyed by its id, so its events share a partition, in order
      List<Sent> sent = new ArrayList<>();
      for (int i = 1; i <= ORDERS; i++) {
        String id = "o-" + i;
        sent.add(new Sent("create " + id, rec(topic, id, order(id, "create", "")), Expect.DELIVER, id, "create", "", "created"));
      }
      for (int i = 1; i <= ORDERS; i++) {
        String id = "o-" + i;
        sent.add(new Sent("pay " + id, rec(topic, id, order(id, "pay", "")), Expect.DELIVER, id, "pay", "created", "paid"));
      }
      sent.add(new Sent("create o-31", rec(topic, "o-31", order("o-31", "create", "")), Expect.DELIVER, "o-31", "create", "", "created"));
      sent.add(new Sent("cancel o-31", rec(topic, "o-31", order("o-31", "cancel", "")), Expect.DELIVER, "o-31", "cancel", "created", "cancelled"));
      sent.add(new Sent("pay o-31 after cancel", rec(topic, "o-31", order("o-31", "pay", "")), Expect.ILLEGAL, "o-31", "pay", "", ""));
      sent.add(new Sent("create o-32", rec(topic, "o-32", order("o-32", "create", "")), Expect.DELIVER, "o-32", "create", "", "created"));
      sent.add(new Sent("pay o-32, refused by the business",
          rec(topic, "o-32", order("o-32", "pay", ",\"reject\":true,\"reject_reason\":\"card declined\"")), Expect.REJECT, "o-32", "pay",
          "created", "paid"));
      sent.add(new Sent("garbage", rec(topic, "o-33", "this is not JSON {"), Expect.MALFORMED, null, null, null, null));
      // exact copies (same bytes, as a producer retry or an upstream replay would send them)
      for (int idx : new int[] {0, ORDERS + 1, ORDERS + 2}) {
        Sent original = sent.get(idx);
        ProducerRecord<byte[], byte[]> r = original.record();
        sent.add(new Sent("copy of " + original.note(), new ProducerRecord<>(topic, null, r.key(), r.value(), r.headers()),
            Expect.DUPLICATE, original.entity(), original.event(), original.from(), original.to()));
      }
      List<RecordMetadata> md = kafka.produce(sent.stream().map(Sent::record).toList());
      Map<String, Sent> byCoordinates = new HashMap<>();
      for (int i = 0; i < sent.size(); i++) {
        byCoordinates.put(coordinates(md.get(i).topic(), md.get(i).partition(), md.get(i).offset()), sent.get(i));
      }
      Extractor extractor = new Extractor(route, cfg.machines().get(route.machine()));
      Map<Sent, String> dedupKey = new HashMap<>();
      for (Sent s : sent) {
        if (extractor.extract(s.record().key(), s.record().value(), s.record().headers()) instanceof Extraction.Ok ok) {
          dedupKey.put(s, ok.event().dedupKey());
        }
      }

      Map<String, Verdict> verdicts = new ConcurrentHashMap<>();
      Map<String, Integer> verdictCount = new ConcurrentHashMap<>();
      long t0 = System.nanoTime();
      GuardRuntime rt = null;
      Sidecar sidecar = null;
      try {
        rt = new GuardRuntime(cfg, Clock.SYSTEM);
        sidecar = new Sidecar(cfg, rt.processors((r, v, forwarded) -> {
          String c = coordinates(r.topic(), r.partition(), r.offset());
          verdicts.put(c, v);
          verdictCount.merge(c, 1, Integer::sum);
        }), rt.services());
        sidecar.start();

        await().atMost(DEADLINE).pollInterval(Duration.ofMillis(100))
            .until(() -> verdicts.keySet().containsAll(byCoordinates.keySet()));
        await().atMost(Duration.ofSeconds(10)).until(() -> okLines(out).size() >= sent.stream().filter(s -> s.expect() == Expect.DELIVER).count());
        System.out.printf("NodeBusinessIT: %d records decided in %d ms%n", sent.size(), TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));

        // one verdict per record, of the expected kind
        assertThat(verdictCount.values()).as("one final verdict per consumed record").allMatch(n -> n == 1);
        assertThat(verdicts.keySet()).isEqualTo(byCoordinates.keySet());
        byCoordinates.forEach((c, s) -> {
          Verdict v = verdicts.get(c);
          switch (s.expect()) {
            case DELIVER -> assertThat(v.getDisposition()).as(s.note()).isEqualTo(Disposition.ACCEPTED);
            case DUPLICATE -> {
              assertThat(v.getDisposition()).as(s.note()).isEqualTo(Disposition.DUPLICATE_IGNORE);
              assertThat(v.getLayer()).as(s.note()).isIn(Layer.CACHE, Layer.LEDGER);
              assertThat(v.getDedupKey()).as(s.note()).isEqualTo(dedupKey.get(s));
            }
            case ILLEGAL -> assertThat(v.getReason()).as(s.note()).isEqualTo(Reason.ILLEGAL_TRANSITION);
            case REJECT -> assertThat(v.getReason()).as(s.note()).isEqualTo(Reason.BUSINESS_REJECTED);
            case MALFORMED -> assertThat(v.getReason()).as(s.note()).isEqualTo(Reason.MALFORMED);
          }
        });

        // the Node business: every legitimate record exactly once, with the guard's metadata
        List<JsonNode> lines = lines(out);
        Map<String, List<JsonNode>> linesByCoordinates = lines.stream()
            .collect(Collectors.groupingBy(l -> coordinates(l.get("topic").asText(), l.get("partition").asInt(), l.get("offset").asLong())));
        byCoordinates.forEach((c, s) -> {
          List<JsonNode> got = linesByCoordinates.getOrDefault(c, List.of());
          switch (s.expect()) {
            case DELIVER, REJECT -> {
              assertThat(got).as("deliveries of '%s'", s.note()).hasSize(1);
              JsonNode l = got.get(0);
              assertThat(l.get("outcome").asText()).as(s.note()).isEqualTo(s.expect() == Expect.DELIVER ? "OK" : "REJECT");
              assertThat(l.get("route").asText()).isEqualTo("orders");
              assertThat(l.get("entity_id").asText()).as(s.note()).isEqualTo(s.entity());
              assertThat(l.get("event").asText()).as(s.note()).isEqualTo(s.event());
              assertThat(l.get("from_state").asText()).as(s.note()).isEqualTo(s.from());
              assertThat(l.get("to_state").asText()).as(s.note()).isEqualTo(s.to());
              assertThat(l.get("dedup_key").asText()).as(s.note()).isEqualTo(dedupKey.get(s)).matches("[0-9a-f]{64}");
              assertThat(l.get("attempt").asInt()).isEqualTo(1);
              assertThat(l.get("redelivery").asBoolean()).isFalse();
              assertThat(l.get("key").asText()).isEqualTo(new String(s.record().key(), StandardCharsets.UTF_8));
              assertThat(l.get("value").asText()).isEqualTo(new String(s.record().value(), StandardCharsets.UTF_8));
              assertThat(l.get("headers").toString()).contains("\"key\":\"trace-id\"", "\"value\":\"trace-" + s.entity() + "\"");
            }
            default -> assertThat(got).as("'%s' must not reach the business", s.note()).isEmpty();
          }
        });
        long legitimate = sent.stream().filter(s -> s.expect() == Expect.DELIVER).count();
        assertThat(okLines(out)).as("OK deliveries").hasSize((int) legitimate);
        assertThat(lines.stream().map(l -> l.get("dedup_key").asText()).distinct().count()).isEqualTo(lines.size());

        // the escalation topic: the original record plus the verdict's headers
        List<ConsumerRecord<byte[], byte[]>> escalated = kafka.readAll(escalations);
        assertThat(escalated).hasSize(3);
        Map<String, ConsumerRecord<byte[], byte[]>> byReason = escalated.stream()
            .collect(Collectors.toMap(r -> header(r, Headers.REASON), r -> r));
        assertThat(byReason).containsOnlyKeys("ILLEGAL_TRANSITION", "MALFORMED", "BUSINESS_REJECTED");
        for (ConsumerRecord<byte[], byte[]> e : escalated) {
          Sent s = byCoordinates.get(coordinates(header(e, Headers.ORIGINAL_TOPIC), Integer.parseInt(header(e, Headers.ORIGINAL_PARTITION)),
              Long.parseLong(header(e, Headers.ORIGINAL_OFFSET))));
          assertThat(s).as("escalation points at a produced record").isNotNull();
          assertThat(e.key()).isEqualTo(s.record().key());
          assertThat(e.value()).isEqualTo(s.record().value());
          assertThat(header(e, "trace-id")).as("original headers kept").isEqualTo("trace-" + new String(s.record().key(), StandardCharsets.UTF_8));
          assertThat(header(e, Headers.DISPOSITION)).isEqualTo("ILLEGAL_TRANSITION_ESCALATE");
          assertThat(header(e, Headers.ROUTE)).isEqualTo("orders");
          assertThat(Long.parseLong(header(e, Headers.TIMESTAMP))).isPositive();
          assertThat(header(e, Headers.DETAIL)).isNotBlank();
        }
        ConsumerRecord<byte[], byte[]> illegal = byReason.get("ILLEGAL_TRANSITION");
        assertThat(header(illegal, Headers.LAYER)).isEqualTo("STATE_MACHINE");
        assertThat(header(illegal, Headers.ENTITY_ID)).isEqualTo("o-31");
        assertThat(header(illegal, Headers.EVENT)).isEqualTo("pay");
        assertThat(header(illegal, Headers.CURRENT_STATE)).isEqualTo("cancelled");
        assertThat(header(illegal, Headers.CURRENT_VERSION)).isEqualTo("2");
        assertThat(header(illegal, Headers.EXPECTED_FROM)).isEqualTo("created");
        assertThat(header(illegal, Headers.DEDUP_KEY)).matches("[0-9a-f]{64}");
        ConsumerRecord<byte[], byte[]> malformed = byReason.get("MALFORMED");
        assertThat(header(malformed, Headers.LAYER)).isEqualTo("EXTRACT");
        assertThat(header(malformed, Headers.DEDUP_KEY)).as("no key can be derived from garbage").isNull();
        ConsumerRecord<byte[], byte[]> rejected = byReason.get("BUSINESS_REJECTED");
        assertThat(header(rejected, Headers.LAYER)).isEqualTo("BUSINESS");
        assertThat(header(rejected, Headers.ENTITY_ID)).isEqualTo("o-32");
        assertThat(header(rejected, Headers.EVENT)).isEqualTo("pay");
        assertThat(header(rejected, Headers.CURRENT_STATE)).as("aborted: the entity is back where it was").isEqualTo("created");
        assertThat(header(rejected, Headers.DETAIL)).contains("card declined");

        Map<TopicPartition, Long> end = kafka.endOffsets(topic);
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
      } finally {
        if (sidecar != null) {
          sidecar.close();
        }
        if (rt != null) {
          rt.close();
        }
        dropDatabase(cfg, database);
        ItEnv.deleteRedisKeys(redisPrefix);
      }
      assertThat(node.isAlive()).as("the Node business is still up at the end").isTrue();
    }
  }

  private static String yaml(String topic, String escalations, String group, String database, String redisPrefix, int nodePort) {
    return """
        sidecar:
          instance-id: node-it
          grpc-listen: 127.0.0.1:0
          shutdown-timeout: 10s
          commit-interval: 200ms
        kafka:
          bootstrap-servers: %s
          properties:
            session.timeout.ms: "10000"
        mysql:
          host: %s
          port: %d
          user: %s
          password: '%s'
          database: %s
        redis:
          uri: %s
          key-prefix: '%s'
          timeout: 200ms
        machines:
          order:
            states: [created, paid, shipped, cancelled]
            terminal: [shipped, cancelled]
            events:
              create: {to: created}
              pay:    {from: [created], to: paid}
              ship:   {from: [paid], to: shipped}
              cancel: {from: [created], to: cancelled}
        routes:
          - name: orders
            topics: [%s]
            group: %s
            machine: order
            entity-id: /order_id
            event: /event
            business-key: [/order_id, /sku_id]
            fingerprint-exclude: [/message_id]
            target: 127.0.0.1:%d
            escalation-topic: %s
            handler-timeout: 5s
            early-arrival-timeout: 5s
            retry: {initial-backoff: 50ms, max-backoff: 500ms, max-attempts: 5}
        """.formatted(ItEnv.kafkaBootstrap(), ItEnv.mysqlHost(), ItEnv.mysqlPort(), ItEnv.mysqlUser(), ItEnv.mysqlPassword(), database,
        ItEnv.redisUri(), redisPrefix, topic, group, nodePort, escalations);
  }

  private static String coordinates(String topic, int partition, long offset) {
    return topic + "/" + partition + "@" + offset;
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    org.apache.kafka.common.header.Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private static List<JsonNode> lines(Path file) throws IOException {
    if (!Files.exists(file)) {
      return List.of();
    }
    List<JsonNode> out = new ArrayList<>();
    for (String l : Files.readAllLines(file, StandardCharsets.UTF_8)) {
      if (!l.isBlank()) {
        out.add(JSON.readTree(l));
      }
    }
    return out;
  }

  private static List<JsonNode> okLines(Path file) throws IOException {
    return lines(file).stream().filter(l -> "OK".equals(l.get("outcome").asText())).toList();
  }

  private static void dropDatabase(SidecarConfig cfg, String database) {
    try (Db db = new Db(cfg.mysql())) {
      db.execute("DROP DATABASE IF EXISTS " + database);
    }
  }


  // ------------------------------------------------------------------------------ the Node process

  /** Fails in CI ({@code CI=true}, as GitHub Actions and GitLab set it) and skips elsewhere when node is missing. */
  private static void requireNode(String ci) {
    if (onPath("node")) {
      return;
    }
    String why = "node is not on the PATH: NodeBusinessIT needs Node.js (>= 18) to run examples/node-business";
    if ("true".equalsIgnoreCase(ci == null ? "" : ci.trim())) {
      throw new AssertionError(why + " (CI=true: the build image must provide it; the test is not skipped in CI)");
    }
    Assumptions.abort(why + " (skipped outside CI; with CI=true this fails)");
  }

  private static boolean onPath(String command) {
    String path = System.getenv("PATH");
    if (path == null) {
      return false;
    }
    for (String d : path.split(File.pathSeparator)) {
      if (Files.isExecutable(Path.of(d, command))) {
        return true;
      }
    }
    return false;
  }

  /** examples/node-business of this checkout, found upwards from the working directory. */
  private static Path nodeBusinessDir() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      Path candidate = p.resolve("examples/node-business");
      if (Files.isRegularFile(candidate.resolve("server.js"))) {
        return candidate;
      }
    }
    throw new IllegalStateException("examples/node-business/server.js not found above " + Path.of("").toAbsolutePath());
  }

  /** {@code npm ci} once per checkout (node_modules is not committed). */
  private static void ensureNodeModules(Path dir) throws IOException, InterruptedException {
    if (Files.isDirectory(dir.resolve("node_modules/@grpc/grpc-js")) && Files.isDirectory(dir.resolve("node_modules/@grpc/proto-loader"))) {
      return;
    }
    if (!onPath("npm")) {
      throw new IllegalStateException("node is installed but npm is not on the PATH; install npm, or run `npm ci` in " + dir);
    }
    Path log = Files.createTempFile("npm-ci", ".log");
    Process p = new ProcessBuilder("npm", "ci", "--no-audit", "--no-fund").directory(dir.toFile())
        .redirectErrorStream(true).redirectOutput(log.toFile()).start();
    if (!p.waitFor(180, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new IllegalStateException("`npm ci` in " + dir + " did not finish within 180 s; output in " + log);
    }
    if (p.exitValue() != 0) {
      throw new IllegalStateException("`npm ci` in " + dir + " failed (exit " + p.exitValue() + "):\n" + Files.readString(log));
    }
  }

  /** {@code node server.js} on a free port; SIGTERM on close, then a kill if it lingers. */
  private static final class NodeProcess implements AutoCloseable {
    private static final Pattern LISTENING = Pattern.compile("listening on (\\d+)");
    private final Process process;
    private final int port;

    private NodeProcess(Process process, int port) {
      this.process = process;
      this.port = port;
    }

    static NodeProcess start(Path dir, Path out, Path log) throws IOException, InterruptedException {
      Process p = new ProcessBuilder("node", "server.js", "--port", "0", "--out", out.toString())
          .directory(dir.toFile())
          .redirectError(log.toFile())
          .start();
      CompletableFuture<Integer> port = new CompletableFuture<>();
      Thread reader = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
          for (String line; (line = r.readLine()) != null; ) {
            Matcher m = LISTENING.matcher(line);
            if (m.find()) {
              port.complete(Integer.parseInt(m.group(1)));
            }
          }
        } catch (IOException e) {
          port.completeExceptionally(e);
        }
        port.completeExceptionally(new IllegalStateException("node exited before listening"));
      }, "node-business-stdout");
      reader.setDaemon(true);
      reader.start();
      try {
        return new NodeProcess(p, port.get(20, TimeUnit.SECONDS));
      } catch (Exception e) {
        p.destroyForcibly();
        throw new IllegalStateException("node server.js did not print 'listening on <port>' within 20 s: " + e
            + "\n--- " + log + ":\n" + (Files.exists(log) ? Files.readString(log) : ""), e);
      }
    }

    int port() {
      return port;
    }

    boolean isAlive() {
      return process.isAlive();
    }

    @Override
    public void close() throws InterruptedException {
      process.destroy(); // SIGTERM: the server drains and exits 0
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(5, TimeUnit.SECONDS);
      }
    }
  }
}
