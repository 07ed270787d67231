package dev.onceguard.it.pods;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.RouteConfig.Mode;
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
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * One example business container ({@link BusinessPod}) behind a real sidecar: real Kafka, MariaDB
 * and Redis, the sidecar in-process ({@link GuardRuntime} + {@link Sidecar}), the business as a
 * child process speaking the gRPC contract in push mode (the sidecar calls its MessageHandler) or
 * pull mode (it subscribes to the sidecar's Deliveries and acks). Proves that a business in
 * another language sees every legitimate record exactly once with the guard's metadata, and
 * nothing else; that the guard's ledger and entity rows say the same; and that what it must not
 * see lands on the escalation topic with the {@code onceguard-*} headers (and, in pull mode, as an
 * escalation notice on its stream).
 */
final class BusinessPodScenario {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String ROUTE = "orders";
  private static final int ORDERS = 30;
  private static final int PARTITIONS = 3;
  private static final Duration DEADLINE = Duration.ofSeconds(40);
  /** npm ci, or the first Go build of grpc from Debian's sources on a 2-core machine. */
  private static final int BUILD_TIMEOUT_SECONDS = 300;

  private BusinessPodScenario() {}

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

  /** The order stream: each order keyed by its id, so its events share a partition, in order. */
  private static List<Sent> orders(String topic) {
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
    return sent;
  }

  /** Builds the pod, runs the order stream through a real sidecar to it, and checks every outcome. */
  static void run(BusinessPod pod) throws Exception {
    pod.requireToolchain();
    pod.build(BUILD_TIMEOUT_SECONDS);

    String suffix = ItEnv.uniqueSuffix();
    String tag = pod.dir().getFileName() + "-" + pod.mode().name().toLowerCase() + "-" + suffix;
    String database = "og_it_" + suffix;
    String redisPrefix = "og-it-pod:" + suffix + ":";
    Path out = Files.createDirectories(Path.of("target")).resolve(tag + ".jsonl").toAbsolutePath();
    Path podLog = out.resolveSibling(tag + ".log");

    try (KafkaSupport kafka = new KafkaSupport(); Stack stack = new Stack(pod.mode())) {
      String topic = kafka.createTopic("pod-orders", PARTITIONS);
      String escalations = kafka.createTopic("pod-orders-escalate", 1);
      String group = "pod-it-" + suffix;
      if (pod.mode() == Mode.PUSH) {
        stack.business = PodProcess.start(pod, out, podLog, null, ROUTE);
      }
      SidecarConfig cfg = new ConfigReader(Map.of())
          .parse(yaml(topic, escalations, group, database, redisPrefix, pod.mode(), stack.business == null ? 0 : stack.business.port()),
              "pod-it");
      stack.config = cfg;
      stack.redisPrefix = redisPrefix;
      RouteConfig route = cfg.routes().get(0);

      Map<String, Verdict> verdicts = new ConcurrentHashMap<>();
      Map<String, Integer> verdictCount = new ConcurrentHashMap<>();
      GuardRuntime rt = stack.runtime = new GuardRuntime(cfg, Clock.SYSTEM);
      stack.sidecar = new Sidecar(cfg, rt.processors((r, v, forwarded) -> {
        String c = coordinates(r.topic(), r.partition(), r.offset());
        verdicts.put(c, v);
        verdictCount.merge(c, 1, Integer::sum);
      }), rt.services());
      stack.sidecar.start();
      PodProcess business = stack.business;
      if (pod.mode() == Mode.PULL) {
        business = stack.business = PodProcess.start(pod, out, podLog, "127.0.0.1:" + stack.sidecar.grpcPort(), ROUTE);
        // subscribed before anything is produced, so that it also gets every escalation notice
        PodProcess b = business;
        await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50))
            .failFast(pod.name() + " exited", () -> !b.isAlive())
            .until(() -> rt.pullHub().subscribers(ROUTE) == 1);
      }

      List<Sent> sent = orders(topic);
      long t0 = System.nanoTime();
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
      long legitimate = sent.stream().filter(s -> s.expect() == Expect.DELIVER).count();

      await().atMost(DEADLINE).pollInterval(Duration.ofMillis(100))
          .until(() -> verdicts.keySet().containsAll(byCoordinates.keySet()));
      await().atMost(Duration.ofSeconds(10)).until(() -> okLines(out).size() >= legitimate);
      System.out.printf("%s: %d records decided in %d ms%n", pod.name(), sent.size(), TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));

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

      // the business: every legitimate record exactly once, with the guard's metadata
      List<JsonNode> lines = deliveries(out);
      Map<String, List<JsonNode>> linesByCoordinates = lines.stream()
          .collect(Collectors.groupingBy(l -> coordinates(l.get("topic").asText(), l.get("partition").asInt(), l.get("offset").asLong())));
      byCoordinates.forEach((c, s) -> {
        List<JsonNode> got = linesByCoordinates.getOrDefault(c, List.of());
        switch (s.expect()) {
          case DELIVER, REJECT -> {
            assertThat(got).as("deliveries of '%s'", s.note()).hasSize(1);
            JsonNode l = got.get(0);
            assertThat(l.get("outcome").asText()).as(s.note()).isEqualTo(s.expect() == Expect.DELIVER ? "OK" : "REJECT");
            assertThat(l.get("route").asText()).isEqualTo(ROUTE);
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
            if (pod.mode() == Mode.PULL) {
              assertThat(l.get("delivery_id").asText()).as("pull mode acks by delivery_id").isNotEmpty();
            }
          }
          default -> assertThat(got).as("'%s' must not reach the business", s.note()).isEmpty();
        }
      });
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
        assertThat(header(e, Headers.ROUTE)).isEqualTo(ROUTE);
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

      if (pod.mode() == Mode.PULL) {
        // the subscriber asked for escalation notices: one per escalated record, on its stream
        await().atMost(Duration.ofSeconds(10)).until(() -> notices(out).size() >= 3);
        Map<String, String> noticed = notices(out).stream().collect(Collectors.toMap(
            n -> coordinates(n.get("topic").asText(), n.get("partition").asInt(), n.get("offset").asLong()), n -> n.get("escalation").asText()));
        Map<String, String> expected = new HashMap<>();
        byCoordinates.forEach((c, s) -> {
          switch (s.expect()) {
            case ILLEGAL -> expected.put(c, "ILLEGAL_TRANSITION");
            case REJECT -> expected.put(c, "BUSINESS_REJECTED");
            case MALFORMED -> expected.put(c, "MALFORMED");
            default -> { }
          }
        });
        assertThat(noticed).as("escalation notices on the pull stream").isEqualTo(expected);
      }

      // the guard's own tables agree with what the business saw
      checkTables(cfg, database, sent, dedupKey);

      Map<TopicPartition, Long> end = kafka.endOffsets(topic);
      await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(kafka.committedOffsets(group, topic)).isEqualTo(end));
      assertThat(business.isAlive()).as("the %s business is still up at the end:%n%s", pod.name(), business.log()).isTrue();
    }
  }

  /**
   * Ledger: a DONE row for each delivered record (its dedup key and source offset), REJECTED for
   * the refused one, nothing else DONE. Entities: where the deliveries left them, none pending.
   */
  private static void checkTables(SidecarConfig cfg, String database, List<Sent> sent, Map<Sent, String> dedupKey) {
    try (Db db = new Db(cfg.mysql())) {
      Map<String, String> status = new HashMap<>();
      for (List<Object> r : db.select("SELECT dedup_key, status, entity_id, event FROM " + database + ".og_ledger WHERE route = ?", ROUTE)) {
        status.put((String) r.get(0), r.get(1) + " " + r.get(2) + " " + r.get(3));
      }
      Map<String, String> expectedDone = new HashMap<>();
      for (Sent s : sent) {
        if (s.expect() == Expect.DELIVER) {
          expectedDone.put(dedupKey.get(s), "DONE " + s.entity() + " " + s.event());
        }
        if (s.expect() == Expect.REJECT) {
          assertThat(status.get(dedupKey.get(s))).as("ledger row of '%s'", s.note()).isEqualTo("REJECTED " + s.entity() + " " + s.event());
        }
      }
      Map<String, String> done = status.entrySet().stream().filter(e -> e.getValue().startsWith("DONE "))
          .collect(Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue));
      assertThat(done).as("DONE ledger rows").isEqualTo(expectedDone);

      Map<String, String> entities = new HashMap<>();
      for (List<Object> r : db.select("SELECT entity_id, state, version, pending_key FROM " + database + ".og_entity WHERE machine = 'order'")) {
        entities.put((String) r.get(0), r.get(1) + " v" + r.get(2) + (r.get(3) == null ? "" : " pending"));
      }
      Map<String, String> expectedEntities = new HashMap<>();
      for (int i = 1; i <= ORDERS; i++) {
        expectedEntities.put("o-" + i, "paid v2");
      }
      expectedEntities.put("o-31", "cancelled v2");
      expectedEntities.put("o-32", "created v1");
      assertThat(entities).as("og_entity rows").isEqualTo(expectedEntities);
    }
  }

  /**
   * The example as an idempotent HTTP endpoint on the sidecar's Guard API (the route in pull mode,
   * with no subscriber: the Guard API does not deliver): a request applied once answers 201 with a
   * fresh receipt; the same request sent again answers the same bytes, flagged replayed, and the
   * business applied it once; a second copy sent while the first is being applied is told to retry
   * (409, Retry-After); the same order line with a changed amount is a conflict (422) naming the field.
   */
  static void runIdempotentHttp(BusinessPod pod) throws Exception {
    pod.requireToolchain();
    pod.build(BUILD_TIMEOUT_SECONDS);
    String suffix = ItEnv.uniqueSuffix();
    String tag = pod.dir().getFileName() + "-http-" + suffix;
    String database = "og_it_" + suffix;
    String redisPrefix = "og-it-pod:" + suffix + ":";
    Path out = Files.createDirectories(Path.of("target")).resolve(tag + ".jsonl").toAbsolutePath();
    Path podLog = out.resolveSibling(tag + ".log");
    try (KafkaSupport kafka = new KafkaSupport(); Stack stack = new Stack(Mode.PUSH)) {
      String topic = kafka.createTopic("pod-http-orders", 1);
      String escalations = kafka.createTopic("pod-http-orders-escalate", 1);
      SidecarConfig cfg = new ConfigReader(Map.of())
          .parse(yaml(topic, escalations, "pod-http-" + suffix, database, redisPrefix, Mode.PULL, 0), "pod-http-it");
      stack.config = cfg;
      stack.redisPrefix = redisPrefix;
      GuardRuntime rt = stack.runtime = new GuardRuntime(cfg, Clock.SYSTEM);
      stack.sidecar = new Sidecar(cfg, rt.processors((r, v, forwarded) -> {}), rt.services());
      stack.sidecar.start();
      PodProcess business = stack.business = PodProcess.start(pod, out, podLog, "127.0.0.1:" + stack.sidecar.grpcPort(), ROUTE);
      java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
      java.net.URI uri = java.net.URI.create("http://127.0.0.1:" + business.port() + "/" + ROUTE);
      java.util.function.Function<String, java.net.http.HttpResponse<String>> post = body -> {
        try {
          return http.send(java.net.http.HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(20))
              .header("Content-Type", "application/json").POST(java.net.http.HttpRequest.BodyPublishers.ofString(body)).build(),
              java.net.http.HttpResponse.BodyHandlers.ofString());
        } catch (IOException | InterruptedException e) {
          throw new IllegalStateException(e);
        }
      };

      String create = order("h-1", "create", "");
      var first = post.apply(create);
      assertThat(first.statusCode()).as("first request: %s\n%s", first.body(), business.log()).isEqualTo(201);
      assertThat(JSON.readTree(first.body()).get("receipt").asText()).isNotBlank();
      var retried = post.apply(create);
      assertThat(retried.statusCode()).isEqualTo(201);
      assertThat(retried.body()).as("the retried request gets the first response, byte for byte").isEqualTo(first.body());
      assertThat(retried.headers().firstValue("Idempotent-Replayed")).contains("true");
      assertThat(retried.headers().firstValue("Content-Type")).contains("application/json");
      assertThat(retried.headers().firstValue("Original-Date")).isPresent();

      var changed = post.apply(order("h-1", "create", "").replace("\"amount\":103", "\"amount\":999"));
      assertThat(changed.statusCode()).as(changed.body()).isEqualTo(422);
      assertThat(JSON.readTree(changed.body()).get("error").asText()).isEqualTo("KEY_COLLISION");

      // held while the business works on it (delay_ms): a copy meanwhile is told to come back
      String slow = order("h-2", "create", ",\"delay_ms\":1500");
      var holder = java.util.concurrent.CompletableFuture.supplyAsync(() -> post.apply(slow));
      await().atMost(Duration.ofSeconds(10)).until(() -> deliveries(out).stream().anyMatch(l -> "h-2".equals(l.get("entity_id").asText())));
      var concurrent = post.apply(slow);
      assertThat(concurrent.statusCode()).as(concurrent.body()).isEqualTo(409);
      assertThat(concurrent.headers().firstValue("Retry-After")).isPresent();
      var held = holder.get(20, TimeUnit.SECONDS);
      assertThat(held.statusCode()).isEqualTo(201);
      assertThat(post.apply(slow).body()).isEqualTo(held.body());

      assertThat(deliveries(out).stream().map(l -> l.get("entity_id").asText() + " " + l.get("outcome").asText()).toList())
          .as("the business applied each request once").containsExactly("h-1 OK", "h-2 OK");
    }
  }

  private static String yaml(String topic, String escalations, String group, String database, String redisPrefix, Mode mode, int port) {
    String delivery = mode == Mode.PUSH ? "target: 127.0.0.1:" + port : "mode: pull";
    return """
        sidecar:
          instance-id: pod-it
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
          - name: %s
            topics: [%s]
            group: %s
            machine: order
            entity-id: /order_id
            event: /event
            business-key: [/order_id, /sku_id]
            fingerprint-exclude: [/message_id]
            %s
            escalation-topic: %s
            handler-timeout: 5s
            early-arrival-timeout: 5s
            retry: {initial-backoff: 50ms, max-backoff: 500ms, max-attempts: 5}
        """.formatted(ItEnv.kafkaBootstrap(), ItEnv.mysqlHost(), ItEnv.mysqlPort(), ItEnv.mysqlUser(), ItEnv.mysqlPassword(), database,
        ItEnv.redisUri(), redisPrefix, ROUTE, topic, group, delivery, escalations);
  }

  private static String coordinates(String topic, int partition, long offset) {
    return topic + "/" + partition + "@" + offset;
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    org.apache.kafka.common.header.Header h = r.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  /** Every JSON line of the business's file: deliveries, and in pull mode escalation notices. */
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

  private static List<JsonNode> deliveries(Path file) throws IOException {
    return lines(file).stream().filter(l -> !l.has("escalation")).toList();
  }

  private static List<JsonNode> notices(Path file) throws IOException {
    return lines(file).stream().filter(l -> l.has("escalation")).toList();
  }

  private static List<JsonNode> okLines(Path file) throws IOException {
    return deliveries(file).stream().filter(l -> "OK".equals(l.get("outcome").asText())).toList();
  }

  /**
   * What one run started, closed client first: in push mode the sidecar (drain) and its runtime,
   * then the business; in pull mode the business first (a sidecar waits for open streams to end
   * when it stops). Then the database and the Redis keys.
   */
  private static final class Stack implements AutoCloseable {
    final Mode mode;
    PodProcess business;
    SidecarConfig config;
    String redisPrefix;
    GuardRuntime runtime;
    Sidecar sidecar;

    Stack(Mode mode) {
      this.mode = mode;
    }

    @Override
    public void close() throws Exception {
      try {
        if (business != null && mode == Mode.PULL) {
          business.close();
        }
        if (sidecar != null) {
          sidecar.close();
        }
        if (runtime != null) {
          runtime.close();
        }
      } finally {
        try {
          if (business != null) {
            business.close(); // a no-op when closed above
          }
        } finally {
          if (config != null) {
            try (Db db = new Db(config.mysql())) {
              db.execute("DROP DATABASE IF EXISTS " + config.mysql().database());
            }
          }
          if (redisPrefix != null) {
            ItEnv.deleteRedisKeys(redisPrefix);
          }
        }
      }
    }
  }
}
