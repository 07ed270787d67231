package dev.onceguard.proxy.store;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.store.IdempotencyCache.Hit;
import org.junit.jupiter.api.Test;

/** The L1 value: {@code <fingerprint>@<confirmed at>}, or the fingerprint alone from older versions. */
class RedisValueTest {
  @Test
  void parse_sameFingerprint_isAHitWithItsConfirmationTime() {
    assertThat(RedisIdempotencyCache.parse("ab12@1700000000123", "ab12")).isEqualTo(new Hit(1_700_000_000_123L));
  }

  @Test
  void parse_withTheConfirmedSource_isAHitNamingIt() {
    assertThat(RedisIdempotencyCache.parse("ab12@1700000000123#orders/3@41", "ab12")).isEqualTo(new Hit(1_700_000_000_123L, "orders/3@41"));
  }

  @Test
  void parse_fingerprintAlone_isAHitOfUnknownAge() {
    assertThat(RedisIdempotencyCache.parse("ab12", "ab12")).isEqualTo(new Hit(Hit.UNKNOWN_TIME));
  }

  @Test
  void parse_otherContent_orNoValue_isNoHit() {
    assertThat(RedisIdempotencyCache.parse("ab12@1", "ab")).as("a fingerprint that merely starts the same").isNull();
    assertThat(RedisIdempotencyCache.parse("cd34@1", "ab12")).isNull();
    assertThat(RedisIdempotencyCache.parse(null, "ab12")).isNull();
  }
}
