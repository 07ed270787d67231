package dev.onceguard.proxy.extract;

/**
 * Strict UTF-8 and UTF-16 well-formedness checks (RFC 3629, table 3-7 of the Unicode standard),
 * without decoding: a record's bytes are checked once before the JSON parser reads them, and
 * ASCII (most JSON) costs one comparison per byte.
 */
final class Utf8 {
  private Utf8() {}

  /**
   * The index of the first byte that does not belong to a well-formed UTF-8 sequence (a stray
   * continuation, an overlong form, an encoded surrogate, a code point past U+10FFFF, a sequence
   * cut short), or -1 if all of {@code b} is well-formed.
   */
  static int firstInvalid(byte[] b) {
    int i = 0;
    int n = b.length;
    while (i < n) {
      int c = b[i];
      if (c >= 0) {
        i++;
        continue;
      }
      c &= 0xFF;
      int len;
      int lo = 0x80;
      int hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
      } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) {
          lo = 0xA0; // below: overlong
        } else if (c == 0xED) {
          hi = 0x9F; // above: a surrogate
        }
      } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) {
          lo = 0x90; // below: overlong
        } else if (c == 0xF4) {
          hi = 0x8F; // above: past U+10FFFF
        }
      } else {
        return i; // a continuation byte, C0/C1 (always overlong) or F5..FF
      }
      if (i + len > n) {
        return i;
      }
      int second = b[i + 1] & 0xFF;
      if (second < lo || second > hi) {
        return i;
      }
      for (int k = 2; k < len; k++) {
        if ((b[i + k] & 0xC0) != 0x80) {
          return i;
        }
      }
      i += len;
    }
    return -1;
  }

  /** The index of the first high surrogate without a low one after it, or low one without a high one before it; -1 if none. */
  static int firstUnpairedSurrogate(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
          i++;
          continue;
        }
        return i;
      }
      if (Character.isLowSurrogate(c)) {
        return i;
      }
    }
    return -1;
  }
}
