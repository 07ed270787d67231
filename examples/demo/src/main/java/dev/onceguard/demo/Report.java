package dev.onceguard.demo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Prints the story: one table line per record and route (input, verdict, what the business
 * received), checks each line against what the story expects, and sums up per layer. Problems are
 * collected, marked on their line, and listed at the end. Confined to the driver's thread.
 */
final class Report {
  private static final String ROW = "%-3s %-25s %-16s %-27s %-33s %6s  %-26s %s";
  private static final ObjectMapper JSON = new ObjectMapper();

  private final PrintStream out;
  private final DemoLayout layout;
  private final Path businessLog;
  private final List<String> problems = new ArrayList<>();
  private int row;
  private boolean headerPending;

  Report(PrintStream out, DemoLayout layout, Path businessLog) {
    this.out = out;
    this.layout = layout;
    this.businessLog = businessLog;
  }

  void scene(String title, String... narrative) {
    out.println();
    out.println("== " + title + " " + "=".repeat(Math.max(3, 100 - title.length())));
    for (String line : narrative) {
      out.println("   " + line);
    }
    headerPending = true;
  }

  private void line(Object... columns) {
    out.println(String.format(Locale.ROOT, ROW, columns).stripTrailing());
  }

  void say(String text) {
    out.println("   " + text);
  }

  /** One line per record and route, in the given order; checks each against the story. */
  void rows(List<Input> inputs) {
    if (headerPending) {
      line("#", "input", "route", "verdict", "decided by / reason", "after", "business received", "note");
      headerPending = false;
    }
    Map<String, List<JsonNode>> business = businessLines();
    for (Input in : inputs) {
      row++;
      boolean first = true;
      for (String route : in.routes()) {
        Input.Decision d = in.decisions.get(route);
        Verdict v = d.verdict();
        Reason got = Input.reasonOf(v);
        List<JsonNode> calls = business.getOrDefault(key(route, layout.topic(in.topic), in.sentPartition, in.sentOffset), List.of());
        String mark = "";
        if (!in.expected(route).contains(got)) {
          mark = "  <-- UNEXPECTED, expected " + names(in.expected(route));
          problem("'" + in.label + "' on route " + route + ": got " + describe(v) + ", expected " + names(in.expected(route)));
        }
        String businessProblem = checkBusiness(v, calls);
        if (businessProblem != null) {
          mark += "  <-- " + businessProblem;
          problem("'" + in.label + "' on route " + route + ": " + businessProblem);
        }
        boolean accepted = v.getDisposition() == Disposition.ACCEPTED;
        line(first ? row : "", first ? in.label : "", route, v.getDisposition().name(),
            accepted ? "-" : v.getLayer().name() + " / " + v.getReason().name(),
            String.format(Locale.ROOT, "%.1fs", Math.max(0, d.atMillis() - in.sentAtMillis) / 1000.0),
            businessText(calls), (first ? in.note : "") + mark);
        first = false;
      }
    }
  }

  /** Exactly one of {@code inputs} is accepted on {@code route}. */
  void expectExactlyOneAccepted(String route, Input... inputs) {
    long n = java.util.Arrays.stream(inputs).filter(i -> i.accepted(route)).count();
    if (n != 1) {
      problem(n + " of " + java.util.Arrays.stream(inputs).map(i -> "'" + i.label + "'").collect(Collectors.joining(" and "))
          + " were accepted on route " + route + "; exactly one must be");
    }
  }

  void problem(String p) {
    problems.add(p);
  }

  List<String> problems() {
    return problems;
  }

  /** ACCEPTED: the business got it once and said OK; BUSINESS_REJECTED: once, REJECT; else never. */
  private static String checkBusiness(Verdict v, List<JsonNode> calls) {
    long ok = calls.stream().filter(c -> "OK".equals(c.path("outcome").asText())).count();
    long rejected = calls.stream().filter(c -> "REJECT".equals(c.path("outcome").asText())).count();
    if (v.getDisposition() == Disposition.ACCEPTED) {
      return ok == 1 && calls.size() == 1 ? null : "accepted, but the business got it " + calls.size() + " time(s) (" + ok + " OK)";
    }
    if (v.getReason() == Reason.BUSINESS_REJECTED) {
      return rejected >= 1 && ok == 0 ? null : "rejected by the business, but its log shows " + calls.size() + " call(s), " + ok + " OK";
    }
    return calls.isEmpty() ? null : "not accepted, yet the business got it " + calls.size() + " time(s)";
  }

  private static String businessText(List<JsonNode> calls) {
    if (calls.isEmpty()) {
      return "-";
    }
    JsonNode last = calls.get(calls.size() - 1);
    String outcome = last.path("outcome").asText();
    String from = last.path("from_state").asText();
    String to = last.path("to_state").asText();
    String what = to.isEmpty() ? "yes" : "yes: " + (from.isEmpty() ? "new" : from) + " -> " + to;
    if (!"OK".equals(outcome)) {
      what = "yes, answered " + outcome;
    }
    return calls.size() == 1 ? what : what + " (" + calls.size() + " calls!)";
  }

  private Map<String, List<JsonNode>> businessLines() {
    Map<String, List<JsonNode>> out = new HashMap<>();
    if (!Files.exists(businessLog)) {
      return out;
    }
    try {
      for (String l : Files.readAllLines(businessLog, StandardCharsets.UTF_8)) {
        if (l.isBlank()) {
          continue;
        }
        JsonNode n = JSON.readTree(l);
        out.computeIfAbsent(key(n.path("route").asText(), n.path("topic").asText(), n.path("partition").asInt(), n.path("offset").asLong()),
            k -> new ArrayList<>()).add(n);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the business log " + businessLog, e);
    }
    return out;
  }

  private static String key(String route, String topic, int partition, long offset) {
    return route + "|" + topic + "|" + partition + "|" + offset;
  }

  private static String describe(Verdict v) {
    return v.getDisposition() == Disposition.ACCEPTED ? "ACCEPTED" : v.getDisposition() + " " + v.getLayer() + "/" + v.getReason()
        + " (" + v.getDetail() + ")";
  }

  private static String names(Set<Reason> reasons) {
    return reasons.stream().map(r -> r == Reason.NONE ? "ACCEPTED" : r.name()).collect(Collectors.joining(" or "));
  }

  /**
   * Totals per deciding layer, the business's side of it, and the escalation topic checked
   * against the verdicts.
   */
  void summary(Driver driver, List<ConsumerRecord<byte[], byte[]>> escalations) {
    List<Input> inputs = driver.sent();
    int verdicts = 0;
    int accepted = 0;
    int escalated = 0;
    Map<Layer, Map<Reason, Integer>> byLayer = new EnumMap<>(Layer.class);
    for (Layer l : List.of(Layer.EXTRACT, Layer.CACHE, Layer.LEDGER, Layer.STATE_MACHINE, Layer.BUSINESS)) {
      byLayer.put(l, new TreeMap<>());
    }
    for (Input in : inputs) {
      for (Map.Entry<String, Input.Decision> e : in.decisions.entrySet()) {
        Verdict v = e.getValue().verdict();
        verdicts++;
        if (v.getDisposition() == Disposition.ACCEPTED) {
          accepted++;
          continue;
        }
        if (v.getDisposition() == Disposition.ILLEGAL_TRANSITION_ESCALATE) {
          escalated++;
          List<ConsumerRecord<byte[], byte[]>> es = driver.escalationsOf(escalations, in, e.getKey());
          if (es.size() != 1) {
            problem("'" + in.label + "' (route " + e.getKey() + ") was escalated " + es.size() + " time(s) on " + layout.escalationTopic());
          } else if (!v.getReason().name().equals(Driver.header(es.get(0), Headers.REASON))
              || !v.getLayer().name().equals(Driver.header(es.get(0), Headers.LAYER))) {
            problem("escalation of '" + in.label + "' carries " + Driver.header(es.get(0), Headers.LAYER) + "/"
                + Driver.header(es.get(0), Headers.REASON) + " but the verdict says " + v.getLayer() + "/" + v.getReason());
          }
        }
        byLayer.computeIfAbsent(v.getLayer(), l -> new TreeMap<>()).merge(v.getReason(), 1, Integer::sum);
      }
    }
    if (escalations.size() != escalated) {
      problem(layout.escalationTopic() + " holds " + escalations.size() + " record(s), but " + escalated + " verdict(s) said ESCALATE");
    }
    List<JsonNode> calls = businessLines().values().stream().flatMap(List::stream).toList();
    long ok = calls.stream().filter(c -> "OK".equals(c.path("outcome").asText())).count();
    long rejectedCalls = calls.stream().filter(c -> "REJECT".equals(c.path("outcome").asText())).count();
    long redeliveries = calls.stream().filter(c -> c.path("redelivery").asBoolean()).count();
    if (ok != accepted) {
      problem("the business answered OK " + ok + " time(s) but " + accepted + " record(s) were accepted");
    }

    out.println();
    out.println("== Summary " + "=".repeat(92));
    out.printf("   %d records produced, %d verdicts (each shipments record is judged by two routes)%n", inputs.size(), verdicts);
    out.printf("   %-15s %3d   forwarded to the business and confirmed%n", "ACCEPTED", accepted);
    out.println("   not accepted, by the layer that decided:");
    byLayer.forEach((layer, reasons) -> {
      int n = reasons.values().stream().mapToInt(Integer::intValue).sum();
      String detail = reasons.entrySet().stream().map(e -> e.getKey().name() + " " + e.getValue()).collect(Collectors.joining(", "));
      out.printf("     %-13s %3d   %s%n", layer.name(), n, n == 0 ? "" : detail);
    });
    out.printf("   business container: %d call(s): %d answered OK, %d answered REJECT, %d flagged as redelivery%n",
        calls.size(), ok, rejectedCalls, redeliveries);
    out.printf("   escalation topic %s: %d record(s), each the original record plus onceguard-* headers%n",
        layout.escalationTopic(), escalations.size());
    for (ConsumerRecord<byte[], byte[]> e : escalations) {
      String applied = Driver.header(e, Headers.APPLIED_BUSINESS_KEY);
      out.printf("     %-19s %-14s route=%-16s entity=%-15s %s=%s%s%n", Driver.header(e, Headers.REASON), Driver.header(e, Headers.LAYER),
          Driver.header(e, Headers.ROUTE), nz(Driver.header(e, Headers.ENTITY_ID)),
          Headers.CURRENT_STATE, nz(Driver.header(e, Headers.CURRENT_STATE)),
          applied == null ? "" : " " + Headers.APPLIED_BUSINESS_KEY + "=" + applied);
    }
    for (String s : driver.strays()) {
      problem(s);
    }
  }

  private static String nz(String s) {
    return s == null ? "-" : s;
  }
}
