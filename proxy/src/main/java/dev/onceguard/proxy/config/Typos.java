package dev.onceguard.proxy.config;

import java.util.Collection;
import java.util.Locale;

/** The known name that an unknown one is most likely a typo of, for "did you mean" in problems. */
final class Typos {
  private Typos() {}

  /**
   * The name among {@code known} that {@code key} is most likely a typo of (at most two edits,
   * a swap of neighbours counting as one; {@code _} and {@code -} alike), or {@code null}.
   */
  static String closest(String key, Collection<String> known) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    String k = key.toLowerCase(Locale.ROOT).replace('_', '-');
    for (String candidate : known) {
      int d = editDistance(k, candidate.toLowerCase(Locale.ROOT).replace('_', '-'));
      int limit = Math.min(k.length(), candidate.length()) <= 4 ? 1 : 2;
      if (d <= limit && (d < bestDistance || d == bestDistance && candidate.compareTo(best) < 0)) {
        best = candidate;
        bestDistance = d;
      }
    }
    return best;
  }

  /** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
  private static int editDistance(String a, String b) {
    int[][] d = new int[a.length() + 1][b.length() + 1];
    for (int i = 0; i <= a.length(); i++) {
      d[i][0] = i;
    }
    for (int j = 0; j <= b.length(); j++) {
      d[0][j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      for (int j = 1; j <= b.length(); j++) {
        int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
        d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
        if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2) && a.charAt(i - 2) == b.charAt(j - 1)) {
          d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
        }
      }
    }
    return d[a.length()][b.length()];
  }
}
