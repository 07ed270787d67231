package dev.onceguard.proxy.config;

import java.util.List;
import java.util.Locale;

/**
 * The configuration reference, {@code docs/configuration.md}, written from the settings'
 * declarations ({@link ConfigReader#SECTIONS}): what the page says a default is, the reader uses.
 * A unit test holds the committed page against {@link #page()}; {@code make config-doc} writes it.
 */
public final class ConfigDoc {
  private ConfigDoc() {}

  /** The command that writes the page again. */
  public static final String REGENERATE = "make config-doc";

  /** The whole page, in markdown. */
  public static String page() {
    return page(ConfigReader.SECTIONS);
  }

  static String page(List<Section> sections) {
    StringBuilder sb = new StringBuilder();
    sb.append("# Configuration\n\n");
    sb.append("<!-- generated from the settings' declarations (proxy/.../config/*Settings.java) by `")
        .append(REGENERATE).append("`; edit those, not this page -->\n\n");
    sb.append("""
        The sidecar reads one YAML file (`onceguard run --config FILE`). Every setting is checked at
        start-up, and every problem of the file is reported at once, each naming its path
        (`routes[0].lease: must be at least 1s`); an unknown key is an error, with the known key it is
        closest to. This page is generated from the declarations the reader uses, so the defaults below
        are the ones the code applies. The full reference pipeline is
        [`examples/order-fulfilment.yaml`](../examples/order-fulfilment.yaml); running and operating the
        sidecar is covered in [operations](operations.md), TLS to MySQL, Redis and Kafka in
        [security](security.md).

        - **References.** In a value, `${NAME}` is the environment variable (start-up stops, naming it,
          when it is not set), `${NAME:-default}` the variable or the default, and `${file:/path}` the
          file's content without one trailing newline (a mounted secret; never printed in a problem).
        - **Durations** are a whole number and a unit: `250ms`, `30s`, `5m`, `2h`, `30d`.
        - **Field sources** say where a value is in a Kafka record: `/json/pointer` (into the value),
          `header:NAME`, `key`, `key:/pointer` (into a JSON key) or `const:VALUE`.

        """);
    for (Section s : sections) {
      sb.append("- [`").append(s.path()).append("`](#").append(anchor(s.path())).append(")\n");
    }
    for (Section s : sections) {
      sb.append("\n## `").append(s.path()).append("`\n\n").append(s.about()).append("\n\n");
      sb.append("| setting | type | default | meaning |\n|---|---|---|---|\n");
      for (Setting<?> setting : s.settings()) {
        sb.append("| `").append(setting.key()).append("` | ").append(cell(setting.type().name())).append(" | ")
            .append(cell(setting.defaultText())).append(" | ").append(cell(setting.doc())).append(" |\n");
      }
    }
    return sb.toString();
  }

  /** The anchor GitHub gives a heading: lower case, punctuation other than {@code -} and {@code _} dropped. */
  static String anchor(String heading) {
    return heading.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9 _-]", "").replace(' ', '-');
  }

  private static String cell(String text) {
    return text.replace("|", "\\|");
  }
}
