package dev.onceguard.proxy.ops;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.proxy.guard.ClaimPreview;
import dev.onceguard.wire.Headers;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * What {@code redrive} does with each selected escalation, decided before anything is sent: the
 * guard's answer to the record if it came back now ({@link ClaimPreview}), and whether to send it.
 * A record redriven {@code max-redrives} times already is refused (it keeps coming back: redriving
 * it again fixes nothing); a record that could only come back as a duplicate is skipped unless
 * forced (the business would not see it, and it would only add a verdict). Every record sent
 * carries {@link Headers#REDRIVE_COUNT}, one more than its escalation said. Not thread-safe.
 */
final class RedrivePlan {
  private static final ObjectMapper JSON = new ObjectMapper();

  enum Action {
    SEND,
    SKIP_DUPLICATE,
    REFUSED_MAX_REDRIVES
  }

  /**
   * One selected escalation. {@code expect} is the {@link ClaimPreview.Outcome} name, or
   * {@code null} when the preview was not asked for ({@code --force} without {@code --dry-run}).
   */
  record Entry(String escalation, String original, String reason, String group, int redrives, String expect, String expectReason,
      String detail, boolean redelivery, Action action) {

    String json() {
      try {
        return JSON.writeValueAsString(this);
      } catch (JsonProcessingException e) {
        throw new IllegalStateException(e);
      }
    }

    String text() {
      String why = switch (action) {
        case SEND -> "";
        case SKIP_DUPLICATE -> "; skipped: it would only be a duplicate (--force sends it)";
        case REFUSED_MAX_REDRIVES -> "; refused: redriven " + redrives + " time(s) already";
      };
      String outcome = expect == null ? "" : " expect " + expect + ("NONE".equals(expectReason) ? "" : "/" + expectReason)
          + (redelivery ? " flagged redelivery" : "") + ": " + detail;
      return String.format(Locale.ROOT, "[group %s, redriven %d time(s) before]%s%s", group, redrives, outcome, why);
    }
  }

  private final ClaimPreview preview;
  private final int maxRedrives;
  private final boolean force;
  private final List<Entry> entries = new ArrayList<>();

  /** {@code preview} may be {@code null} only with {@code force} (nothing to check). */
  RedrivePlan(ClaimPreview preview, int maxRedrives, boolean force) {
    this.preview = preview;
    this.maxRedrives = maxRedrives;
    this.force = force;
  }

  /** Decides for the escalation {@code rec}, whose record to produce again is {@code again}. */
  Entry decide(ConsumerRecord<byte[], byte[]> rec, ProducerRecord<byte[], byte[]> again, String group, long nowMillis) {
    int redrives = redrives(rec);
    ClaimPreview.Preview p = preview == null ? null : preview.preview(again.topic(), again.key(), again.value(), again.headers(), nowMillis);
    Action action = redrives >= maxRedrives ? Action.REFUSED_MAX_REDRIVES
        : !force && p != null && p.outcome() == ClaimPreview.Outcome.DUPLICATE ? Action.SKIP_DUPLICATE : Action.SEND;
    Entry e = new Entry(rec.topic() + "/" + rec.partition() + "@" + rec.offset(), AdminCommands.header(rec, Headers.ORIGINAL_TOPIC) + "/"
        + AdminCommands.header(rec, Headers.ORIGINAL_PARTITION) + "@" + AdminCommands.header(rec, Headers.ORIGINAL_OFFSET),
        AdminCommands.header(rec, Headers.REASON), group, redrives, p == null ? null : p.outcome().name(),
        p == null ? null : p.reason().name(), p == null ? null : p.detail(), p != null && p.redelivery(), action);
    entries.add(e);
    return e;
  }

  /** How many times the escalated record was redriven before (0 when it never was, or the header is unreadable). */
  static int redrives(ConsumerRecord<byte[], byte[]> rec) {
    String v = AdminCommands.header(rec, Headers.REDRIVE_COUNT);
    try {
      return v == null ? 0 : Math.max(0, Integer.parseInt(v.trim()));
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  /** {@code again} with the redrive count set to {@code redrives + 1}. */
  static ProducerRecord<byte[], byte[]> counted(ProducerRecord<byte[], byte[]> again, int redrives) {
    List<Header> hs = new ArrayList<>();
    for (Header h : again.headers()) {
      if (!h.key().equals(Headers.REDRIVE_COUNT)) {
        hs.add(h);
      }
    }
    hs.add(new RecordHeader(Headers.REDRIVE_COUNT, Integer.toString(redrives + 1).getBytes(StandardCharsets.UTF_8)));
    return new ProducerRecord<>(again.topic(), again.partition(), again.key(), again.value(), hs);
  }

  List<Entry> entries() {
    return entries;
  }

  /** Counts per expected outcome and per action, one line each. */
  String summary() {
    Map<String, Long> expected = new TreeMap<>();
    Map<Action, Long> actions = new TreeMap<>();
    for (Entry e : entries) {
      if (e.expect() != null) {
        expected.merge(e.expect(), 1L, Long::sum);
      }
      actions.merge(e.action(), 1L, Long::sum);
    }
    StringBuilder sb = new StringBuilder();
    if (!expected.isEmpty()) {
      sb.append("expected outcome: ").append(expected).append('\n');
    }
    sb.append(String.format(Locale.ROOT, "to send %d, skipped as duplicates %d (--force sends them), refused after %d redrive(s) %d%n",
        actions.getOrDefault(Action.SEND, 0L), actions.getOrDefault(Action.SKIP_DUPLICATE, 0L), maxRedrives,
        actions.getOrDefault(Action.REFUSED_MAX_REDRIVES, 0L)));
    return sb.toString();
  }
}
