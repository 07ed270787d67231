package dev.onceguard.proxy.extract;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

class Sha256Test {
  /** FIPS 180-2's test vector for "abc". */
  static final String ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

  static String hex(String s) {
    return HexFormat.of().formatHex(Sha256.of(s.getBytes(StandardCharsets.UTF_8)));
  }

  @Test
  void theThreadsInstance_isResetByEachDigest_andGivesTheStandardValue() {
    assertThat(hex("abc")).isEqualTo(ABC);
    assertThat(hex("something else")).isNotEqualTo(ABC);
    assertThat(hex("abc")).as("after another digest on the same thread").isEqualTo(ABC);
    assertThat(Extractor.sha256("abc".getBytes(StandardCharsets.UTF_8))).isEqualTo(ABC);
  }

  @Test
  void anotherThread_getsTheSameValue() throws Exception {
    assertThat(CompletableFuture.supplyAsync(() -> hex("abc")).get()).isEqualTo(ABC);
  }
}
