package dev.onceguard.it.scenario;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.RecordingBusiness;
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
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * A malformed record near Kafka's default 1 MiB limit, followed by a good one, on real Kafka,
 * MariaDB and Redis. The source topic takes the record, but its escalation copy (the record plus
 * the {@code onceguard-*} headers) is over the limit, a failure no retry can change. The copy is
 * written without its value, saying so and where the original is, and the partition moves on: the
 * good record reaches the business and the committed offset passes both. Once with the limit the
 * sidecar's producer enforces ({@code max.request.size}), once with the broker's (the producer
 * allows more, the topic refuses it: {@code MESSAGE_TOO_LARGE}). {@code onceguard redrive} produces
 * such an escalation's original, read back from its coordinates, and fails naming it once the
 * source topic no longer holds it.
 */
class LargeRecordIT {
  /** Fits a default topic (1,048,588 bytes a batch) and the default producer (1,048,576 a request). */
  private static final int VALUE_BYTES = 1_048_400;

  private static byte[] malformed() {
    byte[] v = new byte[VALUE_BYTES];
    Arrays.fill(v, (byte) 'x');
    byte[] head = "{\"line_id\":\"big\",\"event\":\"create\",\"pad\":\"".getBytes(UTF_8);
    System.arraycopy(head, 0, v, 0, head.length);
    return v; // the string is never closed: not valid JSON
  }

  @Test
  void overTheProducersLimit_copyIsWrittenWithoutItsValue_andThePartitionMovesOn_andRedriveProducesTheOriginal() throws Exception {
    run("large", "", true);
  }

  @Test
  void overTheBrokersLimit_copyIsWrittenWithoutItsValue_andThePartitionMovesOn() throws Exception {
    run("large-broker", "properties: {max.request.size: '4194304'}", false);
  }

  private record Run(int code, String out, String err) {}

  private static Run cli(Path config, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    String[] all = new String[args.length + 1];
    all[0] = args[0];
    all[1] = "--config=" + config;
    System.arraycopy(args, 1, all, 2, args.length - 1);
    int code = new CommandLine(new Main()).setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(all);
    return new Run(code, out.toString(), err.toString());
  }

  private static void run(String name, String kafkaExtra, boolean redrive) throws Exception {
    try (OneRouteEnv env = new OneRouteEnv(name, 1);
        RecordingBusiness business = RecordingBusiness.start().behave(d -> Reply.ok())) {
      byte[] big = malformed();
      ProducerRecord<byte[], byte[]> bad = new ProducerRecord<>(env.topic, null, "big".getBytes(UTF_8), big,
          new RecordHeaders().add(new RecordHeader("trace", "t-big".getBytes(UTF_8))));
      List<ProducerRecord<byte[], byte[]>> records = List.of(bad, env.record("l-1", "create", "m-1"));
      env.kafka.produce(records);

      String yaml = env.yaml("/line_id", business.target(), dev.onceguard.it.ItEnv.redisUri(), RecordingBusiness.freePort(), "");
      if (!kafkaExtra.isEmpty()) {
        String kafkaLine = "kafka: {bootstrap-servers: '" + env.kafka.bootstrap() + "'}";
        assertThat(yaml).contains(kafkaLine);
        yaml = yaml.replace(kafkaLine, "kafka: {bootstrap-servers: '" + env.kafka.bootstrap() + "', " + kafkaExtra + "}");
        assertThat(yaml).contains(kafkaExtra);
      }
      SidecarConfig cfg = new ConfigReader(Map.of()).parse(yaml, env.group);
      TopicPartition tp = new TopicPartition(env.topic, 0);
      try (InProcessSidecar sidecar = InProcessSidecar.start(cfg)) {
        Awaitility.await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> env.kafka.committedOffset(env.group, tp) >= 2);

        assertThat(business.okDeliveries()).extracting(d -> d.getEntityId()).containsExactly("l-1");
        List<ConsumerRecord<byte[], byte[]>> escalated = env.kafka.readAll(env.escalations);
        assertThat(escalated).hasSize(1);
        ConsumerRecord<byte[], byte[]> copy = escalated.get(0);
        assertThat(copy.value()).as("the value is left out").isNull();
        assertThat(copy.key()).isEqualTo("big".getBytes(UTF_8));
        assertThat(OneRouteEnv.header(copy, "trace")).as("the record's own headers stay").isEqualTo("t-big");
        assertThat(OneRouteEnv.header(copy, Headers.OMITTED)).isEqualTo("value");
        assertThat(OneRouteEnv.header(copy, Headers.ORIGINAL_VALUE_SIZE)).isEqualTo(Integer.toString(VALUE_BYTES));
        assertThat(OneRouteEnv.header(copy, Headers.REASON)).isEqualTo("MALFORMED");
        assertThat(OneRouteEnv.header(copy, Headers.DETAIL)).contains("not valid JSON");
        assertThat(OneRouteEnv.header(copy, Headers.ORIGINAL_TOPIC)).isEqualTo(env.topic);
        assertThat(OneRouteEnv.header(copy, Headers.ORIGINAL_PARTITION)).isEqualTo("0");
        assertThat(OneRouteEnv.header(copy, Headers.ORIGINAL_OFFSET)).isEqualTo("0");
        assertThat(env.kafka.committedOffset(env.group, tp)).isEqualTo(2);
      }
      if (!redrive) {
        return;
      }
      Path config = Files.createTempFile("onceguard-large", ".yaml");
      try {
        Files.writeString(config, yaml);
        Run dry = cli(config, "redrive", "--route", "lines", "--dry-run");
        assertThat(dry.code()).as(dry.err()).isZero();
        assertThat(dry.out()).contains("would redrive " + env.escalations + "/0@0 -> " + env.topic).contains("1 record(s)");

        Run done = cli(config, "redrive", "--route", "lines");
        assertThat(done.code()).as(done.err()).isZero();
        List<ConsumerRecord<byte[], byte[]>> source = env.kafka.readAll(env.topic);
        assertThat(source).hasSize(3);
        ConsumerRecord<byte[], byte[]> back = source.get(2);
        assertThat(back.value()).as("the original value, read back from the source topic").isEqualTo(big);
        assertThat(back.key()).isEqualTo("big".getBytes(UTF_8));
        assertThat(OneRouteEnv.header(back, "trace")).isEqualTo("t-big");
        back.headers().forEach(h -> assertThat(h.key()).isIn("trace", Headers.REDRIVE_COUNT));
        assertThat(OneRouteEnv.header(back, Headers.REDRIVE_COUNT)).isEqualTo("1");

        // retention passed: the original is gone, and redrive says so instead of producing a null value
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, env.kafka.bootstrap()))) {
          admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(3))).all().get(30, TimeUnit.SECONDS);
        }
        Run gone = cli(config, "redrive", "--route", "lines");
        assertThat(gone.code()).isEqualTo(1);
        assertThat(gone.err()).contains("cannot redrive " + env.escalations + "/0@0", "leaves out the record's value",
            env.topic + "/0@0 no longer holds the original");
        assertThat(env.kafka.endOffsets(env.topic).get(tp)).as("nothing produced").isEqualTo(3);
      } finally {
        Files.deleteIfExists(config);
      }
    }
  }
}
