package dev.onceguard.it.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.proxy.escalate.Escalator;
import dev.onceguard.proxy.guard.ClaimResult;
import dev.onceguard.proxy.guard.Guard;
import dev.onceguard.proxy.ops.Main;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The operator's command line ({@code explain}, {@code reset-entity}, {@code redrive}) as a user
 * runs it, with a configuration file, against the real MariaDB and Kafka.
 */
class AdminCliIT {
  private static final String SUFFIX = UUID.randomUUID().toString().substring(0, 8);
  private static final String SOURCE = "admin-orders-" + SUFFIX;
  private static final String ESCALATIONS = "admin-orders-esc-" + SUFFIX;
  static GuardFixture fx;
  static KafkaSupport kafka;

  @TempDir
  static Path dir;

  @BeforeAll
  static void setUp() {
    kafka = new KafkaSupport();
    // GuardIT's helpers (orderIn, claim, apply) work on GuardIT.fx: this class's fixture while it runs
    fx = new GuardFixture(GuardIT.CONFIG.replace("topics: [orders]", "topics: [" + SOURCE + "]\n    escalation-topic: " + ESCALATIONS));
    GuardIT.fx = fx;
  }

  @AfterAll
  static void tearDown() throws Exception {
    GuardIT.fx = null;
    fx.close();
    kafka.close();
  }

  record Run(int code, String out, String err) {}

  static Run cli(String... args) throws Exception {
    Path config = dir.resolve("onceguard.yaml");
    Files.writeString(config, fx.yaml.replace("bootstrap-servers: 127.0.0.1:1", "bootstrap-servers: " + ItEnv.kafkaBootstrap()));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    String[] all = new String[args.length + 1];
    all[0] = args[0];
    all[1] = "--config=" + config;
    System.arraycopy(args, 1, all, 2, args.length - 1);
    int code = new CommandLine(new Main()).setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(all);
    return new Run(code, out.toString(), err.toString());
  }

  @Test
  void explain_thenResetEntity_refusedWhileATransitionIsInFlight_auditedWhenDone() throws Exception {
    Guard g = fx.guard("admin-" + SUFFIX);
    String id = GuardIT.orderIn(g, "shipped");

    Run explained = cli("explain", "--route", "orders", "--entity", id);
    assertThat(explained.code()).as(explained.err()).isZero();
    assertThat(explained.out()).contains("entity order/" + id + ": state shipped, version 4")
        .contains("DONE ship to_ship -> shipped").contains("DONE create created");

    // a transition in flight: the reset is refused and changes nothing
    ClaimResult inFlight = GuardIT.claim(g, "orders", GuardIT.order(id, "deliver"), GuardIT.src());
    assertThat(inFlight).isInstanceOf(ClaimResult.Accepted.class);
    Run refused = cli("reset-entity", "--route", "orders", "--entity", id, "--state", "to_ship", "--reason", "parcel came back");
    assertThat(refused.code()).isEqualTo(3);
    assertThat(refused.err()).contains("transition in flight").contains("nothing was changed");
    assertThat(fx.string("SELECT state FROM og_entity WHERE entity_id = ?", id)).isEqualTo("delivered");
    assertThat(g.abort(((ClaimResult.Accepted) inFlight).claim()).toCompletableFuture().join()).isTrue();

    Run reset = cli("reset-entity", "--route", "orders", "--entity", id, "--state", "to_ship", "--reason", "parcel came back (ticket 42)");
    assertThat(reset.code()).as(reset.err()).isZero();
    assertThat(reset.out()).contains("'shipped' (version 4) -> 'to_ship' (version 5)");
    assertThat(fx.string("SELECT CONCAT(state, '/', version) FROM og_entity WHERE machine = 'order' AND entity_id = ?", id))
        .isEqualTo("to_ship/5");
    assertThat(fx.string("SELECT CONCAT(layer, '/', reason, '/', current_state) FROM og_decision WHERE entity_id = ? AND reason = 'OPERATOR_RESET'",
        id)).isEqualTo("OPERATOR/OPERATOR_RESET/to_ship");
    assertThat(fx.string("SELECT detail FROM og_decision WHERE entity_id = ? AND reason = 'OPERATOR_RESET'", id))
        .contains("ticket 42").contains(System.getProperty("user.name"));
    assertThat(cli("explain", "--route", "orders", "--entity", id).out()).contains("OPERATOR/OPERATOR_RESET").contains("ticket 42");

    // the machine goes on from the state the operator set: a second shipment batch applies
    Verdict again = GuardIT.apply(g, "orders", GuardIT.order(id, "ship", "W1", "m-reship").replace("\"batch_no\":7", "\"batch_no\":8"));
    assertThat(again.getDisposition()).isEqualTo(Disposition.ACCEPTED);

    Run badState = cli("reset-entity", "--route", "orders", "--entity", id, "--state", "lost", "--reason", "x");
    assertThat(badState.code()).isEqualTo(2);
    assertThat(badState.err()).contains("--state: 'lost' is not a state of machine 'order'");
    Run unknownKey = cli("explain", "--route", "orders", "0000000000000000000000000000000000000000000000000000000000000000");
    assertThat(unknownKey.code()).as("nothing known about the key").isEqualTo(3);
    assertThat(unknownKey.out()).contains("entity: none").contains("ledger: no rows");
  }

  @Test
  void resetEntity_releaseOrphan_freesAClaimWhoseOwnerIsGone_neverALiveOne() throws Exception {
    // a sidecar holding 'deliver' of this entity dies, and its route is removed from the
    // configuration: nothing will ever redeliver that record, and the entity stays busy
    Guard gone = fx.guard("gone-" + SUFFIX);
    gone.heartbeat().toCompletableFuture().join();
    String id = GuardIT.orderIn(gone, "shipped");
    ClaimResult orphan = GuardIT.claim(gone, "orders", GuardIT.order(id, "deliver"), GuardIT.src());
    String key = ((ClaimResult.Accepted) orphan).claim().dedupKey();

    Run live = cli("reset-entity", "--route", "orders", "--entity", id, "--state", "delivered", "--reason", "x", "--release-orphan");
    assertThat(live.code()).as("its owner still heartbeats: never released").isEqualTo(3);
    assertThat(live.err()).contains("owner is alive");

    fx.update("UPDATE og_owner SET alive_until = alive_until - 60000 WHERE owner = ?", "gone-" + SUFFIX);
    Run refused = cli("reset-entity", "--route", "orders", "--entity", id, "--state", "delivered", "--reason", "x");
    assertThat(refused.code()).isEqualTo(3);
    assertThat(refused.err()).contains("orphaned").contains("--release-orphan");

    Run released = cli("reset-entity", "--route", "orders", "--entity", id, "--state", "delivered", "--reason", "route removed",
        "--release-orphan");
    assertThat(released.code()).as(released.err()).isZero();
    assertThat(released.out()).contains("released the orphaned claim " + key);
    assertThat(fx.string("SELECT CONCAT(state, '/', COALESCE(pending_key, '-')) FROM og_entity WHERE machine = 'order' AND entity_id = ?", id))
        .isEqualTo("delivered/-");
    assertThat(fx.string("SELECT status FROM og_ledger WHERE dedup_key = ?", key)).as("kept, so a later delivery is flagged")
        .isEqualTo("REJECTED");
    assertThat(fx.string("SELECT detail FROM og_decision WHERE entity_id = ? AND reason = 'OPERATOR_RESET'", id))
        .contains("released the orphaned claim");
  }

  @Test
  void redrive_producesTheChosenEscalationsToTheirOriginalTopic_withoutOnceGuardHeaders() throws Exception {
    kafka.createTopicNamed(SOURCE, 1);
    kafka.createTopicNamed(ESCALATIONS, 1);
    try (Escalator escalator = new Escalator(ItEnv.kafkaBootstrap(), Map.of(), "admin-it")) {
      escalate(escalator, 5, "orders", Reason.BUSINESS_REJECTED, "{\"n\":5}");
      escalate(escalator, 6, "orders", Reason.OUT_OF_ORDER, "{\"n\":6}");
      escalate(escalator, 7, "orders", Reason.BUSINESS_REJECTED, "{\"n\":7}");
      escalate(escalator, 8, "parcels", Reason.BUSINESS_REJECTED, "{\"n\":8}");
    }

    Run dry = cli("redrive", "--route", "orders", "--reason", "BUSINESS_REJECTED", "--dry-run");
    assertThat(dry.code()).as(dry.err()).isZero();
    assertThat(dry.out()).contains("would redrive " + ESCALATIONS + "/0@0 -> " + SOURCE).contains("would redrive " + ESCALATIONS + "/0@2")
        .doesNotContain("@1 ->").contains("2 record(s) of route 'orders' would be redriven (dry run)");
    assertThat(kafka.readAll(SOURCE)).as("a dry run produces nothing").isEmpty();

    Run done = cli("redrive", "--route", "orders", "--reason", "BUSINESS_REJECTED");
    assertThat(done.code()).as(done.err()).isZero();
    assertThat(done.out()).contains("2 record(s) of route 'orders' redriven");
    List<ConsumerRecord<byte[], byte[]>> back = kafka.readAll(SOURCE);
    assertThat(back).extracting(r -> new String(r.value(), StandardCharsets.UTF_8)).containsExactly("{\"n\":5}", "{\"n\":7}");
    for (ConsumerRecord<byte[], byte[]> r : back) {
      assertThat(new String(r.key(), StandardCharsets.UTF_8)).startsWith("k-");
      assertThat(r.headers().lastHeader("trace").value()).isEqualTo("abc".getBytes(StandardCharsets.UTF_8));
      // the verdict's headers are gone; the redrive count says it was redriven once
      r.headers().forEach(h -> assertThat(h.key()).isIn("trace", "onceguard-redrive-count"));
      assertThat(r.headers().lastHeader("onceguard-redrive-count").value()).isEqualTo("1".getBytes(StandardCharsets.UTF_8));
    }

    Run byOffset = cli("redrive", "--route", "orders", "--partition", "0", "--from-offset", "1", "--to-offset", "2", "--dry-run");
    assertThat(byOffset.out()).contains("would redrive " + ESCALATIONS + "/0@1").contains("1 record(s)");
    Run unpaired = cli("redrive", "--route", "orders", "--from-offset", "1");
    assertThat(unpaired.code()).isEqualTo(2);
    assertThat(unpaired.err()).contains("give --partition too");
  }

  private static void escalate(Escalator e, long offset, String route, Reason reason, String value) {
    RecordHeaders hs = new RecordHeaders();
    hs.add(new RecordHeader("trace", "abc".getBytes(StandardCharsets.UTF_8)));
    ConsumerRecord<byte[], byte[]> source = new ConsumerRecord<>(SOURCE, 0, offset, System.currentTimeMillis(), TimestampType.CREATE_TIME,
        0, 0, ("k-" + offset).getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8), hs, java.util.Optional.empty());
    Verdict v = Verdict.newBuilder().setRoute(route).setDisposition(Disposition.ILLEGAL_TRANSITION_ESCALATE).setLayer(Layer.BUSINESS)
        .setReason(reason).setDetail("test").build();
    e.escalate(ESCALATIONS, source, v, System.currentTimeMillis()).toCompletableFuture().join();
  }
}
