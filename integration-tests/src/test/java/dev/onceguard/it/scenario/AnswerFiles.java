package dev.onceguard.it.scenario;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the experiments of {@code make answers} share: their fragment of docs/answers.md written to
 * the path a system property names, the machine's load average for the page, and a counter read
 * from a sidecar's Prometheus scrape.
 */
final class AnswerFiles {
  private AnswerFiles() {}

  /** Writes {@code md} to the path in system property {@code property}; nothing if it is unset. */
  static void write(String property, String md) throws IOException {
    String out = System.getProperty(property);
    if (out != null) {
      Path p = Path.of(out).toAbsolutePath();
      Files.createDirectories(p.getParent());
      Files.writeString(p, md);
    }
  }

  /** The 1, 5 and 15 minute load averages as "a / b / c", or "unknown". */
  static String loadAverage() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
      return f[0] + " / " + f[1] + " / " + f[2];
    } catch (IOException e) {
      return "unknown";
    }
  }

  /** The sum of a counter's samples in a Prometheus scrape, over its labels; -1 if it has none. */
  static long sum(String scrape, String name) {
    double total = 0;
    boolean found = false;
    Matcher m = Pattern.compile("(?m)^" + Pattern.quote(name) + "(\\{[^}]*\\})? ([0-9.eE+-]+)$").matcher(scrape);
    while (m.find()) {
      total += Double.parseDouble(m.group(2));
      found = true;
    }
    return found ? Math.round(total) : -1;
  }
}
