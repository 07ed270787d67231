package dev.onceguard.demo;

import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One record of the story: what is produced, what it means, and which verdicts each route reading
 * its topic may give it ({@link Reason#NONE} stands for {@code ACCEPTED}). After it is sent, its
 * coordinates; as verdicts arrive, one {@link Decision} per route. Confined to the driver's thread.
 */
final class Input {
  /** A verdict from the verdict topic and when it was published (ms since the epoch). */
  record Decision(Verdict verdict, long atMillis) {}

  final String label;
  final String note;
  final String topic;
  /** Explicit partition, or null to let the key decide. */
  final Integer partition;
  final String key;
  final byte[] value;
  private final Map<String, Set<Reason>> expected = new LinkedHashMap<>();

  int sentPartition = -1;
  long sentOffset = -1;
  long sentAtMillis;
  final Map<String, Decision> decisions = new LinkedHashMap<>();

  Input(String label, String note, String topic, Integer partition, String key, byte[] value) {
    this.label = label;
    this.note = note;
    this.topic = topic;
    this.partition = partition;
    this.key = key;
    this.value = value;
  }

  /** Expect one of {@code reasons} on every route of the topic. */
  Input expect(List<String> routes, Reason... reasons) {
    for (String r : routes) {
      expected.put(r, EnumSet.of(reasons[0], reasons));
    }
    return this;
  }

  /** Expect one of {@code reasons} on one route. */
  Input expectOn(String route, Reason... reasons) {
    expected.put(route, EnumSet.of(reasons[0], reasons));
    return this;
  }

  Set<String> routes() {
    return expected.keySet();
  }

  Set<Reason> expected(String route) {
    return expected.get(route);
  }

  boolean decided() {
    return decisions.keySet().containsAll(expected.keySet());
  }

  boolean accepted(String route) {
    Decision d = decisions.get(route);
    return d != null && d.verdict().getDisposition() == Disposition.ACCEPTED;
  }

  /** The verdict's reason, with ACCEPTED as {@link Reason#NONE}. */
  static Reason reasonOf(Verdict v) {
    return v.getDisposition() == Disposition.ACCEPTED ? Reason.NONE : v.getReason();
  }
}
