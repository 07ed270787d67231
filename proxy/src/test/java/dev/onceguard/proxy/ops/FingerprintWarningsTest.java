package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.TestConfigs;
import org.junit.jupiter.api.Test;

class FingerprintWarningsTest {
  @Test
  void excludingABusinessKeyField_warnsNamingIt() {
    var r = TestConfigs.oneRoute("fingerprint-exclude: [/message_id, /order_id]", "").routes().get(0);
    assertThat(FingerprintWarnings.of(r)).singleElement().asString()
        .contains("fingerprint-exclude '/order_id' removes business-key field 'order_id'").contains("CONFLICTING_FACT");
  }

  @Test
  void fingerprintOfKeyFieldsOnly_warnsThatItTellsNoFactsApart() {
    var r = TestConfigs.oneRoute("fingerprint: [/order_id]", "").routes().get(0);
    assertThat(FingerprintWarnings.of(r)).singleElement().asString().contains("tells no two facts");
  }

  @Test
  void soundSettings_noWarning() {
    assertThat(FingerprintWarnings.of(TestConfigs.oneRoute("fingerprint-exclude: [/message_id]", "").routes().get(0))).isEmpty();
    assertThat(FingerprintWarnings.of(TestConfigs.oneRoute("fingerprint: [/order_id, /qty]", "").routes().get(0))).isEmpty();
  }
}
