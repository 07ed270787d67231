package dev.onceguard.proxy.config;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A mapping of the YAML being read, with its path; reads its settings through their
 * {@link Setting declarations} and remembers which keys were read, so that {@link #done} reports
 * the others as unknown, with the known key they are closest to. A setting with a problem records
 * it in the shared {@link Problems} and reads as its default (or {@code null} / empty), so that the
 * rest of the file is still checked. Settings of field sources are read by
 * {@link FieldSourceSettings}. One per mapping and read; not thread-safe.
 */
final class NodeReader {
  private final JsonNode node;
  private final String path;
  private final YamlSource source;
  private final Problems problems;
  /** A section that is missing or not a mapping: that is reported once, not each of its settings. */
  private final boolean broken;
  private final Set<String> used = new HashSet<>();
  /** Unknown keys already reported (as the likely typo of a required one). */
  private final Set<String> reported = new HashSet<>();
  /** {@code ${file:...}} are left as written: Kafka's config providers resolve them. */
  private boolean keepFileRefs;

  private NodeReader(JsonNode node, String path, YamlSource source, Problems problems, boolean broken) {
    this.node = node;
    this.path = path;
    this.source = source;
    this.problems = problems;
    this.broken = broken;
  }

  /** The root mapping of a file. */
  static NodeReader root(JsonNode root, YamlSource source, Problems problems) {
    return new NodeReader(root, "", source, problems, false);
  }

  Problems problems() {
    return problems;
  }

  YamlSource source() {
    return source;
  }

  String path(String key) {
    return path.isEmpty() ? key : path + "." + key;
  }

  /** The mapping is in the file (it may still be broken: not a mapping). */
  boolean present() {
    return node != null;
  }

  /** The mapping is missing although required, or is not a mapping: that is reported already. */
  boolean broken() {
    return broken;
  }

  void fail(Setting<?> setting, String msg) {
    fail(setting.key(), msg);
  }

  void fail(String key, String msg) {
    failAt(path(key), msg);
  }

  void failAt(String fullPath, String msg) {
    problems.add(fullPath + ": " + msg);
  }

  /**
   * A required setting is absent. When the mapping has an unknown key that is a likely typo of
   * it ({@code busines-key}), that key is the problem, reported as unknown with the suggestion.
   */
  void missing(String key, String msg) {
    if (broken) {
      return;
    }
    for (String k : keys()) {
      if (!k.equals(key) && !used.contains(k) && !reported.contains(k) && key.equals(Typos.closest(k, List.of(key)))) {
        reported.add(k);
        fail(k, "unknown setting (did you mean '" + key + "'?)");
        return;
      }
    }
    fail(key, msg);
  }

  void missing(Setting<?> setting, String msg) {
    missing(setting.key(), msg);
  }

  /** The key is present with a value (not YAML null). */
  boolean has(String key) {
    return node != null && node.hasNonNull(key);
  }

  boolean has(Setting<?> setting) {
    return has(setting.key());
  }

  List<String> keys() {
    List<String> ks = new ArrayList<>();
    if (node != null) {
      node.fieldNames().forEachRemaining(ks::add);
    }
    return ks;
  }

  /** The value of {@code key}, marked as read; {@code null} when absent or YAML null. */
  JsonNode raw(String key) {
    used.add(key);
    if (node == null) {
      return null;
    }
    JsonNode v = node.get(key);
    return v == null || v.isNull() ? null : v;
  }

  /** The raw YAML of {@code setting}, marked as read, for checks that look at how it is written. */
  JsonNode raw(Setting<?> setting) {
    return raw(setting.key());
  }

  /** Reports keys nobody read: a typo must not fall back to a default silently. */
  void done() {
    if (node == null) {
      return;
    }
    for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!used.contains(k) && !reported.contains(k)) {
        String near = Typos.closest(k, used);
        fail(k, "unknown setting" + (near == null ? "" : " (did you mean '" + near + "'?)"));
      }
    }
  }

  /** A mapping inside this one (an item of a list), read on its own. */
  NodeReader child(JsonNode v, String childPath) {
    return new NodeReader(v, childPath, source, problems, false);
  }

  private NodeReader brokenChild(String key) {
    return new NodeReader(null, path(key), source, problems, true);
  }

  /** The mapping of {@code section}; when it is missing, that is a problem if {@code required}. */
  NodeReader section(Section section, boolean required) {
    return required ? object(section.key()) : optionalObject(section.key());
  }

  /** A required mapping under a key that is a name of the user's (a machine, an event). */
  NodeReader object(String key) {
    JsonNode v = raw(key);
    if (v == null) {
      missing(key, "required section is missing");
      return brokenChild(key);
    }
    if (!v.isObject()) {
      fail(key, "must be a mapping");
      return brokenChild(key);
    }
    return child(v, path(key));
  }

  /** An optional mapping of names of the user's ({@code machines}); empty when absent. */
  NodeReader optionalObject(String key) {
    JsonNode v = raw(key);
    if (v != null && !v.isObject()) {
      fail(key, "must be a mapping");
      return brokenChild(key);
    }
    return child(v, path(key));
  }

  /** The mappings of the list {@code section} ({@code routes}); an item that is no mapping is reported. */
  List<NodeReader> list(Section section) {
    String key = section.key();
    JsonNode v = raw(key);
    if (v == null) {
      return List.of();
    }
    if (!v.isArray()) {
      fail(key, "must be a list");
      return List.of();
    }
    List<NodeReader> out = new ArrayList<>();
    for (int i = 0; i < v.size(); i++) {
      if (!v.get(i).isObject()) {
        failAt(path(key) + "[" + i + "]", "must be a mapping");
      } else {
        out.add(child(v.get(i), path(key) + "[" + i + "]"));
      }
    }
    return out;
  }

  /** {@code s} with its references expanded, problems reported against {@code key}; {@code null} on a problem. */
  String expand(String s, String key) {
    return source.expand(s, path(key), keepFileRefs);
  }

  /** The value as written (references expanded), or {@code def} when absent; {@code null} when it has a problem (reported). */
  String text(String key, String def) {
    JsonNode v = raw(key);
    if (v == null) {
      return def;
    }
    if (!v.isValueNode()) {
      fail(key, "must be a single value");
      return null;
    }
    return expand(v.asText(), key);
  }

  /** The value of {@code setting}, or its default. */
  <T> T get(Setting<T> setting) {
    return get(setting, setting.defaultValue());
  }

  /**
   * The value of {@code setting}, or {@code def} when it is absent: a default derived from other
   * settings or from the environment, which the setting's {@link Setting#defaultText} describes.
   * A problem (reported) also reads as {@code def}.
   */
  <T> T get(Setting<T> setting, T def) {
    String key = setting.key();
    boolean present = raw(key) != null;
    String s = text(key, null);
    if (!present || setting.required() && s != null && s.isBlank()) {
      if (setting.required()) {
        missing(key, "required");
      }
      return def;
    }
    if (s == null) {
      return def;
    }
    try {
      T v = setting.type().parse(s);
      return v == null ? def : v;
    } catch (SettingType.Invalid e) {
      fail(key, e.getMessage());
      return def;
    }
  }

  /**
   * A string that must be given here although the setting is optional elsewhere (a key file
   * with its certificate); {@code null} (reported) when absent or blank.
   */
  String require(Setting<String> setting) {
    String key = setting.key();
    boolean present = raw(key) != null;
    String s = text(key, null);
    if (!present || s != null && s.isBlank()) {
      missing(key, "required");
      return null;
    }
    return s;
  }

  /** A string that the section checks itself (a file path); {@code null} when absent or with a problem. */
  String string(Setting<String> setting) {
    if (setting.required()) {
      return get(setting);
    }
    return text(setting.key(), setting.defaultValue());
  }

  /** A mapping of strings ({@code kafka.properties}); {@code ${file:...}} are kept when it sets {@code config.providers}. */
  Map<String, String> stringMap(Setting<?> setting) {
    String key = setting.key();
    JsonNode v = raw(key);
    if (v == null) {
      return Map.of();
    }
    if (!v.isObject()) {
      fail(key, "must be a mapping of strings");
      return Map.of();
    }
    Map<String, String> out = new LinkedHashMap<>();
    NodeReader entries = child(v, path(key));
    entries.keepFileRefs = v.has("config.providers");
    for (String k : entries.keys()) {
      String s = entries.text(k, "");
      if (s != null) {
        out.put(k, s);
      }
    }
    return Collections.unmodifiableMap(out);
  }

  /** A list of strings; a single string counts as a list of one. A required one must not be empty. */
  List<String> stringList(Setting<List<String>> setting) {
    String key = setting.key();
    JsonNode v = raw(key);
    if (v == null) {
      if (setting.required()) {
        missing(key, "required (a non-empty list)");
      }
      return List.of();
    }
    if (v.isValueNode()) {
      String s = expand(v.asText(), key);
      return s == null ? List.of() : List.of(s);
    }
    if (!v.isArray()) {
      fail(key, "must be a list");
      return List.of();
    }
    List<String> out = new ArrayList<>();
    for (int i = 0; i < v.size(); i++) {
      if (!v.get(i).isValueNode() || v.get(i).isNull()) {
        failAt(path(key) + "[" + i + "]", "must be a string");
        continue;
      }
      String s = expand(v.get(i).asText(), key + "[" + i + "]");
      if (s != null) {
        out.add(s);
      }
    }
    if (setting.required() && v.isEmpty()) {
      fail(key, "must not be empty");
    }
    return out;
  }
}
