package dev.onceguard.it.pods;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The README's "Try it by hand" block, run as written by bash from the repository root, on the
 * stack {@code make test} started: what it tells a newcomer runs, and shows what the README says it
 * shows. {@code make} inside the block is checked with {@code make -n} (the targets exist) instead
 * of run, since {@code make test} has built the jars and started the stack already.
 *
 * <p>The block uses fixed names (topic {@code quickstart.orders}, database
 * {@code onceguard_quickstart}, ports 9001, 7700 and 9401), as a reader would; the test clears
 * them first, so a second run starts from the same clean slate as the first.
 */
class ReadmeTryItIT {
  private static final Path ROOT = Paths.get("..").toAbsolutePath().normalize();
  private static final Pattern BLOCK = Pattern.compile(
      "<!-- try-it:begin -->\\s*```sh\\n(.*?)```\\s*<!-- try-it:end -->", Pattern.DOTALL);
  private static final Pattern DELIVERY = Pattern.compile(
      "\"entity_id\":\"(o-\\d)\".*?\"event\":\"(\\w+)\"|\"event\":\"(\\w+)\".*?\"entity_id\":\"(o-\\d)\"");

  @Test
  void tryItByHand_runsAsWritten_andShowsWhatTheReadmeSays() throws Exception {
    BusinessPod.node().requireToolchain();
    String block = tryItBlock();
    clearQuickstartState();

    Path out = Files.createTempFile("readme-try-it", ".log");
    Process bash = new ProcessBuilder("bash", "-euo", "pipefail", "-c",
        "make() { command make -n \"$@\" >/dev/null; }\n" + block)
        .directory(ROOT.toFile())
        .redirectErrorStream(true)
        .redirectOutput(out.toFile())
        .start();
    boolean finished = bash.waitFor(240, TimeUnit.SECONDS);
    if (!finished) {
      bash.descendants().forEach(ProcessHandle::destroyForcibly);
      bash.destroyForcibly();
    }
    String shown = Files.readString(out);
    assertThat(finished).as("the block finished within 240 s; its output:%n%s", shown).isTrue();
    assertThat(bash.exitValue()).as("the block's exit status; its output:%n%s", shown).isZero();

    List<String> deliveries = Files.readAllLines(ROOT.resolve(".stack/quickstart/deliveries.jsonl")).stream()
        .map(ReadmeTryItIT::entityAndEvent).sorted().collect(Collectors.toList());
    assertThat(deliveries).as("what the business received").containsExactly(
        "o-1 create", "o-1 pay", "o-2 cancel", "o-2 create");
    assertThat(shown).as("escalations shown").contains(
        "onceguard-reason:KEY_COLLISION", "onceguard-reason:ILLEGAL_TRANSITION");
    assertThat(duplicatesCounted(shown)).as("DUPLICATE_IGNORE verdicts in the metrics shown:%n%s", shown).isEqualTo(2);
    assertThat(shown).as("explain of o-1").contains("entity order/o-1: state paid", "ledger: 2 row(s)");
  }

  private static String tryItBlock() throws IOException {
    String readme = Files.readString(ROOT.resolve("README.md"), StandardCharsets.UTF_8);
    Matcher m = BLOCK.matcher(readme);
    assertThat(m.find()).as("README.md has a ```sh block between <!-- try-it:begin --> and <!-- try-it:end -->").isTrue();
    return m.group(1);
  }

  private static String entityAndEvent(String jsonLine) {
    Matcher m = DELIVERY.matcher(jsonLine);
    assertThat(m.find()).as("a delivery line with entity_id and event: %s", jsonLine).isTrue();
    return m.group(1) != null ? m.group(1) + " " + m.group(2) : m.group(4) + " " + m.group(3);
  }

  private static long duplicatesCounted(String shown) {
    Matcher m = Pattern.compile("onceguard_verdicts_total\\{disposition=\"DUPLICATE_IGNORE\"[^}]*} (\\d+)\\.0").matcher(shown);
    long sum = 0;
    while (m.find()) {
      sum += Long.parseLong(m.group(1));
    }
    return sum;
  }

  private static void clearQuickstartState() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport()) {
      for (String topic : List.of("quickstart.orders", "quickstart.orders.escalate")) {
        if (kafka.topicExists(topic)) {
          kafka.deleteTopic(topic);
        }
      }
    }
    String url = "jdbc:mariadb://" + ItEnv.mysqlHost() + ":" + ItEnv.mysqlPort() + "/";
    try (Connection c = DriverManager.getConnection(url, ItEnv.mysqlUser(), ItEnv.mysqlPassword());
        Statement s = c.createStatement()) {
      s.execute("DROP DATABASE IF EXISTS onceguard_quickstart");
    }
    ItEnv.deleteRedisKeys("og-quickstart:");
    Path dir = ROOT.resolve(".stack/quickstart");
    if (Files.exists(dir)) {
      try (Stream<Path> files = Files.walk(dir)) {
        for (Path p : files.sorted(Comparator.reverseOrder()).collect(Collectors.toList())) {
          Files.delete(p);
        }
      }
    }
  }
}
