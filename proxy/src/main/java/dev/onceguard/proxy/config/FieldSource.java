package dev.onceguard.proxy.config;

/**
 * Where a value comes from in a Kafka record. Written in YAML as one string:
 * <ul>
 *   <li>{@code /order_id} — a JSON pointer into the record value (which must then be JSON);</li>
 *   <li>{@code header:event-type} — a record header, read as UTF-8;</li>
 *   <li>{@code key} — the record key as UTF-8, or {@code key:/id} — a JSON pointer into a JSON key;</li>
 *   <li>{@code const:ship} — a constant.</li>
 * </ul>
 */
public sealed interface FieldSource {
  /** Short name used in the canonical business key and in logs (e.g. {@code order_id}). */
  String name();

  /** The spec as written in the configuration. */
  String spec();

  record ValuePointer(String name, String pointer) implements FieldSource {
    @Override
    public String spec() {
      return pointer;
    }
  }

  record Header(String name, String header) implements FieldSource {
    @Override
    public String spec() {
      return "header:" + header;
    }
  }

  /** {@code pointer} is empty for the whole key. */
  record Key(String name, String pointer) implements FieldSource {
    @Override
    public String spec() {
      return pointer.isEmpty() ? "key" : "key:" + pointer;
    }
  }

  record Constant(String name, String value) implements FieldSource {
    @Override
    public String spec() {
      return "const:" + value;
    }
  }

  /**
   * Parses one spec. {@code explicitName} (may be null) overrides the derived name.
   *
   * @throws ConfigException naming {@code path}
   */
  static FieldSource parse(String spec, String explicitName, String path) {
    if (spec == null || spec.isBlank()) {
      throw new ConfigException(path + ": empty field source; use '/json/pointer', 'header:NAME', 'key', 'key:/pointer' or 'const:VALUE'");
    }
    if (spec.startsWith("/")) {
      checkPointer(spec, path);
      return new ValuePointer(nameOr(explicitName, lastSegment(spec)), spec);
    }
    if (spec.startsWith("header:")) {
      String h = spec.substring("header:".length());
      if (h.isEmpty()) {
        throw new ConfigException(path + ": 'header:' needs a header name");
      }
      return new Header(nameOr(explicitName, h), h);
    }
    if (spec.equals("key")) {
      return new Key(nameOr(explicitName, "key"), "");
    }
    if (spec.startsWith("key:")) {
      String p = spec.substring("key:".length());
      checkPointer(p, path);
      return new Key(nameOr(explicitName, lastSegment(p)), p);
    }
    if (spec.startsWith("const:")) {
      return new Constant(nameOr(explicitName, "const"), spec.substring("const:".length()));
    }
    throw new ConfigException(path + ": '" + spec + "' is not a field source; use '/json/pointer', 'header:NAME', 'key', 'key:/pointer' or 'const:VALUE'");
  }

  private static void checkPointer(String p, String path) {
    if (!p.startsWith("/") || p.length() < 2) {
      throw new ConfigException(path + ": '" + p + "' is not a JSON pointer (it must start with '/' and name a field)");
    }
    for (int i = 0; i < p.length(); i++) {
      if (p.charAt(i) == '~' && (i + 1 >= p.length() || (p.charAt(i + 1) != '0' && p.charAt(i + 1) != '1'))) {
        throw new ConfigException(path + ": '" + p + "' is not a JSON pointer ('~' must be followed by 0 or 1)");
      }
    }
  }

  private static String lastSegment(String pointer) {
    String s = pointer.substring(pointer.lastIndexOf('/') + 1);
    return s.replace("~1", "/").replace("~0", "~");
  }

  private static String nameOr(String explicit, String derived) {
    return explicit != null && !explicit.isBlank() ? explicit : derived;
  }
}
