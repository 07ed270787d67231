package dev.onceguard.it.scenario;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.it.RecordingBusiness;
import dev.onceguard.it.RecordingBusiness.Call;
import dev.onceguard.it.RecordingBusiness.Reply;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.ops.Main;
import dev.onceguard.wire.Headers;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code redrive} checks before it sends, against a running sidecar, the real MariaDB and Kafka:
 * escalations of four reasons (business rejection, key collision, illegal transition, missing
 * field); the dry run's classification of each is what the sidecar then does with it when it is
 * redriven, record by record (what the business received, what the verdict topic says). A second
 * redrive skips the record that could only be a duplicate, refuses those redriven already beyond
 * {@code --max-redrives}, and {@code --force} sends it to be ignored.
 */
class RedriveCheckIT {
  @TempDir
  Path dir;

  private record Run(int code, String out, String err) {}

  private static Run cli(Path config, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    List<String> all = new ArrayList<>(List.of(args[0], "--config=" + config, "--route", "lines"));
    all.addAll(List.of(args).subList(1, args.length));
    int code = new CommandLine(new Main()).setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(all.toArray(String[]::new));
    return new Run(code, out.toString(), err.toString());
  }

  private static ProducerRecord<byte[], byte[]> line(String topic, String line, String event, String extra) {
    String json = "{\"line_id\":\"" + line + "\",\"order_id\":\"o-" + line + "\",\"sku_id\":\"s-1\",\"warehouse_id\":\"w-1\",\"batch_no\":1,"
        + "\"event\":\"" + event + "\"" + extra + "}";
    return new ProducerRecord<>(topic, line.getBytes(UTF_8), json.getBytes(UTF_8));
  }

  private static void processed(OneRouteEnv env) {
    TopicPartition tp = new TopicPartition(env.topic, 0);
    long end = env.kafka.endOffsets(env.topic).get(tp);
    Awaitility.await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
        .until(() -> env.kafka.committedOffset(env.group, tp) >= end);
  }

  /** Where the business's delivery was consumed: {@code topic/partition@offset}, as redrive prints it. */
  private static String at(Call c) {
    var r = c.delivery().getRecord();
    return r.getTopic() + "/" + r.getPartition() + "@" + r.getOffset();
  }

  /** Per escalation coordinates, the dry run's JSON object. */
  private static Map<String, JsonNode> plan(Run dry) throws Exception {
    Map<String, JsonNode> out = new LinkedHashMap<>();
    for (String l : dry.out().split("\n")) {
      if (l.startsWith("{")) {
        JsonNode n = new ObjectMapper().readTree(l);
        out.put(n.path("escalation").asText(), n);
      }
    }
    return out;
  }

  /** The last verdict of every source record of the topic, by {@code topic/partition@offset}. */
  private static Map<String, String> verdicts(OneRouteEnv env) {
    Map<String, String> out = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> v : env.kafka.readAll(env.verdicts)) {
      out.put(OneRouteEnv.header(v, Headers.ORIGINAL_TOPIC) + "/" + OneRouteEnv.header(v, Headers.ORIGINAL_PARTITION) + "@"
          + OneRouteEnv.header(v, Headers.ORIGINAL_OFFSET), OneRouteEnv.header(v, Headers.DISPOSITION) + "/"
          + OneRouteEnv.header(v, Headers.REASON));
    }
    return out;
  }

  @Test
  void dryRunClassification_isWhatTheRedriveThenProduces_recordByRecord() throws Exception {
    AtomicBoolean fixed = new AtomicBoolean();
    try (OneRouteEnv env = new OneRouteEnv("redrive-check", 1);
        RecordingBusiness business = RecordingBusiness.start()
            .behave(d -> fixed.get() || !d.getEntityId().equals("l-rej") ? Reply.ok() : Reply.reject("stock service down"))) {
      env.kafka.produce(List.of(
          line(env.topic, "l-rej", "create", ""), // rejected by the business: BUSINESS_REJECTED
          line(env.topic, "l-ok", "create", ""),
          line(env.topic, "l-ok", "create", ",\"note\":\"typo\""), // same key, other content: KEY_COLLISION
          line(env.topic, "l-end", "create", ""),
          line(env.topic, "l-end", "cancel", ""),
          line(env.topic, "l-end", "pay", ""), // after a terminal state: ILLEGAL_TRANSITION
          new ProducerRecord<>(env.topic, "l-miss".getBytes(UTF_8),
              "{\"line_id\":\"l-miss\",\"order_id\":\"o-9\",\"warehouse_id\":\"w-1\",\"batch_no\":1,\"event\":\"create\"}".getBytes(UTF_8))));
      String yaml = env.yaml("/line_id", business.target(), dev.onceguard.it.ItEnv.redisUri(), RecordingBusiness.freePort(), "");
      SidecarConfig cfg = new ConfigReader(Map.of()).parse(yaml, env.group);
      Path config = dir.resolve("onceguard.yaml");
      Files.writeString(config, yaml);
      try (InProcessSidecar sidecar = InProcessSidecar.start(cfg)) {
        processed(env);
        assertThat(env.kafka.readAll(env.escalations)).extracting(r -> OneRouteEnv.header(r, Headers.REASON))
            .containsExactlyInAnyOrder("BUSINESS_REJECTED", "KEY_COLLISION", "ILLEGAL_TRANSITION", "MISSING_FIELD");

        Run groups = cli(config, "redrive", "--groups");
        assertThat(groups.code()).as(groups.err()).isZero();
        assertThat(groups.out()).contains("4 group(s) of route 'lines'").contains("1 x BUSINESS_REJECTED");
        assertThat(env.kafka.readAll(env.topic)).as("--groups produces nothing").hasSize(7);

        fixed.set(true); // the business is fixed: the rejected record can go through now
        Run dry = cli(config, "redrive", "--dry-run", "--json");
        assertThat(dry.code()).as(dry.err()).isZero();
        Map<String, JsonNode> plan = plan(dry);
        assertThat(plan.values()).extracting(n -> n.path("reason").asText() + "->" + n.path("expect").asText() + "/"
            + n.path("expectReason").asText()).containsExactlyInAnyOrder("BUSINESS_REJECTED->APPLY/NONE", "KEY_COLLISION->CONFLICT/KEY_COLLISION",
            "ILLEGAL_TRANSITION->REFUSED/ILLEGAL_TRANSITION", "MISSING_FIELD->INVALID/MISSING_FIELD");
        assertThat(plan.values()).allSatisfy(n -> assertThat(n.path("action").asText()).isEqualTo("SEND"));
        assertThat(dry.out()).contains("expected outcome: {APPLY=1, CONFLICT=1, INVALID=1, REFUSED=1}");
        assertThat(env.kafka.readAll(env.topic)).as("a dry run produces nothing").hasSize(7);

        Run done = cli(config, "redrive", "--rate", "20/s");
        assertThat(done.code()).as(done.err()).isZero();
        Map<String, String> sentTo = new LinkedHashMap<>();
        for (String l : done.out().split("\n")) {
          if (l.startsWith("sent ")) {
            String[] p = l.substring(5).split(" -> ");
            sentTo.put(p[0], p[1]);
          }
        }
        assertThat(sentTo).containsOnlyKeys(plan.keySet());
        processed(env);

        // record by record: what the dry run said is what happened
        Map<String, String> verdicts = verdicts(env);
        List<Call> calls = business.calls();
        for (Map.Entry<String, String> e : sentTo.entrySet()) {
          JsonNode expected = plan.get(e.getKey());
          String at = e.getValue();
          List<Call> received = calls.stream().filter(c -> at(c).equals(at)).toList();
          switch (expected.path("expect").asText()) {
            case "APPLY" -> {
              assertThat(verdicts.get(at)).as(at).isEqualTo("ACCEPTED/NONE");
              assertThat(received).as("the business received %s", at).singleElement()
                  .satisfies(c -> assertThat(c.delivery().getRedelivery()).as("it saw the key before").isTrue());
              assertThat(expected.path("redelivery").asBoolean()).isTrue();
            }
            default -> {
              assertThat(verdicts.get(at)).as(at).isEqualTo("ILLEGAL_TRANSITION_ESCALATE/" + expected.path("expectReason").asText());
              assertThat(received).as("never forwarded: %s", at).isEmpty();
            }
          }
        }
        List<ConsumerRecord<byte[], byte[]>> escalated = env.kafka.readAll(env.escalations);
        assertThat(escalated).hasSize(7);
        assertThat(escalated.subList(4, 7)).allSatisfy(r -> assertThat(OneRouteEnv.header(r, Headers.REDRIVE_COUNT)).isEqualTo("1"));

        // a second round: the applied one could only be a duplicate now; the re-escalated ones were redriven once already
        Run again = cli(config, "redrive", "--dry-run", "--json", "--max-redrives", "1");
        Map<String, JsonNode> second = plan(again);
        String rejected = plan.entrySet().stream().filter(x -> x.getValue().path("reason").asText().equals("BUSINESS_REJECTED"))
            .findFirst().orElseThrow().getKey();
        assertThat(second.get(rejected).path("expect").asText()).isEqualTo("DUPLICATE");
        assertThat(second.get(rejected).path("action").asText()).isEqualTo("SKIP_DUPLICATE");
        assertThat(second.values()).filteredOn(n -> n.path("redrives").asInt() == 1).hasSize(3)
            .allSatisfy(n -> assertThat(n.path("action").asText()).isEqualTo("REFUSED_MAX_REDRIVES"));

        String group = second.get(rejected).path("group").asText();
        Run skipped = cli(config, "redrive", "--group", group);
        assertThat(skipped.code()).as(skipped.err()).isZero();
        assertThat(skipped.out()).contains("skipped as duplicates 1").contains("0 record(s) of route 'lines' redriven");
        Run forced = cli(config, "redrive", "--group", group, "--force");
        assertThat(forced.out()).contains("1 record(s) of route 'lines' redriven");
        String forcedAt = forced.out().lines().filter(l -> l.startsWith("sent ")).findFirst().orElseThrow().split(" -> ")[1];
        processed(env);
        // answered from L1 or the ledger, whichever holds the key
        assertThat(verdicts(env).get(forcedAt)).as("the sidecar ignores it, as the dry run said").startsWith("DUPLICATE_IGNORE/");
        assertThat(business.calls()).filteredOn(c -> at(c).equals(forcedAt)).isEmpty();
      }
    }
  }
}
