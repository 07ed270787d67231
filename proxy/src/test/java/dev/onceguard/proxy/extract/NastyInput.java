package dev.onceguard.proxy.extract;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.Function;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Hostile records for the fuzz properties, built from a {@link Random} (jqwik hands a seeded one
 * to {@code Arbitraries.randomValue}). Every record here is one the route's reader must refuse:
 * {@link #bad} never yields a readable order record, so a property may demand an escalation.
 * {@link #odd} yields records that may or may not be readable (values of the wrong JSON type,
 * huge and repeated headers, a null key): a property may only demand that they end in a verdict.
 *
 * <p>The order record shape is {@code {"order_id": <id>, "event": <event>, ...}}, the layout of
 * the guard tests' reference route (entity {@code /order_id}, event {@code /event}).
 */
public final class NastyInput {
  private NastyInput() {}

  /** Depth of the deep-nesting case the issue names; Jackson refuses anything past 1,000. */
  public static final int DEEP = 10_000;

  /** One generated record; {@link #toString} names the kind and sizes, never the bytes. */
  public record Nasty(String kind, byte[] key, byte[] value, List<Header> headerList) {
    public Headers headers() {
      RecordHeaders h = new RecordHeaders();
      headerList.forEach(h::add);
      return h;
    }

    @Override
    public String toString() {
      return kind + " (key " + (key == null ? "null" : key.length + " B") + ", value " + (value == null ? "null" : value.length + " B")
          + ", " + headerList.size() + " headers)";
    }
  }

  /** A well-formed order record: {@code event} of order {@code id}. */
  public static byte[] order(String id, String event) {
    return ("{\"order_id\":\"" + id + "\",\"event\":\"" + event + "\",\"qty\":1}").getBytes(UTF_8);
  }

  private static Nasty value(String kind, byte[] value) {
    return new Nasty(kind, "k".getBytes(UTF_8), value, List.of());
  }

  private static final List<Function<Random, Nasty>> BAD = List.of(
      r -> value("random bytes", randomBytes(r, r.nextInt(2_000))),
      r -> value("random printable text", randomAscii(r, 1 + r.nextInt(500)).getBytes(UTF_8)),
      NastyInput::truncated,
      r -> value("nested " + DEEP + " deep, around the whole value", nested(DEEP, "{\"order_id\":\"o-1\",\"event\":\"create\"}")),
      r -> {
        int depth = 1_001 + r.nextInt(DEEP);
        return value("nested " + depth + " deep, in an extra field",
            ("{\"order_id\":\"o-1\",\"event\":\"create\",\"x\":" + new String(nested(depth, "1"), UTF_8) + "}").getBytes(UTF_8));
      },
      r -> value("nested " + DEEP + " deep, as the order id",
          ("{\"order_id\":" + new String(nested(DEEP, "\"o-1\""), UTF_8) + ",\"event\":\"create\"}").getBytes(UTF_8)),
      r -> value("huge order id", order("o".repeat(256 + r.nextInt(300_000)), "create")),
      r -> value("huge event name", order("o-1", "e".repeat(1 + r.nextInt(300_000)))),
      NastyInput::invalidUtf8,
      r -> value("lone surrogate escape in the order id",
          ("{\"order_id\":\"o-\\u" + Integer.toHexString(0xD800 + r.nextInt(0x800)) + "\",\"event\":\"create\"}").getBytes(UTF_8)),
      r -> value("event of the wrong type", ("{\"order_id\":\"o-1\",\"event\":" + wrongType(r) + "}").getBytes(UTF_8)),
      r -> value("null order id", "{\"order_id\":null,\"event\":\"create\"}".getBytes(UTF_8)),
      r -> value("blank order id", ("{\"order_id\":\"" + " \t".repeat(r.nextInt(4)) + "\",\"event\":\"create\"}").getBytes(UTF_8)),
      r -> value("duplicate JSON key", r.nextBoolean()
          ? "{\"order_id\":\"o-1\",\"order_id\":\"o-2\",\"event\":\"create\"}".getBytes(UTF_8)
          : "{\"order_id\":\"o-1\",\"event\":\"create\",\"event\":\"create\"}".getBytes(UTF_8)),
      r -> value("JSON that is not an object", ("[" + wrongType(r) + "]").getBytes(UTF_8)),
      r -> value("null value (tombstone)", null),
      r -> value("empty value", new byte[0]),
      r -> value("whitespace value", " \n\t ".getBytes(UTF_8)));

  private static final List<Function<Random, Nasty>> ODD = List.of(
      r -> value("order id of the wrong type", ("{\"order_id\":" + wrongType(r) + ",\"event\":\"create\"}").getBytes(UTF_8)),
      NastyInput::hugeHeaders,
      r -> new Nasty("null key", null, order("o-" + r.nextInt(1_000), "create"), List.of()),
      r -> value("huge string in an extra field",
          ("{\"order_id\":\"o-1\",\"event\":\"create\",\"note\":\"" + "n".repeat(r.nextInt(1_000_000)) + "\"}").getBytes(UTF_8)),
      r -> value("unicode order id", order("ø-" + new String(Character.toChars(0x1F600 + r.nextInt(50))), "create")));

  /** A record the order route must refuse (MALFORMED, MISSING_FIELD or UNKNOWN_EVENT). */
  public static Nasty bad(Random r) {
    return BAD.get(r.nextInt(BAD.size())).apply(r);
  }

  /** Any hostile record, readable or not. */
  public static Nasty any(Random r) {
    int i = r.nextInt(BAD.size() + ODD.size());
    return i < BAD.size() ? BAD.get(i).apply(r) : ODD.get(i - BAD.size()).apply(r);
  }

  /** {@link #bad} as a jqwik arbitrary (seeded by the property). */
  public static Arbitrary<Nasty> badRecords() {
    return Arbitraries.randomValue(NastyInput::bad);
  }

  /** {@link #any} as a jqwik arbitrary (seeded by the property). */
  public static Arbitrary<Nasty> anyRecords() {
    return Arbitraries.randomValue(NastyInput::any);
  }

  /** How many kinds {@link #bad} yields (for a test that wants each at least once). */
  public static int badKinds() {
    return BAD.size();
  }

  /** The {@code i}th kind of {@link #bad}. */
  public static Nasty bad(int i, Random r) {
    return BAD.get(i).apply(r);
  }

  static Nasty truncated(Random r) {
    byte[] whole = order("o-" + r.nextInt(100), "create");
    return value("truncated JSON", Arrays.copyOf(whole, r.nextInt(whole.length)));
  }

  /** A well-formed record with a broken UTF-8 sequence inside the order id string. */
  static Nasty invalidUtf8(Random r) {
    byte[][] broken = {
        {(byte) 0xFF},                          // never valid
        {(byte) 0xC3, 0x28},                    // bad continuation
        {(byte) 0xC0, (byte) 0xAD},             // overlong '-'
        {(byte) 0xE0, (byte) 0x80, (byte) 0xAD}, // overlong '-', 3 bytes
        {(byte) 0xED, (byte) 0xA0, (byte) 0x80}, // an encoded surrogate (CESU-8)
        {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80}, // past U+10FFFF
        {(byte) 0xE2, (byte) 0x82},             // cut short
        {(byte) 0x80},                          // lone continuation
    };
    byte[] bad = broken[r.nextInt(broken.length)];
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.writeBytes("{\"order_id\":\"o".getBytes(UTF_8));
    out.writeBytes(bad);
    out.writeBytes("1\",\"event\":\"create\"}".getBytes(UTF_8));
    return value("invalid UTF-8 " + hex(bad) + " in the order id", out.toByteArray());
  }

  static Nasty hugeHeaders(Random r) {
    List<Header> headers = new ArrayList<>();
    int n = 1 + r.nextInt(2_000);
    for (int i = 0; i < n; i++) {
      String name = r.nextBoolean() ? "event" : "h-" + r.nextInt(5);
      byte[] v = r.nextInt(10) == 0 ? null : randomBytes(r, r.nextInt(r.nextInt(20) == 0 ? 200_000 : 100));
      headers.add(new RecordHeader(name, v));
    }
    return new Nasty("huge and repeated headers", "k".getBytes(UTF_8), order("o-" + r.nextInt(1_000), "create"), headers);
  }

  /** {@code inner} inside {@code depth} levels of arrays and objects. */
  public static byte[] nested(int depth, String inner) {
    StringBuilder sb = new StringBuilder(depth * 8 + inner.length());
    for (int i = 0; i < depth; i++) {
      sb.append(i % 2 == 0 ? "[" : "{\"a\":");
    }
    sb.append(inner);
    for (int i = depth - 1; i >= 0; i--) {
      sb.append(i % 2 == 0 ? "]" : "}");
    }
    return sb.toString().getBytes(UTF_8);
  }

  private static String wrongType(Random r) {
    return switch (r.nextInt(7)) {
      case 0 -> Long.toString(r.nextLong());
      case 1 -> "1.10e" + r.nextInt(400);
      case 2 -> Boolean.toString(r.nextBoolean());
      case 3 -> "null";
      case 4 -> "[\"create\"]";
      case 5 -> "{\"name\":\"create\"}";
      default -> "[]";
    };
  }

  private static byte[] randomBytes(Random r, int n) {
    byte[] b = new byte[n];
    r.nextBytes(b);
    return b;
  }

  private static String randomAscii(Random r, int n) {
    StringBuilder sb = new StringBuilder(n);
    for (int i = 0; i < n; i++) {
      sb.append((char) (0x20 + r.nextInt(0x5F)));
    }
    return sb.toString();
  }

  private static String hex(byte[] b) {
    StringBuilder sb = new StringBuilder();
    for (byte x : b) {
      sb.append(String.format("%02X", x & 0xFF));
    }
    return sb.toString();
  }
}
