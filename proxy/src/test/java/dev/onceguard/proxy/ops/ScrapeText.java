package dev.onceguard.proxy.ops;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Prometheus text format (0.0.4) as a test reads it: the {@code # TYPE} of each family and every
 * sample with its labels. Label values here never contain quotes or commas.
 */
record ScrapeText(Map<String, String> types, List<Sample> samples) {
  private static final Pattern TYPE = Pattern.compile("# TYPE (\\S+) (\\S+)");
  private static final Pattern SAMPLE = Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)})? (\\S+)");
  private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"([^\"]*)\"");

  record Sample(String name, Map<String, String> labels, double value) {}

  static ScrapeText parse(String text) {
    Map<String, String> types = new LinkedHashMap<>();
    List<Sample> samples = new ArrayList<>();
    for (String line : text.split("\n")) {
      Matcher t = TYPE.matcher(line);
      if (t.matches()) {
        types.put(t.group(1), t.group(2));
      } else if (!line.isBlank() && !line.startsWith("#")) {
        Matcher s = SAMPLE.matcher(line);
        if (!s.matches()) {
          throw new AssertionError("not a sample line: " + line);
        }
        Map<String, String> labels = new TreeMap<>();
        if (s.group(2) != null) {
          Matcher l = LABEL.matcher(s.group(2));
          while (l.find()) {
            labels.put(l.group(1), l.group(2));
          }
        }
        samples.add(new Sample(s.group(1), labels, Double.parseDouble(s.group(3))));
      }
    }
    return new ScrapeText(types, samples);
  }

  /** The samples named {@code name}. */
  List<Sample> named(String name) {
    return samples.stream().filter(s -> s.name().equals(name)).toList();
  }

  /** The one sample named {@code name} with exactly these labels ({@code k1, v1, k2, v2, ...}). */
  Sample one(String name, String... labels) {
    Map<String, String> want = new TreeMap<>();
    for (int i = 0; i < labels.length; i += 2) {
      want.put(labels[i], labels[i + 1]);
    }
    List<Sample> found = named(name).stream().filter(s -> s.labels().equals(want)).toList();
    if (found.size() != 1) {
      throw new AssertionError(found.size() + " samples " + name + want + " in: " + named(name));
    }
    return found.get(0);
  }
}
