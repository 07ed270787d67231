package dev.onceguard.proxy.extract;

import com.fasterxml.jackson.databind.JsonNode;
import dev.onceguard.v1.FieldDifference;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The content a fingerprint covers, field by field: each leaf of the value (JSON pointer to its
 * canonical JSON text) or each configured fingerprint field. Kept with the ledger row as a
 * per-field digest map, so that a record whose content differs from the applied fact under the
 * same key (KEY_COLLISION) or on the same transition (CONFLICTING_FACT) can be told which fields
 * differ, without the ledger keeping any of the content.
 *
 * <p><b>Stored form</b> ({@link #encode}): one byte format ({@value #FORMAT}), one byte flags (1:
 * more fields than {@value #MAX_FIELDS}, the rest not kept), then per field in pointer order a
 * 2-byte big-endian length, the pointer's UTF-8 bytes and the first {@value #DIGEST_BYTES} bytes of
 * SHA-256 over the field's canonical text: {@code 2 + 10 + len(pointer)} bytes per field. A
 * pointer longer than {@value #MAX_POINTER_BYTES} bytes is cut there (the field still compares,
 * under the cut name). A digest is a plain hash: a value with few possible contents (a flag, a
 * small number) can be guessed by hashing candidates, as anyone with read access to the ledger
 * could also read the source topic.
 *
 * <p>Immutable; built by {@link Extractor}, decoded from the ledger by the guard.
 */
public final class FieldDigests {
  static final int FORMAT = 1;
  /** Fields kept per row at most: bounds the row and the work per record. */
  public static final int MAX_FIELDS = 64;
  public static final int DIGEST_BYTES = 8;
  static final int MAX_POINTER_BYTES = 255;
  /** Differences a verdict names at most. */
  public static final int MAX_DIFFERENCES = 20;
  /** Characters of a value a difference shows at most. */
  public static final int MAX_VALUE_CHARS = 64;

  /** No content kept (store-payload: none, a value that is not a JSON object or array). */
  public static final FieldDigests NONE = new FieldDigests(Map.of(), false);

  /** Pointer to the field's canonical text, in pointer order. */
  private final Map<String, String> fields;
  private final boolean truncated;

  private FieldDigests(Map<String, String> fields, boolean truncated) {
    this.fields = fields;
    this.truncated = truncated;
  }

  /** The leaves of {@code content} (a JSON object or array, excluded fields already removed). */
  static FieldDigests ofLeaves(JsonNode content) {
    if (content == null || !content.isContainerNode()) {
      return NONE;
    }
    TreeMap<String, String> out = new TreeMap<>();
    boolean[] cut = {false};
    leaves(content, "", out, cut);
    return new FieldDigests(out, cut[0]);
  }

  /** Named fields (a route's {@code fingerprint} list): name to canonical text, {@code null} when absent. */
  static FieldDigests ofFields(Map<String, String> named) {
    TreeMap<String, String> out = new TreeMap<>();
    boolean cut = false;
    for (Map.Entry<String, String> e : named.entrySet()) {
      if (e.getValue() == null) {
        continue;
      }
      if (out.size() == MAX_FIELDS) {
        cut = true;
        break;
      }
      out.put(e.getKey(), e.getValue());
    }
    return new FieldDigests(out, cut);
  }

  private static void leaves(JsonNode n, String at, TreeMap<String, String> out, boolean[] cut) {
    if (n.isObject()) {
      for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        leaves(e.getValue(), at + "/" + e.getKey().replace("~", "~0").replace("/", "~1"), out, cut);
      }
    } else if (n.isArray()) {
      for (int i = 0; i < n.size(); i++) {
        leaves(n.get(i), at + "/" + i, out, cut);
      }
    } else if (out.size() < MAX_FIELDS) {
      out.put(at, n.toString());
    } else {
      cut[0] = true;
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof FieldDigests f && f.truncated == truncated && f.fields.equals(fields);
  }

  @Override
  public int hashCode() {
    return fields.hashCode() * 31 + Boolean.hashCode(truncated);
  }

  @Override
  public String toString() {
    return "FieldDigests" + fields.keySet() + (truncated ? "+" : "");
  }

  public boolean isEmpty() {
    return fields.isEmpty();
  }

  /** The stored form; {@code null} when there is nothing to keep. */
  public byte[] encode() {
    if (fields.isEmpty()) {
      return null;
    }
    ByteArrayOutputStream b = new ByteArrayOutputStream(2 + fields.size() * (12 + 16));
    b.write(FORMAT);
    b.write(truncated ? 1 : 0);
    for (Map.Entry<String, String> e : fields.entrySet()) {
      byte[] p = pointerBytes(e.getKey());
      b.write(p.length >>> 8);
      b.write(p.length & 0xff);
      b.write(p, 0, p.length);
      b.write(digest(e.getValue()), 0, DIGEST_BYTES);
    }
    return b.toByteArray();
  }

  /**
   * A stored map read back: pointer to lower-case hex digest, in pointer order; empty for
   * {@code null}, and for a form this version does not know (never an error: forensics only).
   */
  public static Stored decode(byte[] stored) {
    Map<String, String> out = new LinkedHashMap<>();
    if (stored == null || stored.length < 2 || stored[0] != FORMAT) {
      return new Stored(out, false);
    }
    ByteBuffer b = ByteBuffer.wrap(stored, 2, stored.length - 2);
    HexFormat hex = HexFormat.of();
    while (b.remaining() >= 2) {
      int len = b.getShort() & 0xffff;
      if (b.remaining() < len + DIGEST_BYTES) {
        break;
      }
      byte[] p = new byte[len];
      b.get(p);
      byte[] d = new byte[DIGEST_BYTES];
      b.get(d);
      out.put(new String(p, StandardCharsets.UTF_8), hex.formatHex(d));
    }
    return new Stored(out, (stored[1] & 1) != 0);
  }

  /** A decoded digest map; {@code truncated}: the record had more fields than were kept. */
  public record Stored(Map<String, String> digests, boolean truncated) {}

  /** The fields in which this record differs from the applied fact's stored map, at most {@value #MAX_DIFFERENCES}. */
  public Differences differencesFrom(byte[] applied) {
    Stored theirs = decode(applied);
    if (fields.isEmpty() || theirs.digests().isEmpty()) {
      return Differences.NONE;
    }
    Map<String, String> mine = new TreeMap<>();
    for (Map.Entry<String, String> e : fields.entrySet()) {
      mine.put(new String(pointerBytes(e.getKey()), StandardCharsets.UTF_8), e.getKey());
    }
    TreeSet<String> all = new TreeSet<>(mine.keySet());
    all.addAll(theirs.digests().keySet());
    List<FieldDifference> out = new ArrayList<>();
    boolean more = truncated || theirs.truncated();
    HexFormat hex = HexFormat.of();
    for (String p : all) {
      String ours = mine.get(p);
      String stored = theirs.digests().get(p);
      FieldDifference.Change change;
      if (ours != null && stored != null) {
        if (hex.formatHex(Arrays.copyOf(digest(fields.get(ours)), DIGEST_BYTES)).equals(stored)) {
          continue;
        }
        change = FieldDifference.Change.CHANGED;
      } else {
        change = ours != null ? FieldDifference.Change.ADDED : FieldDifference.Change.REMOVED;
      }
      if (out.size() == MAX_DIFFERENCES) {
        more = true;
        break;
      }
      FieldDifference.Builder d = FieldDifference.newBuilder().setPointer(p).setChange(change);
      if (ours != null) {
        d.setValue(cut(fields.get(ours)));
      }
      out.add(d.build());
    }
    return new Differences(List.copyOf(out), more);
  }

  /** What {@link #differencesFrom} found; {@code truncated}: more differ (or may) than are listed. */
  public record Differences(List<FieldDifference> fields, boolean truncated) {
    public static final Differences NONE = new Differences(List.of(), false);
  }

  private static String cut(String v) {
    return v.codePointCount(0, v.length()) > MAX_VALUE_CHARS ? v.substring(0, v.offsetByCodePoints(0, MAX_VALUE_CHARS)) + "…" : v;
  }

  private static byte[] pointerBytes(String pointer) {
    byte[] p = pointer.getBytes(StandardCharsets.UTF_8);
    if (p.length <= MAX_POINTER_BYTES) {
      return p;
    }
    // cut on a character boundary, so that the stored name decodes as it was written
    int end = MAX_POINTER_BYTES;
    while (end > 0 && (p[end] & 0xc0) == 0x80) {
      end--;
    }
    return Arrays.copyOf(p, end);
  }

  private static byte[] digest(String canonical) {
    return Sha256.of(canonical.getBytes(StandardCharsets.UTF_8));
  }
}
