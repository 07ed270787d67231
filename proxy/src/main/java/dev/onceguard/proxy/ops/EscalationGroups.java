package dev.onceguard.proxy.ops;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Escalations grouped by what went wrong, as dead-letter tools group them: the reason and the
 * detail with its variable parts (record coordinates, keys and digests, ids, numbers) replaced by
 * placeholders. One fix usually clears one group, so {@code redrive --group ID} sends one group.
 * The id is the first 8 hex digits of SHA-256 over reason and normalised detail: stable across
 * runs and machines. Not thread-safe.
 */
final class EscalationGroups {
  private static final Pattern COORDINATES = Pattern.compile("[\\w.\\-]+/-?\\d+@-?\\d+");
  private static final Pattern UUID = Pattern.compile("\\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\\b");
  private static final Pattern HEX = Pattern.compile("\\b[0-9a-f]{16,}\\b");
  private static final Pattern NUMBER = Pattern.compile("\\d+");

  /** One group; {@code pattern} is the normalised detail. */
  record Group(String id, String reason, String pattern, long count, long firstMs, long lastMs) {
    String line() {
      return String.format(Locale.ROOT, "group %s: %d x %s, %s .. %s: %s", id, count, reason, Instant.ofEpochMilli(firstMs),
          Instant.ofEpochMilli(lastMs), pattern);
    }
  }

  private final Map<String, Group> groups = new LinkedHashMap<>();

  /** The detail with its variable parts replaced: {@code <at>}, {@code <uuid>}, {@code <hex>}, {@code #}. */
  static String normalise(String detail) {
    if (detail == null) {
      return "";
    }
    String s = COORDINATES.matcher(detail).replaceAll("<at>");
    s = UUID.matcher(s).replaceAll("<uuid>");
    s = HEX.matcher(s).replaceAll("<hex>");
    return NUMBER.matcher(s).replaceAll("#");
  }

  static String id(String reason, String detail) {
    try {
      byte[] d = MessageDigest.getInstance("SHA-256").digest((reason + "\n" + normalise(detail)).getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(d, 0, 4);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required by the Java platform", e);
    }
  }

  /** Counts one escalation; returns its group id. */
  String add(String reason, String detail, long atMs) {
    String id = id(reason, detail);
    groups.merge(id, new Group(id, reason, normalise(detail), 1, atMs, atMs),
        (a, b) -> new Group(id, reason, a.pattern(), a.count() + 1, Math.min(a.firstMs(), atMs), Math.max(a.lastMs(), atMs)));
    return id;
  }

  /** The groups, the largest first. */
  List<Group> groups() {
    List<Group> out = new ArrayList<>(groups.values());
    out.sort(Comparator.comparingLong(Group::count).reversed().thenComparing(Group::id));
    return out;
  }
}
