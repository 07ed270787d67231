package dev.onceguard.proxy.config;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Settings whose value is one field source or a list of them ({@code entity-id},
 * {@code business-key}, {@code fingerprint}), read from a route's mapping, and the mapping form of
 * a list item, {@code {name, from}}, declared here.
 */
final class FieldSourceSettings {
  private FieldSourceSettings() {}

  static final Section ITEM = Section.of("routes[].business-key[]",
      "An item of a list of field sources (`entity-id`, `business-key`, `fingerprint`) is a field source, or a mapping "
          + "that also names the field: `{name: wh, from: /warehouse/id}`.");
  static final Setting<String> NAME = ITEM.add(Setting.required("name", SettingType.text("name"), "",
      "the field's name in the canonical key and in logs"));
  static final Setting<String> FROM = ITEM.add(Setting.required("from", SettingType.text("field source"), "",
      "where the field is"));

  /** {@code null} when absent or with a problem (reported). */
  static FieldSource fieldSource(NodeReader n, Setting<FieldSource> setting, boolean required) {
    return fieldSource(n, setting.key(), required);
  }

  private static FieldSource fieldSource(NodeReader n, String key, boolean required) {
    JsonNode v = n.raw(key);
    String s = n.text(key, null);
    if (v == null) {
      if (required) {
        n.missing(key, "required with a machine: where to find it ('/json/pointer', 'header:NAME', 'key' or 'const:VALUE')");
      }
      return null;
    }
    return s == null ? null : n.problems().attempt(() -> FieldSource.parse(s, key, n.path(key)));
  }

  /**
   * One field source, or a list of them as in {@link #fieldSources} (a composite id such as
   * a fulfilment line); empty when absent and not required.
   */
  static List<FieldSource> entityId(NodeReader n, Setting<List<FieldSource>> setting, boolean required) {
    String key = setting.key();
    JsonNode v = n.raw(key);
    List<FieldSource> out;
    if (v == null || v.isValueNode()) {
      FieldSource single = fieldSource(n, key, required);
      out = single == null ? List.of() : List.of(single);
    } else if (v.isArray() && v.isEmpty()) {
      n.fail(key, "must not be empty: one field source, or a list of them");
      out = List.of();
    } else {
      out = fieldSources(n, setting, required);
    }
    rejectEmptyConstants(n, setting, out);
    return out;
  }

  /** An empty {@code const:} in a key makes every record MISSING_FIELD: a start-up error instead. */
  static void rejectEmptyConstants(NodeReader n, Setting<?> setting, List<FieldSource> fields) {
    String key = setting.key();
    JsonNode v = n.raw(key);
    for (FieldSource field : fields) {
      if (field instanceof FieldSource.Constant c && c.value().isBlank()) {
        String p = v != null && v.isArray() ? n.path(key) + "[" + indexOf(v, c) + "]" : n.path(key);
        n.failAt(p, "an empty constant cannot identify anything (every record would be MISSING_FIELD)");
      }
    }
  }

  /** The position in the YAML list of an item (problems may have left others out of the parsed list). */
  private static int indexOf(JsonNode list, FieldSource.Constant c) {
    for (int i = 0; i < list.size(); i++) {
      JsonNode item = list.get(i);
      String spec = item.isTextual() ? item.asText() : item.path(FROM.key()).asText();
      if (spec.equals(c.spec())) {
        return i;
      }
    }
    return 0;
  }

  /** Items are a spec string, or {@code {name: N, from: SPEC}}; items with a problem are left out (reported). */
  static List<FieldSource> fieldSources(NodeReader n, Setting<List<FieldSource>> setting, boolean required) {
    String key = setting.key();
    JsonNode v = n.raw(key);
    if (v == null) {
      if (required) {
        n.missing(key, "required: the business fields that identify one fact, e.g. [/order_id, /sku_id, /warehouse_id]");
      }
      return List.of();
    }
    if (!v.isArray()) {
      n.fail(key, "must be a list");
      return List.of();
    }
    List<FieldSource> out = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (int i = 0; i < v.size(); i++) {
      String p = n.path(key) + "[" + i + "]";
      JsonNode item = v.get(i);
      FieldSource fs = null;
      if (item.isTextual()) {
        String spec = n.expand(item.asText(), key + "[" + i + "]");
        fs = spec == null ? null : n.problems().attempt(() -> FieldSource.parse(spec, null, p));
      } else if (item.isObject()) {
        NodeReader in = n.child(item, p);
        String nm = in.get(NAME);
        String from = in.get(FROM);
        if (nm != null && from != null) {
          fs = n.problems().attempt(() -> FieldSource.parse(from, nm, p));
        }
        in.done();
      } else {
        n.failAt(p, "must be a field source string or {name, from}");
      }
      if (fs == null) {
        continue;
      }
      if (!names.add(fs.name())) {
        n.failAt(p, "duplicate field name '" + fs.name() + "' (give it a distinct 'name')");
        continue;
      }
      out.add(fs);
    }
    if (required && v.isEmpty()) {
      n.fail(key, "must not be empty");
    }
    return out;
  }
}
