package dev.onceguard.proxy.extract;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.v1.FieldDifference;
import dev.onceguard.v1.FieldDifference.Change;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

class FieldDigestsTest {
  private static final String ROUTE = """
      business-key: [/order_id, /sku_id]
      fingerprint-exclude: [/message_id]
      """;
  private static final Extractor DIGESTS = ExtractorTest.extractor(ROUTE);
  private static final Extractor NONE = ExtractorTest.extractor(ROUTE + "store-payload: none\n");
  private static final Extractor FULL = ExtractorTest.extractor(ROUTE + "store-payload: full\nstore-payload-max-bytes: 120\n");

  private static ExtractedEvent read(Extractor x, String json) {
    Extraction r = x.extract(null, json.getBytes(UTF_8), new RecordHeaders());
    assertThat(r).isInstanceOf(Extraction.Ok.class);
    return ((Extraction.Ok) r).event();
  }

  private static final String APPLIED = """
      {"order_id":"o-1","sku_id":"s-9","warehouse_id":"W1","qty":2,"message_id":"m-1","lines":[{"n":1}],"note":"x"}""";

  @Test
  void sameKeyDifferentContent_namesTheChangedAddedAndRemovedPointers_withThisRecordsValuesOnly() {
    byte[] stored = read(DIGESTS, APPLIED).fields().encode();
    ExtractedEvent other = read(DIGESTS, """
        {"order_id":"o-1","sku_id":"s-9","warehouse_id":"W2","qty":2,"message_id":"m-2","lines":[{"n":1}],"gift":true}""");

    FieldDigests.Differences d = other.fields().differencesFrom(stored);

    assertThat(d.fields()).extracting(FieldDifference::getPointer, FieldDifference::getChange, FieldDifference::getValue).containsExactly(
        org.assertj.core.groups.Tuple.tuple("/gift", Change.ADDED, "true"),
        org.assertj.core.groups.Tuple.tuple("/note", Change.REMOVED, ""),
        org.assertj.core.groups.Tuple.tuple("/warehouse_id", Change.CHANGED, "\"W2\""));
    assertThat(d.truncated()).isFalse();
  }

  @Test
  void excludedFields_andEqualContent_differInNothing() {
    byte[] stored = read(DIGESTS, APPLIED).fields().encode();

    assertThat(read(DIGESTS, APPLIED.replace("m-1", "m-9")).fields().differencesFrom(stored).fields()).isEmpty();
  }

  @Test
  void storedForm_costsTwoPlusTenPlusPointerBytesPerField_andDecodesToThePointers() {
    byte[] stored = read(DIGESTS, "{\"order_id\":\"o-1\",\"sku_id\":\"s-9\",\"qty\":2}").fields().encode();

    // "/order_id" 9, "/qty" 4, "/sku_id" 7 bytes: 2 header bytes + 3 * (2 + 8) + 20
    assertThat(stored).hasSize(2 + 3 * 10 + 20);
    assertThat(FieldDigests.decode(stored).digests()).containsOnlyKeys("/order_id", "/qty", "/sku_id")
        .allSatisfy((k, v) -> assertThat(v).matches("[0-9a-f]{16}"));
  }

  @Test
  void manyDifferences_areCutAtTwenty_andSaySo_andLongValuesAreCut() {
    StringBuilder a = new StringBuilder("{\"order_id\":\"o-1\",\"sku_id\":\"s-9\"");
    StringBuilder b = new StringBuilder(a);
    for (int i = 0; i < 30; i++) {
      a.append(",\"f").append(i).append("\":1");
      b.append(",\"f").append(i).append("\":\"").append("v".repeat(100)).append("\"");
    }
    FieldDigests.Differences d = read(DIGESTS, b + "}").fields().differencesFrom(read(DIGESTS, a + "}").fields().encode());

    assertThat(d.fields()).hasSize(FieldDigests.MAX_DIFFERENCES);
    assertThat(d.truncated()).isTrue();
    assertThat(d.fields().get(0).getValue()).hasSize(FieldDigests.MAX_VALUE_CHARS + 1).endsWith("…");
  }

  @Test
  void storePayloadNone_keepsNothing_full_keepsTheValueUpToItsCap() {
    assertThat(read(NONE, APPLIED).fields().encode()).isNull();
    assertThat(read(NONE, APPLIED).payloadSize()).isEqualTo(-1);
    ExtractedEvent small = read(FULL, APPLIED);
    assertThat(small.payload()).isEqualTo(APPLIED.getBytes(UTF_8));
    assertThat(small.fields().isEmpty()).isFalse();
    String big = APPLIED.replace("\"x\"", "\"" + "y".repeat(200) + "\"");
    ExtractedEvent large = read(FULL, big);
    assertThat(large.payload()).isNull();
    assertThat(large.payloadSize()).isEqualTo(big.getBytes(UTF_8).length);
  }

  @Test
  void unknownOrEmptyStoredForm_isNoDifference_neverAnError() {
    ExtractedEvent e = read(DIGESTS, APPLIED);

    assertThat(e.fields().differencesFrom(null)).isEqualTo(FieldDigests.Differences.NONE);
    assertThat(e.fields().differencesFrom(new byte[] {9, 0, 1})).isEqualTo(FieldDigests.Differences.NONE);
  }
}
