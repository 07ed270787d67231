package dev.onceguard.client;

import static dev.onceguard.client.TestDeliveries.ROUTE;
import static dev.onceguard.client.TestDeliveries.delivery;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.Ack;
import dev.onceguard.v1.HandleResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

class ReadmeExamplesTest {
  private static final Pattern TAG = Pattern.compile("// tag::(\\w+)\\[]\\n(.*?)\\n\\s*// end::\\1\\[]", Pattern.DOTALL);

  @Test
  void readme_containsEveryExampleVerbatim() throws IOException {
    String source = Files.readString(Path.of("src/test/java/dev/onceguard/client/ReadmeExamples.java"));
    String readme = Files.readString(Path.of("README.md"));
    List<String> tags = new ArrayList<>();

    Matcher m = TAG.matcher(source);
    while (m.find()) {
      tags.add(m.group(1));
      assertThat(readme).as("README example '%s'", m.group(1)).contains(dedent(m.group(2)));
    }
    assertThat(tags).containsExactly("consumer", "loop", "reject", "adapter", "guard");
  }

  @Test
  void loopAndRejectExamples_runAgainstASidecar() {
    FakeDeliveries sidecar = new FakeDeliveries();
    sidecar.enqueue(
        delivery("d1", 0, 1, "o-1", "packed"),
        delivery("d2", 0, 2, "o-2", "discontinued"),
        delivery("d3", 0, 3, "o-3", "packed"),
        delivery("d4", 0, 4, "o-4", "packed"));
    ReadmeExamples examples = new ReadmeExamples();
    try (InProcess grpc = new InProcess(sidecar);
        OnceGuardConsumer<String, String> consumer = new OnceGuardConsumer<>(
            grpc.channel,
            Map.of(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE,
                OnceGuardConsumerConfig.WINDOW_CONFIG, 2,
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false),
            new StringDeserializer(),
            new StringDeserializer())) {
      consumer.subscribe(List.of(TestDeliveries.TOPIC));
      examples.reject(consumer); // d1 shipped, d2 rejected
      examples.loop(consumer); // d3 and d4 shipped in one batch; the loop then ends

      assertThat(examples.shipped).containsExactly("o-1=packed", "o-3=packed", "o-4=packed");
      assertThat(sidecar.acks()).extracting(Ack::getDeliveryId, a -> a.getResult().getOutcome())
          .startsWith(
              org.assertj.core.api.Assertions.tuple("d2", HandleResult.Outcome.REJECT),
              org.assertj.core.api.Assertions.tuple("d1", HandleResult.Outcome.OK));
    }
  }

  private static String dedent(String block) {
    List<String> lines = block.lines().toList();
    int indent = lines.stream().filter(l -> !l.isBlank()).mapToInt(l -> l.length() - l.stripLeading().length()).min().orElse(0);
    return String.join("\n", lines.stream().map(l -> l.length() >= indent ? l.substring(indent) : l.strip()).toList());
  }
}
