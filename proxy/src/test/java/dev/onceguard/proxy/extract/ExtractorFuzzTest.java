package dev.onceguard.proxy.extract;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.extract.NastyInput.Nasty;
import dev.onceguard.v1.Reason;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Assertions;

/**
 * Fuzzed input straight into the {@link Extractor}, on two routes: the JSON-value order route and
 * one that reads every kind of field source (a JSON pointer into the key, a header, the value,
 * fingerprint fields). Fixed seeds, bounded tries, a wall-clock bound per try.
 */
class ExtractorFuzzTest {
  private static final Duration PER_TRY = Duration.ofSeconds(10);
  private static final String VALUE_ROUTE = """
      machine: order
      entity-id: /order_id
      event: /event
      business-key: [/order_id, /event]
      """;
  private static final String MIXED_ROUTE = """
      machine: order
      entity-id: [key:/tenant, /order_id]
      event: header:event-type
      business-key: [/order_id, header:event-type, key:/tenant]
      fingerprint: [/qty, header:source]
      """;

  private static final Extractor VALUE = ExtractorTest.extractor(VALUE_ROUTE);
  private static final Extractor MIXED = ExtractorTest.extractor(MIXED_ROUTE);

  @Provide
  Arbitrary<Nasty> bad() {
    return NastyInput.badRecords();
  }

  /** Any record through the mixed route: key, headers and value each possibly hostile. */
  @Provide
  Arbitrary<Nasty> mixed() {
    return Arbitraries.randomValue(r -> {
      Nasty v = NastyInput.any(r);
      Nasty k = NastyInput.any(r);
      byte[] key = switch (r.nextInt(4)) {
        case 0 -> k.value();
        case 1 -> ("{\"tenant\":\"t-" + r.nextInt(9) + "\"}").getBytes(UTF_8);
        case 2 -> null;
        default -> k.key();
      };
      List<Header> headers = new ArrayList<>(v.headerList());
      if (r.nextBoolean()) {
        headers.add(new RecordHeader("event-type", r.nextBoolean() ? "create".getBytes(UTF_8) : NastyInput.bad(r).value()));
      }
      return new Nasty("mixed: value " + v.kind() + ", key " + k.kind(), key, v.value(), headers);
    });
  }

  /** Every record the order route cannot read fails with a reason and a detail, never a throw. */
  @Property(tries = 300, seed = "20261211", shrinking = ShrinkingMode.OFF)
  void unreadableRecord_failsWithAReason(@ForAll("bad") Nasty n) {
    Extraction x = extract(VALUE, n);

    assertThat(x).as("%s", n).isInstanceOf(Extraction.Failed.class);
    assertFailedWell((Extraction.Failed) x, n);
  }

  /** Whatever the key, headers and value, the result is an event or a reasoned failure. */
  @Property(tries = 400, seed = "20261212", shrinking = ShrinkingMode.OFF)
  void anyRecord_anyFieldSource_endsInAnEventOrAReason(@ForAll("mixed") Nasty n) {
    for (Extractor e : List.of(VALUE, MIXED)) {
      Extraction x = extract(e, n);
      String cheapId = Assertions.assertTimeoutPreemptively(PER_TRY, () -> e.entityIdOrNull(n.key(), n.value(), n.headers()));
      if (x instanceof Extraction.Ok ok) {
        assertThat(ok.event().dedupKey()).hasSize(64);
        assertThat(ok.event().fingerprint()).hasSize(64);
        assertThat(ok.event().entityId()).as("the ordering key is the entity id (%s)", n).isEqualTo(cheapId);
        assertThat(Utf8.firstUnpairedSurrogate(ok.event().entityId())).as("%s", n).isEqualTo(-1);
      } else {
        assertFailedWell((Extraction.Failed) x, n);
      }
    }
  }

  /** The hand-written UTF-8 check agrees with the JDK's strict decoder on random bytes. */
  @Property(tries = 2000, seed = "20261213", shrinking = ShrinkingMode.OFF)
  void utf8Check_agreesWithTheStrictDecoder(@ForAll("utf8ish") byte[] b) {
    boolean strictOk;
    try {
      UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(b));
      strictOk = true;
    } catch (CharacterCodingException e) {
      strictOk = false;
    }
    assertThat(Utf8.firstInvalid(b) < 0).isEqualTo(strictOk);
  }

  /** Mostly well-formed text with a few random bytes spliced in, so both answers come up often. */
  @Provide
  Arbitrary<byte[]> utf8ish() {
    return Arbitraries.randomValue(r -> {
      StringBuilder sb = new StringBuilder();
      for (int i = r.nextInt(20); i > 0; i--) {
        sb.appendCodePoint(r.nextInt(4) == 0 ? 0x10000 + r.nextInt(0x100000) : r.nextInt(0xD000));
      }
      byte[] b = sb.toString().getBytes(UTF_8);
      for (int i = r.nextInt(3); i > 0 && b.length > 0; i--) {
        b[r.nextInt(b.length)] = (byte) r.nextInt(256);
      }
      return b;
    });
  }

  private static Extraction extract(Extractor e, Nasty n) {
    return Assertions.assertTimeoutPreemptively(PER_TRY, () -> e.extract(n.key(), n.value(), n.headers()), () -> "no end for " + n);
  }

  private static void assertFailedWell(Extraction.Failed f, Nasty n) {
    assertThat(f.reason()).as("%s", n).isIn(Reason.MALFORMED, Reason.MISSING_FIELD, Reason.UNKNOWN_EVENT);
    assertThat(f.detail()).as("%s", n).isNotBlank().hasSizeLessThan(600);
  }
}
