package dev.onceguard.proxy.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.guard.ClaimPreview.Outcome;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.v1.Reason;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

class ClaimPreviewTest {
  /** Facts held in maps, as the store would read them. */
  static final class MapFacts implements ClaimPreview.Facts {
    final Map<String, LedgerRow> ledger = new HashMap<>();
    final Map<String, EntityRow> entities = new HashMap<>();
    final List<LedgerRow> applied = new java.util.ArrayList<>();

    @Override
    public LedgerRow ledgerRow(String route, String dedupKey) {
      return ledger.get(dedupKey);
    }

    @Override
    public EntityRow entity(String machine, String entityId) {
      return entities.get(entityId);
    }

    @Override
    public List<LedgerRow> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit) {
      return applied;
    }
  }

  private final MapFacts facts = new MapFacts();
  private final ClaimPreview preview = new ClaimPreview(OrderRoute.ROUTE, OrderRoute.MACHINE, List.of("orders"), facts);

  private ClaimPreview.Preview of(String json) {
    return preview.preview("orders", null, json.getBytes(StandardCharsets.UTF_8), new RecordHeaders(), 1_000);
  }

  private static String order(String event) {
    return "{\"order_id\":\"o-1\",\"event\":\"" + event + "\"}";
  }

  private static String keyOf(String event) {
    return OrderRoute.extracted(OrderRoute.record(0, "o-1", event)).dedupKey();
  }

  private static LedgerRow row(String key, String status, String fingerprint) {
    return new LedgerRow("orders", key, "order_id=o-1", fingerprint, status, "gone", null, "orders", 0, 7, "to_ship", "shipped", 1, null,
        null, 500L);
  }

  @Test
  void newKey_entityInTheFromState_wouldApply() {
    facts.entities.put("o-1", new EntityRow("to_ship", 3, null, null));
    assertThat(of(order("ship")).outcome()).isEqualTo(Outcome.APPLY);
  }

  @Test
  void doneKey_sameContent_isADuplicate_differentContent_aConflict() {
    String fp = OrderRoute.extracted(OrderRoute.record(0, "o-1", "ship")).fingerprint();
    facts.ledger.put(keyOf("ship"), row(keyOf("ship"), "DONE", fp));
    assertThat(of(order("ship"))).extracting(ClaimPreview.Preview::outcome, ClaimPreview.Preview::reason)
        .containsExactly(Outcome.DUPLICATE, Reason.LEDGER_HIT);

    facts.ledger.put(keyOf("ship"), row(keyOf("ship"), "DONE", "other"));
    assertThat(of(order("ship"))).extracting(ClaimPreview.Preview::outcome, ClaimPreview.Preview::reason)
        .containsExactly(Outcome.CONFLICT, Reason.KEY_COLLISION);
  }

  @Test
  void rejectedBefore_wouldApplyFlaggedRedelivery_whenTheEntityAllowsIt() {
    facts.ledger.put(keyOf("ship"), row(keyOf("ship"), "REJECTED", "x"));
    facts.entities.put("o-1", new EntityRow("to_ship", 3, null, null));
    ClaimPreview.Preview p = of(order("ship"));
    assertThat(p.outcome()).isEqualTo(Outcome.APPLY);
    assertThat(p.redelivery()).isTrue();
  }

  @Test
  void machineRefuses_earlyArrivalWaits_alreadyAppliedComparesContent_badRecordIsInvalid() {
    facts.entities.put("o-1", new EntityRow("delivered", 6, null, null));
    assertThat(of(order("cancel"))).extracting(ClaimPreview.Preview::outcome, ClaimPreview.Preview::reason)
        .containsExactly(Outcome.REFUSED, Reason.ILLEGAL_TRANSITION);

    facts.entities.put("o-1", new EntityRow("paid", 2, null, null));
    assertThat(of(order("ship"))).extracting(ClaimPreview.Preview::outcome, ClaimPreview.Preview::reason)
        .containsExactly(Outcome.WAIT, Reason.OUT_OF_ORDER);

    facts.entities.put("o-1", new EntityRow("shipped", 4, null, null));
    facts.applied.add(row("another-key", "DONE", "another fingerprint"));
    assertThat(of(order("ship"))).extracting(ClaimPreview.Preview::outcome, ClaimPreview.Preview::reason)
        .containsExactly(Outcome.CONFLICT, Reason.CONFLICTING_FACT);

    assertThat(of("{\"event\":\"ship\"}")).extracting(ClaimPreview.Preview::outcome, ClaimPreview.Preview::reason)
        .containsExactly(Outcome.INVALID, Reason.MISSING_FIELD);
  }
}
