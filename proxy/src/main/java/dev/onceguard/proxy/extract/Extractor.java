package dev.onceguard.proxy.extract;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.onceguard.proxy.config.FieldSource;
import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.v1.Reason;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Reads entity id, event, business key and fingerprint from a record, as one route configures
 * them. Immutable and thread-safe; the value is parsed at most once per call.
 *
 * <p><b>Dedup key.</b> SHA-256 over the canonical business key: for a route with a machine the
 * event name comes first (so that two events of one entity never share a key even if the
 * configured fields omit the event), then every configured field in order, each as
 * {@code len(name) name len(value) value} with 4-byte big-endian lengths of the UTF-8 bytes. The
 * length prefixes make the encoding unambiguous ({@code ("ab","c")} differs from {@code ("a","bc")}).
 * A JSON string contributes its text, a number or boolean its JSON text, an object or array its
 * canonical JSON (keys sorted). A missing or JSON-null field is {@link Reason#MISSING_FIELD}, never
 * an empty value: two records that both lack a field must not look like duplicates.
 *
 * <p><b>Entity id.</b> One or more fields ({@code entity-id}); the id is one canonical string used as
 * the ordering key, {@code og_entity.entity_id}, in verdicts, deliveries and escalation headers. One
 * field gives its plain value. Several give {@link #canonicalEntityId(List)}: the values joined by
 * {@code |}, each with {@code \} and {@code |} escaped by a backslash, so {@code ("a|b","c")} and
 * {@code ("a","b|c")} stay apart. An id longer than 255 characters does not fit the entity table:
 * {@link Reason#MALFORMED}. So is an id that ends with a space (U+0020): {@code og_entity.entity_id}
 * compares with a PAD SPACE collation, under which {@code "o-1 "} and {@code "o-1"} are one row,
 * while the pipeline orders them as two entities and could run them side by side. Other trailing
 * whitespace (a tab, a newline) is not padded and stays a distinct id.
 *
 * <p><b>Blank is missing.</b> An entity-id or business-key field that is empty or whitespace only
 * is {@link Reason#MISSING_FIELD}, like an absent one: an empty {@code order_id} names no order, and
 * two such records must not become one entity {@code ''} or one dedup key.
 *
 * <p><b>One reading only.</b> JSON read for fields must be strict UTF-8 without duplicate object
 * keys, a header read for a field must appear once, and a field may not hold an unpaired surrogate
 * escape; otherwise the record is {@link Reason#MALFORMED}. Each of these has more than one reading
 * (a lenient decoder, a first-wins parser, {@code lastHeader} against the first header, a {@code ?}
 * for the surrogate), so the business could apply another order than the one deduplicated, or two
 * byte strings could share one key. Headers no field reads may repeat.
 *
 * <p><b>Fingerprint.</b> With {@code fingerprint} fields configured: their canonical encoding (a
 * missing one is recorded as absent). Otherwise the whole value: JSON objects canonicalised with
 * the {@code fingerprint-exclude} pointers removed, anything else byte for byte. Headers and the
 * Kafka metadata never count: a re-send with a new message id must fingerprint the same once the
 * message id is excluded.
 *
 * <p><b>Kept content.</b> Unless the route says {@code store-payload: none}, the fingerprinted
 * content is also read field by field ({@link FieldDigests}: each leaf of the value, or each
 * configured fingerprint field), for the ledger row's digest map; with {@code store-payload: full}
 * the value itself rides along, up to {@code store-payload-max-bytes}.
 */
public final class Extractor {
  /**
   * Decimals as BigDecimal: {@code 1.10} must not collapse to {@code 1.1} in a key or fingerprint.
   * A duplicate object key is an error: parsers disagree on which copy counts (Jackson keeps the
   * last, others the first), so the business could apply another order than the one deduplicated.
   */
  private static final ObjectMapper JSON = JsonMapper.builder()
      .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
      .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .nodeFactory(com.fasterxml.jackson.databind.node.JsonNodeFactory.withExactBigDecimals(true))
      .build();
  private static final ObjectMapper CANONICAL =
      JsonMapper.builder().enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS).build();

  /** {@code og_entity.entity_id} is a VARCHAR(255) of utf8mb4: characters are code points. */
  public static final int MAX_ENTITY_ID_CHARS = 255;

  private final RouteConfig route;
  private final MachineConfig machine;
  private final boolean needsValue;
  private final boolean needsKeyJson;
  /** The route keeps per-field digests (store-payload digest or full). */
  private final boolean keepsDigests;
  /** The route keeps the value itself (store-payload full). */
  private final boolean keepsPayload;

  /** {@code machine} is {@code null} for a route without one. */
  public Extractor(RouteConfig route, MachineConfig machine) {
    this.route = route;
    this.machine = machine;
    List<FieldSource> all = new ArrayList<>(route.extraction().businessKey());
    all.addAll(route.extraction().fingerprint());
    all.addAll(route.extraction().entityId());
    if (route.extraction().event() != null) {
      all.add(route.extraction().event());
    }
    this.needsValue = all.stream().anyMatch(f -> f instanceof FieldSource.ValuePointer);
    this.needsKeyJson = all.stream().anyMatch(f -> f instanceof FieldSource.Key k && !k.pointer().isEmpty());
    RouteConfig.StorePayload kept = route.ledgerContent().storePayload();
    this.keepsDigests = kept != RouteConfig.StorePayload.NONE;
    this.keepsPayload = kept == RouteConfig.StorePayload.FULL;
  }

  /**
   * The canonical entity id alone, cheaply, for ordering: the same string {@link #extract} gives;
   * {@code null} without a machine or if a field is absent, blank or unreadable.
   */
  public String entityIdOrNull(byte[] key, byte[] value, Headers headers) {
    if (route.extraction().entityId().isEmpty()) {
      return null;
    }
    try {
      List<String> values = new ArrayList<>();
      return readKeyFields(new Parsed(key, value, headers), route.extraction().entityId(), values) == null ? canonicalEntityId(values) : null;
    } catch (RuntimeException | IOException e) {
      return null;
    }
  }

  /**
   * The canonical entity id of the entity-id field values, in configured order: one value as it
   * is; several joined by {@code |} with {@code \} and {@code |} in each value escaped by a
   * backslash ({@code o-1|sku-1|w-1}). Unambiguous for a given number of fields, which all routes
   * of one machine share (checked by the configuration).
   */
  public static String canonicalEntityId(List<String> values) {
    if (values.size() == 1) {
      return values.get(0);
    }
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < values.size(); i++) {
      if (i > 0) {
        sb.append('|');
      }
      String v = values.get(i);
      for (int j = 0; j < v.length(); j++) {
        char c = v.charAt(j);
        if (c == '\\' || c == '|') {
          sb.append('\\');
        }
        sb.append(c);
      }
    }
    return sb.toString();
  }

  public Extraction extract(byte[] key, byte[] value, Headers headers) {
    Parsed p;
    try {
      p = new Parsed(key, value, headers);
    } catch (IOException e) {
      return new Extraction.Failed(Reason.MALFORMED, e.getMessage(), null, null);
    }
    String entityId = null;
    String event = null;
    try {
      if (!route.extraction().entityId().isEmpty()) {
        List<String> values = new ArrayList<>();
        FieldSource absent = readKeyFields(p, route.extraction().entityId(), values);
        if (absent != null) {
          return missingKeyField(absent, values, null, null);
        }
        entityId = canonicalEntityId(values);
        int chars = entityId.codePointCount(0, entityId.length());
        if (chars > MAX_ENTITY_ID_CHARS) {
          return new Extraction.Failed(Reason.MALFORMED, "entity id (" + names(route.extraction().entityId()) + ") is " + chars
              + " characters long; at most " + MAX_ENTITY_ID_CHARS + " fit og_entity.entity_id", null, null);
        }
        if (entityId.endsWith(" ")) {
          return new Extraction.Failed(Reason.MALFORMED, "entity id (" + names(route.extraction().entityId()) + ") ends with a space, which"
              + " MySQL's PAD SPACE collation of og_entity.entity_id ignores: it would share one entity row with the id"
              + " without the trailing spaces, yet be ordered apart from it", null, null);
        }
      }
      if (route.extraction().event() != null) {
        event = p.read(route.extraction().event());
        if (event == null) {
          return missing(route.extraction().event(), null, entityId, null);
        }
        if (!machine.events().containsKey(event)) {
          return new Extraction.Failed(
              Reason.UNKNOWN_EVENT,
              "event '" + abbreviate(event) + "' is not an event of machine '" + machine.name() + "' (events: " + machine.events().keySet() + ")",
              entityId,
              null);
        }
      }
      Canonical keyEnc = new Canonical();
      StringBuilder readable = new StringBuilder();
      if (event != null) {
        keyEnc.add("@event", event);
      }
      List<String> keyValues = new ArrayList<>();
      FieldSource absent = readKeyFields(p, route.extraction().businessKey(), keyValues);
      if (absent != null) {
        return missingKeyField(absent, keyValues, entityId, event);
      }
      for (int i = 0; i < keyValues.size(); i++) {
        String name = route.extraction().businessKey().get(i).name();
        keyEnc.add(name, keyValues.get(i));
        if (readable.length() > 0) {
          readable.append(", ");
        }
        readable.append(name).append('=').append(keyValues.get(i));
      }
      String fingerprint;
      FieldDigests fields = FieldDigests.NONE;
      if (!route.extraction().fingerprint().isEmpty()) {
        Canonical fp = new Canonical();
        Map<String, String> named = keepsDigests ? new java.util.LinkedHashMap<>() : null;
        for (FieldSource f : route.extraction().fingerprint()) {
          String v = p.read(f);
          fp.add(f.name(), v == null ? "\u0000absent" : v);
          if (named != null) {
            named.put(f.name(), v);
          }
        }
        fingerprint = fp.digest();
        fields = named == null ? FieldDigests.NONE : FieldDigests.ofFields(named);
      } else {
        fingerprint = p.wholeValueFingerprint(route.extraction().fingerprintExclude());
        fields = keepsDigests ? FieldDigests.ofLeaves(p.content) : FieldDigests.NONE;
      }
      String businessKey = readable.toString();
      if (businessKey.length() > 2000) {
        businessKey = businessKey.substring(0, 2000) + "…";
      }
      if (!keepsDigests) {
        return new Extraction.Ok(new ExtractedEvent(entityId, event, keyEnc.digest(), businessKey, fingerprint));
      }
      int size = value == null ? 0 : value.length;
      byte[] payload = keepsPayload && value != null && size <= route.ledgerContent().storePayloadMaxBytes() ? value : null;
      return new Extraction.Ok(new ExtractedEvent(entityId, event, keyEnc.digest(), businessKey, fingerprint, fields, payload,
          keepsPayload ? size : -1));
    } catch (IOException e) {
      return new Extraction.Failed(Reason.MALFORMED, e.getMessage(), entityId, event);
    }
  }

  /**
   * Reads key fields (entity id or business key) in order into {@code values}, up to and including
   * the first one that is absent, JSON null, empty or whitespace only (added as read, possibly
   * {@code null}), which is returned; {@code null} when every field has a value.
   */
  private static FieldSource readKeyFields(Parsed p, List<FieldSource> fields, List<String> values) throws IOException {
    for (FieldSource f : fields) {
      String v = p.read(f);
      values.add(v);
      if (v == null || v.isBlank()) {
        return f;
      }
    }
    return null;
  }

  /** The last of {@code values} is the bad field's, as {@link #readKeyFields} leaves them. */
  private static Extraction missingKeyField(FieldSource f, List<String> values, String entityId, String event) {
    return missing(f, values.get(values.size() - 1), entityId, event);
  }

  private static Extraction missing(FieldSource f, String value, String entityId, String event) {
    String what = value == null ? "is missing or null" : value.isEmpty() ? "is empty" : "is blank (whitespace only)";
    return new Extraction.Failed(Reason.MISSING_FIELD, "field '" + f.name() + "' (" + f.spec() + ") " + what, entityId, event);
  }

  private static String names(List<FieldSource> fields) {
    return fields.stream().map(FieldSource::name).collect(java.util.stream.Collectors.joining(", "));
  }

  private static String abbreviate(String s) {
    return s.codePointCount(0, s.length()) > 64 ? s.substring(0, s.offsetByCodePoints(0, 64)) + "…" : s;
  }

  /** The record with its value (and key) parsed lazily, once. */
  private final class Parsed {
    private final byte[] key;
    private final byte[] value;
    private final Headers headers;
    private JsonNode valueJson;
    private JsonNode keyJson;
    /** After {@link #wholeValueFingerprint}: the JSON content it hashed (excluded fields removed); {@code null} if not JSON. */
    JsonNode content;

    Parsed(byte[] key, byte[] value, Headers headers) throws IOException {
      this.key = key;
      this.value = value;
      this.headers = headers;
      if (needsValue) {
        if (value == null) {
          throw new IOException("record value is null (tombstone) but the route reads fields from it");
        }
        valueJson = parseJson(value, "value");
      }
      if (needsKeyJson) {
        if (key == null) {
          throw new IOException("record key is null but the route reads fields from it");
        }
        keyJson = parseJson(key, "key");
      }
    }

    private JsonNode parseJson(byte[] bytes, String what) throws IOException {
      // Jackson decodes overlong forms and encoded surrogates without a word: "o\xC0\xAD1" would be
      // read as "o-1", one entity and dedup key for two different byte strings
      int bad = Utf8.firstInvalid(bytes);
      if (bad >= 0) {
        throw new IOException("record " + what + " is not valid JSON: not valid UTF-8 (byte " + bad + ")");
      }
      try {
        JsonNode n = JSON.readTree(bytes);
        if (n == null || n.isMissingNode()) {
          throw new IOException("record " + what + " is empty, expected JSON");
        }
        return n;
      } catch (StreamConstraintsException e) {
        // a parser limit (nesting depth, number or string length): its message names the limit only
        throw new IOException("record " + what + " is not valid JSON: " + e.getOriginalMessage(), e);
      } catch (JsonProcessingException e) {
        // the location only: Jackson's message may quote the payload, which must not reach logs
        var loc = e.getLocation();
        String dup = e.getOriginalMessage() != null && e.getOriginalMessage().startsWith("Duplicate field") ? ": a duplicate key" : "";
        throw new IOException("record " + what + " is not valid JSON" + dup
            + (loc == null ? "" : " (error at line " + loc.getLineNr() + ", column " + loc.getColumnNr() + ")"), e);
      }
    }

    /** The field's canonical text, or {@code null} when absent or JSON null. */
    String read(FieldSource f) throws IOException {
      if (f instanceof FieldSource.ValuePointer vp) {
        return wellFormed(f, text(valueJson.at(vp.pointer())));
      }
      if (f instanceof FieldSource.Key k) {
        if (k.pointer().isEmpty()) {
          return key == null ? null : utf8(key, "record key");
        }
        return wellFormed(f, text(keyJson.at(k.pointer())));
      }
      if (f instanceof FieldSource.Header h) {
        Header only = null;
        int copies = 0;
        if (headers != null) {
          for (Header x : headers.headers(h.header())) {
            only = x;
            copies++;
          }
        }
        if (copies > 1) {
          // Kafka keeps every copy; clients read the first or the last: two readings of one field
          throw new IOException("header '" + h.header() + "' appears " + copies + " times; field '" + f.name() + "' (" + f.spec()
              + ") needs exactly one");
        }
        return only == null || only.value() == null ? null : utf8(only.value(), "header '" + h.header() + "'");
      }
      return ((FieldSource.Constant) f).value();
    }

    private String text(JsonNode n) throws IOException {
      if (n == null || n.isMissingNode() || n.isNull()) {
        return null;
      }
      if (n.isTextual()) {
        return n.asText();
      }
      if (n.isValueNode()) {
        return n.toString();
      }
      return canonicalJson(n);
    }

    String wholeValueFingerprint(List<String> exclude) throws IOException {
      if (value == null) {
        return sha256(new byte[0]);
      }
      JsonNode n = valueJson;
      if (n == null) {
        try {
          n = JSON.readTree(value);
        } catch (JsonProcessingException e) {
          n = null; // not JSON: fingerprint the bytes
        }
      }
      if (n == null || !n.isContainerNode()) {
        return sha256(value);
      }
      JsonNode copy = n.deepCopy();
      for (String ptr : exclude) {
        int cut = ptr.lastIndexOf('/');
        JsonNode parent = copy.at(ptr.substring(0, cut));
        if (parent instanceof ObjectNode o) {
          o.remove(ptr.substring(cut + 1).replace("~1", "/").replace("~0", "~"));
        }
      }
      content = copy;
      return sha256(canonicalJson(copy).getBytes(StandardCharsets.UTF_8));
    }
  }

  /**
   * A JSON escape may name half a surrogate pair ({@code "\\uD800"}), which has no UTF-8 form:
   * encoding it gives {@code ?}, so two such ids would share one dedup key or one entity row.
   */
  private static String wellFormed(FieldSource f, String v) throws IOException {
    if (v != null && Utf8.firstUnpairedSurrogate(v) >= 0) {
      throw new IOException("field '" + f.name() + "' (" + f.spec() + ") holds an unpaired UTF-16 surrogate (a \\u escape"
          + " without its pair), which has no UTF-8 form");
    }
    return v;
  }

  /**
   * Strict: lenient decoding maps every invalid byte to U+FFFD, so two different binary keys (a
   * LongSerializer key, say) would share one dedup key or one entity.
   */
  private static String utf8(byte[] bytes, String what) throws IOException {
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes))
          .toString();
    } catch (CharacterCodingException e) {
      throw new IOException(what + " is not valid UTF-8", e);
    }
  }

  /** JSON with object keys sorted at every level. */
  static String canonicalJson(JsonNode n) throws IOException {
    Object plain = toSorted(n);
    return CANONICAL.writeValueAsString(plain);
  }

  private static Object toSorted(JsonNode n) {
    if (n.isObject()) {
      Map<String, Object> m = new TreeMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        m.put(e.getKey(), toSorted(e.getValue()));
      }
      return m;
    }
    if (n.isArray()) {
      List<Object> l = new ArrayList<>();
      n.forEach(c -> l.add(toSorted(c)));
      return l;
    }
    return n;
  }

  /** Length-prefixed (name, value) pairs, hashed with SHA-256. */
  static final class Canonical {
    private final MessageDigest md = Sha256.fresh();

    void add(String name, String value) {
      put(name.getBytes(StandardCharsets.UTF_8));
      put(value.getBytes(StandardCharsets.UTF_8));
    }

    private void put(byte[] b) {
      md.update(ByteBuffer.allocate(4).putInt(b.length).array());
      md.update(b);
    }

    String digest() {
      return HexFormat.of().formatHex(md.digest());
    }
  }

  static String sha256(byte[] bytes) {
    return HexFormat.of().formatHex(Sha256.of(bytes));
  }
}
