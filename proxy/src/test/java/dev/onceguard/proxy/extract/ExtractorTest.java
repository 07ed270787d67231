package dev.onceguard.proxy.extract;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.v1.Reason;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ExtractorTest {

  /** The reference order route: entity and key fields from the JSON value, the event from a header. */
  private static final String ORDER_ROUTE = """
      machine: order
      entity-id: /order_id
      event: header:event-type
      business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
      fingerprint-exclude: [/message_id, /sent_at, /meta/trace_id]
      """;

  private static final String SHIP = """
      {"order_id": "o-1", "sku_id": "s-9", "warehouse_id": "W1", "batch_no": 3,
       "message_id": "m-100", "sent_at": "2024-05-01T10:00:00Z", "qty": 2,
       "meta": {"trace_id": "t-1", "source": "oms"}}
      """;

  /** A sidecar config with the order machine and one route whose body is {@code routeYaml}. */
  static Extractor extractor(String routeYaml) {
    String yaml = """
        kafka:
          bootstrap-servers: 127.0.0.1:9092
        mysql:
          database: test
        machines:
          order:
            states: [created, paid, to_ship, shipped, delivered, cancelled]
            terminal: [delivered, cancelled]
            events:
              create:  { to: created }
              pay:     { from: [created], to: paid }
              prepare: { from: [paid], to: to_ship }
              ship:    { from: [to_ship], to: shipped }
              deliver: { from: [shipped], to: delivered }
              cancel:  { from: [created, paid, to_ship], to: cancelled }
        routes:
          - name: r
            topics: [in]
            target: 127.0.0.1:7000
        %s
        """.formatted(routeYaml.indent(4).stripTrailing());
    SidecarConfig c = new ConfigReader(Map.of()).parse(yaml, "test.yaml");
    RouteConfig route = c.routes().get(0);
    return new Extractor(route, route.hasMachine() ? c.machines().get(route.machine()) : null);
  }

  private static final Extractor ORDERS = extractor(ORDER_ROUTE);

  private static Headers event(String name) {
    return new RecordHeaders().add("event-type", name.getBytes(UTF_8));
  }

  private static byte[] bytes(String s) {
    return s.getBytes(UTF_8);
  }

  private static ExtractedEvent ok(Extraction x) {
    assertThat(x).isInstanceOf(Extraction.Ok.class);
    return ((Extraction.Ok) x).event();
  }

  private static Extraction.Failed failed(Extraction x) {
    assertThat(x).isInstanceOf(Extraction.Failed.class);
    return (Extraction.Failed) x;
  }

  private static ExtractedEvent ship(String value) {
    return ok(ORDERS.extract(null, bytes(value), event("ship")));
  }

  // ------------------------------------------------------------------------- dedup key

  @Test
  void extract_referenceRecord_readsEntityEventAndReadableKey() {
    ExtractedEvent e = ship(SHIP);

    assertThat(e.entityId()).isEqualTo("o-1");
    assertThat(e.event()).isEqualTo("ship");
    assertThat(e.businessKey()).isEqualTo("order_id=o-1, sku_id=s-9, warehouse_id=W1, batch_no=3");
    assertThat(e.dedupKey()).matches("[0-9a-f]{64}");
    assertThat(e.fingerprint()).matches("[0-9a-f]{64}");
  }

  @Test
  void dedupKey_sameRecord_isDeterministicAcrossExtractors() {
    Extractor other = extractor(ORDER_ROUTE);

    ExtractedEvent a = ship(SHIP);
    ExtractedEvent b = ok(other.extract(null, bytes(SHIP), event("ship")));

    assertThat(b).isEqualTo(a);
  }

  @Test
  void dedupKey_jsonKeyOrderAndWhitespace_doNotChangeIt() {
    String reordered = """
        {"meta":{"source":"oms","trace_id":"t-1"},"qty":2,"batch_no":3,"warehouse_id":"W1",
        "sent_at":"2024-05-01T10:00:00Z","message_id":"m-100","sku_id":"s-9","order_id":"o-1"}""";

    ExtractedEvent a = ship(SHIP);
    ExtractedEvent b = ship(reordered);

    assertThat(b.dedupKey()).isEqualTo(a.dedupKey());
    assertThat(b.fingerprint()).isEqualTo(a.fingerprint());
  }

  @Test
  void dedupKey_volatileAndNonKeyFields_doNotChangeIt() {
    String resent = SHIP.replace("m-100", "m-777").replace("10:00:00Z", "18:30:00Z").replace("\"qty\": 2", "\"qty\": 5")
        .replace("\"source\": \"oms\"", "\"source\": \"replay\"");
    assertThat(resent).as("test setup").doesNotContain("m-100").contains("\"qty\": 5").contains("replay");

    assertThat(ship(resent).dedupKey()).isEqualTo(ship(SHIP).dedupKey());
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(delimiter = '|', value = {
      "order_id     | \"order_id\": \"o-1\"     | \"order_id\": \"o-2\"",
      "sku_id       | \"sku_id\": \"s-9\"       | \"sku_id\": \"s-8\"",
      "warehouse_id | \"warehouse_id\": \"W1\"  | \"warehouse_id\": \"W2\"",
      "batch_no     | \"batch_no\": 3           | \"batch_no\": 4",
  })
  void dedupKey_anyKeyFieldDiffers_keyDiffers(String field, String from, String to) {
    assertThat(SHIP).as("test setup").contains(from);

    ExtractedEvent changed = ship(SHIP.replace(from, to));

    assertThat(changed.dedupKey()).as(field).isNotEqualTo(ship(SHIP).dedupKey());
  }

  @Test
  void dedupKey_lengthPrefixed_abAndCDiffersFromAAndBc() {
    Extractor x = extractor("business-key: [/x, /y]");

    String abC = ok(x.extract(null, bytes("{\"x\": \"ab\", \"y\": \"c\"}"), null)).dedupKey();
    String aBc = ok(x.extract(null, bytes("{\"x\": \"a\", \"y\": \"bc\"}"), null)).dedupKey();

    assertThat(abC).isNotEqualTo(aBc);
  }

  @Test
  void dedupKey_fieldNamesArePartOfTheKey() {
    String xy = ok(extractor("business-key: [/x, /y]").extract(null, bytes("{\"x\": \"1\", \"y\": \"2\"}"), null)).dedupKey();
    String xz = ok(extractor("business-key: [/x, /z]").extract(null, bytes("{\"x\": \"1\", \"z\": \"2\"}"), null)).dedupKey();

    assertThat(xy).isNotEqualTo(xz);
  }

  @Test
  void dedupKey_numberAndStringOfTheSameDigits_areEqual() {
    // documented: a string contributes its text, a number its JSON text, so 3 and "3" both give "3"
    ExtractedEvent number = ship(SHIP);
    ExtractedEvent string = ship(SHIP.replace("\"batch_no\": 3", "\"batch_no\": \"3\""));

    assertThat(string.dedupKey()).isEqualTo(number.dedupKey());
    assertThat(string.businessKey()).isEqualTo(number.businessKey());
  }

  @Test
  void dedupKey_booleanAndStringOfTheSameText_areEqual() {
    Extractor x = extractor("business-key: [/flag]");

    assertThat(ok(x.extract(null, bytes("{\"flag\": true}"), null)).dedupKey())
        .isEqualTo(ok(x.extract(null, bytes("{\"flag\": \"true\"}"), null)).dedupKey());
  }

  @Test
  void dedupKey_integerAndDecimalSpelling_differ() {
    assertThat(ship(SHIP.replace("\"batch_no\": 3", "\"batch_no\": 3.0")).dedupKey()).isNotEqualTo(ship(SHIP).dedupKey());
  }

  @Test
  void dedupKey_objectValuedField_isCanonicalJsonIndependentOfKeyOrder() {
    Extractor x = extractor("business-key: [/order_id, /location]");

    ExtractedEvent a = ok(x.extract(null, bytes("{\"order_id\": \"o-1\", \"location\": {\"wh\": \"W1\", \"bin\": [1, 2]}}"), null));
    ExtractedEvent b = ok(x.extract(null, bytes("{\"location\": { \"bin\": [1,2], \"wh\": \"W1\" }, \"order_id\": \"o-1\"}"), null));
    ExtractedEvent c = ok(x.extract(null, bytes("{\"order_id\": \"o-1\", \"location\": {\"wh\": \"W1\", \"bin\": [2, 1]}}"), null));

    assertThat(b.dedupKey()).isEqualTo(a.dedupKey());
    assertThat(a.businessKey()).isEqualTo("order_id=o-1, location={\"bin\":[1,2],\"wh\":\"W1\"}");
    assertThat(c.dedupKey()).as("array order matters").isNotEqualTo(a.dedupKey());
  }

  @Test
  void dedupKey_machineRoute_sameBusinessFieldsDifferentEvents_differ() {
    ExtractedEvent shipped = ok(ORDERS.extract(null, bytes(SHIP), event("ship")));
    ExtractedEvent delivered = ok(ORDERS.extract(null, bytes(SHIP), event("deliver")));

    assertThat(shipped.businessKey()).isEqualTo(delivered.businessKey());
    assertThat(shipped.fingerprint()).isEqualTo(delivered.fingerprint());
    assertThat(shipped.dedupKey()).isNotEqualTo(delivered.dedupKey());
  }

  @Test
  void dedupKey_machineRouteIncludesTheEvent_differsFromSameFieldsWithoutMachine() {
    // on a machine route the event is prefixed under a reserved name; a route without one has no event part
    Extractor plain = extractor("business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]");

    String withEvent = ship(SHIP).dedupKey();
    String withoutEvent = ok(plain.extract(null, bytes(SHIP), event("ship"))).dedupKey();

    assertThat(withEvent).isNotEqualTo(withoutEvent);
  }

  // ------------------------------------------------------------------------- fingerprint

  @Test
  void fingerprint_ignoresExcludedFieldsIncludingNestedOnes() {
    String resent = SHIP.replace("m-100", "m-777").replace("10:00:00Z", "18:30:00Z").replace("t-1", "t-2");

    assertThat(ship(resent).fingerprint()).isEqualTo(ship(SHIP).fingerprint());
  }

  @Test
  void fingerprint_excludedFieldAbsent_sameAsPresent() {
    String without = """
        {"order_id": "o-1", "sku_id": "s-9", "warehouse_id": "W1", "batch_no": 3, "qty": 2,
         "meta": {"source": "oms"}}
        """;

    assertThat(ship(without).fingerprint()).isEqualTo(ship(SHIP).fingerprint());
  }

  @Test
  void fingerprint_nonExcludedFieldChanges_fingerprintChangesButKeyDoesNot() {
    ExtractedEvent original = ship(SHIP);
    ExtractedEvent otherQty = ship(SHIP.replace("\"qty\": 2", "\"qty\": 5"));
    ExtractedEvent otherNested = ship(SHIP.replace("\"source\": \"oms\"", "\"source\": \"wms\""));

    assertThat(otherQty.dedupKey()).isEqualTo(original.dedupKey());
    assertThat(otherQty.fingerprint()).isNotEqualTo(original.fingerprint());
    assertThat(otherNested.fingerprint()).isNotEqualTo(original.fingerprint());
  }

  @Test
  void fingerprint_headersDoNotCount() {
    Headers h1 = event("ship").add("message-id", bytes("k-1"));
    Headers h2 = event("ship").add("message-id", bytes("k-2"));

    assertThat(ok(ORDERS.extract(bytes("a"), bytes(SHIP), h1)).fingerprint())
        .isEqualTo(ok(ORDERS.extract(bytes("b"), bytes(SHIP), h2)).fingerprint());
  }

  @Test
  void fingerprint_configuredFields_onlyThoseCount() {
    Extractor x = extractor("""
        business-key: [/order_id]
        fingerprint: [/amount, header:currency]
        """);
    Headers eur = new RecordHeaders().add("currency", bytes("EUR"));
    Headers usd = new RecordHeaders().add("currency", bytes("USD"));

    String base = ok(x.extract(null, bytes("{\"order_id\": \"o-1\", \"amount\": 10, \"note\": \"a\"}"), eur)).fingerprint();
    String otherNote = ok(x.extract(null, bytes("{\"note\": \"b\", \"amount\": 10, \"order_id\": \"o-1\"}"), eur)).fingerprint();
    String otherAmount = ok(x.extract(null, bytes("{\"order_id\": \"o-1\", \"amount\": 11, \"note\": \"a\"}"), eur)).fingerprint();
    String otherCurrency = ok(x.extract(null, bytes("{\"order_id\": \"o-1\", \"amount\": 10, \"note\": \"a\"}"), usd)).fingerprint();

    assertThat(otherNote).isEqualTo(base);
    assertThat(otherAmount).isNotEqualTo(base);
    assertThat(otherCurrency).isNotEqualTo(base);
  }

  @Test
  void fingerprint_configuredFieldMissing_isNotAnErrorAndDiffersFromPresent() {
    Extractor x = extractor("""
        business-key: [/order_id]
        fingerprint: [/amount]
        """);

    Extraction missing = x.extract(null, bytes("{\"order_id\": \"o-1\"}"), null);
    Extraction empty = x.extract(null, bytes("{\"order_id\": \"o-1\", \"amount\": \"\"}"), null);

    assertThat(ok(missing).fingerprint()).isNotEqualTo(ok(empty).fingerprint());
  }

  @Test
  void fingerprint_nonJsonValueOnRouteNotReadingTheValue_isOverTheBytes() {
    Extractor x = extractor("business-key: [header:order-id]");
    Headers h = new RecordHeaders().add("order-id", bytes("o-1"));

    ExtractedEvent a = ok(x.extract(null, bytes("plain text, not JSON"), h));
    ExtractedEvent b = ok(x.extract(null, bytes("plain text, not JSON"), h));
    ExtractedEvent c = ok(x.extract(null, bytes("plain text, not JSON!"), h));

    assertThat(a.fingerprint()).isEqualTo(b.fingerprint()).isEqualTo(Extractor.sha256(bytes("plain text, not JSON")));
    assertThat(c.fingerprint()).isNotEqualTo(a.fingerprint());
  }

  // ------------------------------------------------------------------------- field sources

  @Test
  void headerSource_readsTheHeaderAsUtf8() {
    Extractor x = extractor("business-key: [header:order-id]");
    Headers h = new RecordHeaders().add("trace", bytes("t")).add("order-id", bytes("ö-1"));

    assertThat(ok(x.extract(null, null, h)).businessKey()).isEqualTo("order-id=ö-1");
  }

  @Test
  void headerSource_headerTwice_malformedNamingTheHeader_likeADuplicateJsonKey() {
    // the business's client may read the first copy where the sidecar would read the last
    Extractor x = extractor("business-key: [header:order-id]");
    Headers h = new RecordHeaders().add("order-id", bytes("o-1")).add("order-id", bytes("o-2"));

    Extraction.Failed f = failed(x.extract(null, null, h));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).isEqualTo("header 'order-id' appears 2 times; field 'order-id' (header:order-id) needs exactly one");
  }

  @Test
  void eventHeaderTwice_malformedWithTheEntity_evenWhenBothCopiesAgree() {
    Headers h = new RecordHeaders().add("event-type", bytes("ship")).add("event-type", bytes("ship"));

    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP), h));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).contains("header 'event-type' appears 2 times");
    assertThat(f.entityId()).isEqualTo("o-1");
  }

  @Test
  void repeatedHeaderNoFieldReads_isFine() {
    Headers h = event("ship").add("trace", bytes("a")).add("trace", bytes("b"));

    assertThat(ok(ORDERS.extract(null, bytes(SHIP), h)).event()).isEqualTo("ship");
  }

  @Test
  void wholeKeySource_readsTheRecordKey() {
    Extractor x = extractor("business-key: [key]");

    ExtractedEvent a = ok(x.extract(bytes("o-1"), bytes("{}"), null));
    ExtractedEvent b = ok(x.extract(bytes("o-2"), bytes("{}"), null));

    assertThat(a.businessKey()).isEqualTo("key=o-1");
    assertThat(b.dedupKey()).isNotEqualTo(a.dedupKey());
  }

  @Test
  void wholeKeySource_nullKey_missingField() {
    Extraction.Failed f = failed(extractor("business-key: [key]").extract(null, bytes("{}"), null));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).contains("'key'");
  }

  @Test
  void wholeKeySource_notUtf8_malformedRatherThanCollidingWithOtherKeys() {
    // e.g. a LongSerializer key: 8 bytes, decoding 0xfe and 0xff leniently would both give U+FFFD
    Extractor x = extractor("business-key: [key]");

    Extraction.Failed f254 = failed(x.extract(new byte[] {0, 0, 0, 0, 0, 0, 0, (byte) 0xfe}, bytes("{}"), null));
    Extraction.Failed f255 = failed(x.extract(new byte[] {0, 0, 0, 0, 0, 0, 0, (byte) 0xff}, bytes("{}"), null));

    assertThat(f254.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f254.detail()).contains("not valid UTF-8");
    assertThat(f255.reason()).isEqualTo(Reason.MALFORMED);
  }

  @Test
  void entityIdFromKey_notUtf8_malformedNotAnotherEntity() {
    Extractor x = extractor("""
        machine: order
        entity-id: key
        event: const:ship
        business-key: [key]
        """);

    Extraction.Failed f = failed(x.extract(new byte[] {'o', '-', (byte) 0xc3}, bytes("{}"), null));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.entityId()).isNull();
    assertThat(x.entityIdOrNull(new byte[] {'o', '-', (byte) 0xc3}, bytes("{}"), null)).isNull();
  }

  @Test
  void headerSource_notUtf8_malformed() {
    Extractor x = extractor("business-key: [header:order-id]");
    Headers h = new RecordHeaders().add("order-id", new byte[] {(byte) 0x80});

    assertThat(failed(x.extract(null, null, h)).reason()).isEqualTo(Reason.MALFORMED);
  }

  @Test
  void keyPointerSource_readsFromAJsonKey() {
    Extractor x = extractor("""
        machine: order
        entity-id: key:/id
        event: const:ship
        business-key: ['key:/id', {name: wh, from: 'key:/wh'}]
        """);

    ExtractedEvent e = ok(x.extract(bytes("{\"id\": \"o-1\", \"wh\": \"W1\"}"), bytes("not json, not read"), null));

    assertThat(e.entityId()).isEqualTo("o-1");
    assertThat(e.event()).isEqualTo("ship");
    assertThat(e.businessKey()).isEqualTo("id=o-1, wh=W1");
  }

  @Test
  void keyPointerSource_keyNotJson_malformed() {
    Extraction.Failed f = failed(extractor("business-key: ['key:/id']").extract(bytes("o-1"), bytes("{}"), null));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).contains("record key is not valid JSON");
  }

  @Test
  void keyPointerSource_nullKey_malformed() {
    Extraction.Failed f = failed(extractor("business-key: ['key:/id']").extract(null, bytes("{}"), null));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).contains("record key is null");
  }

  @Test
  void constSource_contributesItsValue() {
    String v1 = ok(extractor("business-key: [/order_id, 'const:v1']").extract(null, bytes("{\"order_id\": \"o-1\"}"), null)).dedupKey();
    String v2 = ok(extractor("business-key: [/order_id, 'const:v2']").extract(null, bytes("{\"order_id\": \"o-1\"}"), null)).dedupKey();
    ExtractedEvent e = ok(extractor("business-key: [/order_id, 'const:v1']").extract(null, bytes("{\"order_id\": \"o-1\"}"), null));

    assertThat(v1).isNotEqualTo(v2);
    assertThat(e.businessKey()).isEqualTo("order_id=o-1, const=v1");
  }

  @Test
  void constEvent_onMachineRoute_isTheEvent() {
    Extractor x = extractor(ORDER_ROUTE.replace("event: header:event-type", "event: const:deliver"));

    ExtractedEvent e = ok(x.extract(null, bytes(SHIP), null));

    assertThat(e.event()).isEqualTo("deliver");
    assertThat(e.dedupKey()).isEqualTo(ok(ORDERS.extract(null, bytes(SHIP), event("deliver"))).dedupKey());
  }

  @Test
  void numericEntityId_isItsJsonText() {
    ExtractedEvent e = ship(SHIP.replace("\"order_id\": \"o-1\"", "\"order_id\": 42"));

    assertThat(e.entityId()).isEqualTo("42");
  }

  // ------------------------------------------------------------------------- failures

  @Test
  void keyFieldMissing_missingFieldNamingTheFieldWithEntityAndEvent() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP.replace("\"warehouse_id\": \"W1\", ", "")), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).isEqualTo("field 'warehouse_id' (/warehouse_id) is missing or null");
    assertThat(f.entityId()).isEqualTo("o-1");
    assertThat(f.event()).isEqualTo("ship");
  }

  @Test
  void keyFieldJsonNull_missingFieldNotAnEmptyValue() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP.replace("\"batch_no\": 3", "\"batch_no\": null")), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).contains("'batch_no'");
  }

  @Test
  void entityIdMissing_missingFieldWithoutEntity() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP.replace("\"order_id\": \"o-1\", ", "")), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).contains("'entity-id'").contains("/order_id");
    assertThat(f.entityId()).isNull();
    assertThat(f.event()).isNull();
  }

  @Test
  void eventHeaderMissing_missingFieldWithEntity() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP), new RecordHeaders()));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).contains("'event'").contains("header:event-type");
    assertThat(f.entityId()).isEqualTo("o-1");
  }

  @Test
  void unknownEvent_unknownEventWithEntityId() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP), event("refund")));

    assertThat(f.reason()).isEqualTo(Reason.UNKNOWN_EVENT);
    assertThat(f.detail()).contains("'refund'").contains("'order'");
    assertThat(f.entityId()).isEqualTo("o-1");
    assertThat(f.event()).isNull();
  }

  @Test
  void badJsonValue_malformed() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes("{\"order_id\": \"o-1\", "), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).startsWith("record value is not valid JSON");
    assertThat(f.entityId()).isNull();
  }

  @Test
  void nullValue_malformed() {
    Extraction.Failed f = failed(ORDERS.extract(bytes("o-1"), null, event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).contains("null");
  }

  @Test
  void emptyValue_malformed() {
    Extraction.Failed f = failed(ORDERS.extract(null, new byte[0], event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).contains("empty");
  }

  @Test
  void jsonValueNotAnObject_missingField() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes("[\"o-1\"]"), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
  }

  @Test
  void entityIdLongerThan255_malformed() {
    Extraction.Failed f = failed(ORDERS.extract(null, bytes(SHIP.replace("\"o-1\"", "\"" + "x".repeat(256) + "\"")), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).contains("255");
  }

  @Test
  void entityIdLongerThan255_countsCharactersNotUtf16Units() {
    // 255 emoji are 510 UTF-16 units but 255 characters of a utf8mb4 column: they fit
    ExtractedEvent e = ship(SHIP.replace("\"o-1\"", "\"" + "\uD83D\uDCE6".repeat(255) + "\""));

    assertThat(e.entityId()).hasSize(510);
  }

  // ------------------------------------------------------------------------- blank key fields

  @ParameterizedTest(name = "order_id {0}")
  @CsvSource(delimiter = '|', value = {
      "'\"\"'      | is empty",
      "'\"  \"'    | is blank (whitespace only)",
      "'\"\\t \\n\"' | is blank (whitespace only)"})
  void entityIdBlank_missingFieldNotEntityEmpty(String json, String what) {
    String value = SHIP.replace("\"order_id\": \"o-1\"", "\"order_id\": " + json);

    Extraction.Failed f = failed(ORDERS.extract(null, bytes(value), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).isEqualTo("field 'entity-id' (/order_id) " + what);
    assertThat(f.entityId()).isNull();
    assertThat(ORDERS.entityIdOrNull(null, bytes(value), event("ship"))).isNull();
  }

  // ------------------------------------------------------------------------- trailing spaces

  @ParameterizedTest(name = "order_id \"{0}\"")
  @CsvSource(value = {"'o-1 '", "'o-1   '"})
  void entityIdEndingWithASpace_malformed_becauseMysqlPadSpaceWouldMakeItOneRowWithO1(String id) {
    // og_entity.entity_id is utf8mb4_bin, a PAD SPACE collation: 'o-1 ' = 'o-1' there, while the
    // ordering keys "e:o-1 " and "e:o-1" let two records of that one row run side by side
    String value = SHIP.replace("\"order_id\": \"o-1\"", "\"order_id\": \"" + id + "\"");

    Extraction.Failed f = failed(ORDERS.extract(null, bytes(value), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).isEqualTo("entity id (entity-id) ends with a space, which MySQL's PAD SPACE collation of"
        + " og_entity.entity_id ignores: it would share one entity row with the id without the trailing spaces, yet be"
        + " ordered apart from it");
    assertThat(f.entityId()).isNull();
  }

  @Test
  void entityIdWithOtherEdgeWhitespace_staysADistinctId() {
    // PAD SPACE pads with U+0020 only: a trailing tab or a leading space is another row in MySQL too
    Map<String, String> jsonToId = Map.of("o-1\\t", "o-1\t", " o-1", " o-1", "o-1\\u00a0", "o-1\u00a0");
    jsonToId.forEach((json, id) -> {
      String value = SHIP.replace("\"order_id\": \"o-1\"", "\"order_id\": \"" + json + "\"");
      assertThat(ok(ORDERS.extract(null, bytes(value), event("ship"))).entityId()).isEqualTo(id);
    });
  }

  @Test
  void compositeEntityId_lastValueEndingWithASpace_malformed_innerOneIsDistinct() {
    String last = SHIP.replace("\"warehouse_id\": \"W1\"", "\"warehouse_id\": \"W1 \"");
    String inner = SHIP.replace("\"sku_id\": \"s-9\"", "\"sku_id\": \"s-9 \"");

    Extraction.Failed f = failed(LINES.extract(null, bytes(last), event("ship")));
    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).startsWith("entity id (order_id, sku_id, warehouse_id) ends with a space");
    // "o-1|s-9 |W1" and "o-1|s-9|W1" differ in MySQL as well
    assertThat(ok(LINES.extract(null, bytes(inner), event("ship"))).entityId()).isEqualTo("o-1|s-9 |W1");
  }

  @Test
  void businessKeyFieldWhitespace_missingFieldNamingTheField() {
    String value = SHIP.replace("\"warehouse_id\": \"W1\"", "\"warehouse_id\": \" \"");

    Extraction.Failed f = failed(ORDERS.extract(null, bytes(value), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).isEqualTo("field 'warehouse_id' (/warehouse_id) is blank (whitespace only)");
    assertThat(f.entityId()).isEqualTo("o-1");
    assertThat(f.event()).isEqualTo("ship");
  }

  @Test
  void businessKeyFieldEmptyHeader_missingField() {
    Extractor x = extractor(ORDER_ROUTE.replace("/batch_no]", "header:batch]"));
    Headers h = event("ship").add("batch", new byte[0]);

    Extraction.Failed f = failed(x.extract(null, bytes(SHIP), h));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).isEqualTo("field 'batch' (header:batch) is empty");
  }

  @Test
  void blankOrderId_twoRecords_neitherBecomesEntityEmpty() {
    // before: both became entity '' and the second was dropped as ALREADY_APPLIED
    String first = SHIP.replace("\"order_id\": \"o-1\"", "\"order_id\": \"\"");
    String second = first.replace("\"s-9\"", "\"s-10\"");

    assertThat(List.of(ORDERS.extract(null, bytes(first), event("ship")), ORDERS.extract(null, bytes(second), event("ship"))))
        .allSatisfy(x -> assertThat(failed(x).reason()).isEqualTo(Reason.MISSING_FIELD));
  }

  // ------------------------------------------------------------------------- composite entity id

  private static final Extractor LINES = extractor(ORDER_ROUTE.replace("entity-id: /order_id", "entity-id: [/order_id, /sku_id, /warehouse_id]"));

  @Test
  void compositeEntityId_isTheValuesJoinedByBar() {
    ExtractedEvent e = ok(LINES.extract(null, bytes(SHIP), event("ship")));

    assertThat(e.entityId()).isEqualTo("o-1|s-9|W1");
    assertThat(e.businessKey()).isEqualTo("order_id=o-1, sku_id=s-9, warehouse_id=W1, batch_no=3");
  }

  @Test
  void compositeEntityId_entityIdOrNullGivesTheSameCanonicalValue() {
    String value = SHIP.replace("\"o-1\"", "\"o|1\\\\x\"");

    ExtractedEvent e = ok(LINES.extract(null, bytes(value), event("ship")));

    assertThat(e.entityId()).isEqualTo("o\\|1\\\\x|s-9|W1");
    assertThat(LINES.entityIdOrNull(null, bytes(value), event("ship"))).isEqualTo(e.entityId());
  }

  @Test
  void compositeEntityId_separatorInsideAValue_isEscapedSoSplitsStayApart() {
    assertThat(Extractor.canonicalEntityId(List.of("a|b", "c"))).isEqualTo("a\\|b|c");
    assertThat(Extractor.canonicalEntityId(List.of("a", "b|c"))).isEqualTo("a|b\\|c");
    assertThat(Extractor.canonicalEntityId(List.of("a\\", "|c"))).isEqualTo("a\\\\|\\|c");
    assertThat(Extractor.canonicalEntityId(List.of("a\\|", "c"))).isEqualTo("a\\\\\\||c");
  }

  @Test
  void singleEntityIdField_isItsPlainValueEvenWithSeparators() {
    assertThat(Extractor.canonicalEntityId(List.of("o|1\\"))).isEqualTo("o|1\\");
    assertThat(ship(SHIP.replace("\"o-1\"", "\"o|1\"")).entityId()).isEqualTo("o|1");
  }

  @Test
  void compositeEntityId_numberField_isItsJsonText() {
    Extractor x = extractor(ORDER_ROUTE.replace("entity-id: /order_id", "entity-id: [/order_id, /batch_no]"));

    assertThat(ok(x.extract(null, bytes(SHIP), event("ship"))).entityId()).isEqualTo("o-1|3");
  }

  @Test
  void compositeEntityId_twoWarehouses_areTwoEntities() {
    ExtractedEvent w1 = ok(LINES.extract(null, bytes(SHIP), event("ship")));
    ExtractedEvent w2 = ok(LINES.extract(null, bytes(SHIP.replace("\"W1\"", "\"W2\"")), event("ship")));

    assertThat(w1.entityId()).isNotEqualTo(w2.entityId());
  }

  @Test
  void compositeEntityId_whitespaceWarehouse_missingFieldNamingIt() {
    String value = SHIP.replace("\"warehouse_id\": \"W1\"", "\"warehouse_id\": \"   \"");

    Extraction.Failed f = failed(LINES.extract(null, bytes(value), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).isEqualTo("field 'warehouse_id' (/warehouse_id) is blank (whitespace only)");
    assertThat(f.entityId()).isNull();
    assertThat(LINES.entityIdOrNull(null, bytes(value), event("ship"))).isNull();
  }

  @Test
  void compositeEntityId_fieldMissing_missingFieldNamingIt() {
    Extraction.Failed f = failed(LINES.extract(null, bytes(SHIP.replace("\"sku_id\": \"s-9\", ", "")), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MISSING_FIELD);
    assertThat(f.detail()).isEqualTo("field 'sku_id' (/sku_id) is missing or null");
  }

  @Test
  void compositeEntityId_longerThan255AfterJoining_malformedNamingTheFields() {
    // each part fits, the joined id (2 x 127 + 2 separators + "W1") is 258 characters
    String value = SHIP.replace("\"o-1\"", "\"" + "o".repeat(127) + "\"").replace("\"s-9\"", "\"" + "s".repeat(127) + "\"");

    Extraction.Failed f = failed(LINES.extract(null, bytes(value), event("ship")));

    assertThat(f.reason()).isEqualTo(Reason.MALFORMED);
    assertThat(f.detail()).isEqualTo("entity id (order_id, sku_id, warehouse_id) is 258 characters long; at most 255 fit og_entity.entity_id");
    assertThat(f.entityId()).isNull();
  }

  @Test
  void compositeEntityId_exactly255_isAccepted() {
    String value = SHIP.replace("\"o-1\"", "\"" + "o".repeat(126) + "\"").replace("\"s-9\"", "\"" + "s".repeat(125) + "\"");

    assertThat(ok(LINES.extract(null, bytes(value), event("ship"))).entityId()).hasSize(255);
  }

  // ------------------------------------------------------------------------- routes without a machine

  @Test
  void routeWithoutMachine_entityAndEventAreNull() {
    Extractor x = extractor("business-key: [/order_id, /sku_id]");

    ExtractedEvent e = ok(x.extract(null, bytes(SHIP), event("ship")));

    assertThat(e.entityId()).isNull();
    assertThat(e.event()).isNull();
    assertThat(e.businessKey()).isEqualTo("order_id=o-1, sku_id=s-9");
    assertThat(x.entityIdOrNull(null, bytes(SHIP), null)).isNull();
  }

  @Test
  void entityIdOrNull_readsTheEntityOrGivesNull() {
    assertThat(ORDERS.entityIdOrNull(null, bytes(SHIP), null)).isEqualTo("o-1");
    assertThat(ORDERS.entityIdOrNull(null, bytes("{broken"), null)).isNull();
    assertThat(ORDERS.entityIdOrNull(null, null, null)).isNull();
    assertThat(ORDERS.entityIdOrNull(null, bytes("{\"sku_id\": \"s-9\"}"), null)).isNull();
  }
}
