package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class EscalationGroupsTest {
  @Test
  void detailsThatDifferOnlyInIdsAndCoordinates_shareAGroup_otherReasonsOrTextsDoNot() {
    EscalationGroups g = new EscalationGroups();
    String a = g.add("KEY_COLLISION", "dedup key already used by a record with different content (ledger row DONE from orders/0@17)", 5);
    String b = g.add("KEY_COLLISION", "dedup key already used by a record with different content (ledger row DONE from orders/2@9031)", 9);
    String c = g.add("BUSINESS_REJECTED", "dedup key already used by a record with different content (ledger row DONE from orders/0@17)", 7);
    String d = g.add("BUSINESS_REJECTED", "stock for sku 12 is 0", 6);

    assertThat(a).isEqualTo(b).hasSize(8).isNotEqualTo(c);
    assertThat(d).isNotEqualTo(c);
    assertThat(g.groups()).first().satisfies(x -> {
      assertThat(x.id()).isEqualTo(a);
      assertThat(x.count()).isEqualTo(2);
      assertThat(x.firstMs()).isEqualTo(5);
      assertThat(x.lastMs()).isEqualTo(9);
      assertThat(x.pattern()).isEqualTo("dedup key already used by a record with different content (ledger row DONE from <at>)");
    });
    assertThat(EscalationGroups.normalise("stock for sku 12 is 0, key 9f86d081884c7d659a2feaa0c55ad015")).isEqualTo(
        "stock for sku # is #, key <hex>");
  }
}
