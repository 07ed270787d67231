package dev.onceguard.proxy.config;

/**
 * One setting of the sidecar's YAML, declared once: its key, type, default and meaning. The reader
 * takes its value through this declaration ({@link NodeReader#get(Setting)}), and
 * {@code docs/configuration.md} is generated from it ({@link ConfigDoc}), so the default the code
 * uses and the default the page shows are the same object. Declared as constants of the section
 * that holds the setting ({@link Section#add}), e.g. {@link RouteSettings#LEASE}.
 *
 * <p>A new setting is added in one place, its section's class: declare the constant there with
 * {@code SECTION.add(Setting.of(key, type, default, doc))}, read it in that class's {@code read}
 * with {@code n.get(CONSTANT)} into the record that carries the section (a new component of, say,
 * {@link RouteConfig.Delivery}), and run {@code make config-doc} for the reference page. A key that
 * is written in a file but never read is an unknown setting, so a declaration cannot be forgotten
 * on the reading side.
 *
 * @param key the key as written in the YAML, within its section ({@code lease})
 * @param type how the value is written and checked
 * @param defaultValue the value when the key is absent; {@code null} for none
 * @param defaultText the default column of the reference page: {@code required}, a rule such as
 *     {@code onceguard-<name>}, or the default as written in the YAML
 * @param required absent (or blank) is a problem
 * @param doc one sentence: what the setting does
 */
public record Setting<T>(String key, SettingType<T> type, T defaultValue, String defaultText, boolean required, String doc) {

  /** An optional setting whose default is {@code defaultValue} ({@code null}: none). */
  public static <T> Setting<T> of(String key, SettingType<T> type, T defaultValue, String doc) {
    String written = defaultValue == null ? null : type.show(defaultValue);
    String shown = written == null ? "none" : written.isEmpty() ? "empty" : "`" + written + "`";
    return new Setting<>(key, type, defaultValue, shown, false, doc);
  }

  /**
   * A required setting; {@code when} qualifies it ({@code "in push mode"}), or is empty. A
   * qualified requirement depends on other settings, so the section checks it, not the reader.
   */
  public static <T> Setting<T> required(String key, SettingType<T> type, String when, String doc) {
    return new Setting<>(key, type, null, when.isEmpty() ? "required" : "required " + when, when.isEmpty(), doc);
  }

  /**
   * The same setting with {@code text} in the default column: for a default derived from other
   * settings or from the environment (the reader passes the value to {@link NodeReader#get(Setting, Object)}).
   */
  public Setting<T> shownAs(String text) {
    return new Setting<>(key, type, defaultValue, text, required, doc);
  }
}
