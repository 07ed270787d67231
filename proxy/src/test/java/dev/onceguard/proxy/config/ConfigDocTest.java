package dev.onceguard.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code docs/configuration.md} is what the settings' declarations generate, and every declared
 * section is on it. With {@code -Dconfig.write-doc=true} ({@code make config-doc}) the page is
 * written first.
 */
class ConfigDocTest {
  private static final Path DOC = Path.of("..", "docs", "configuration.md");

  @Test
  void committedPage_isWhatTheDeclarationsGenerate() throws IOException {
    String page = ConfigDoc.page();
    if (Boolean.getBoolean("config.write-doc")) {
      Files.writeString(DOC, page);
    }
    assertThat(Files.exists(DOC)).as("docs/configuration.md exists (write it with `%s`)", ConfigDoc.REGENERATE).isTrue();
    assertThat(Files.readString(DOC))
        .as("docs/configuration.md differs from the settings' declarations: regenerate it with `%s`", ConfigDoc.REGENERATE)
        .isEqualTo(page);
  }

  @Test
  void everyDeclaredSection_isOnThePage() throws Exception {
    List<Section> declared = new ArrayList<>();
    Path classes = Path.of(ConfigReader.class.getProtectionDomain().getCodeSource().getLocation().toURI())
        .resolve(ConfigReader.class.getPackageName().replace('.', '/'));
    try (Stream<Path> files = Files.list(classes)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".class")).toList()) {
        String name = f.getFileName().toString().replace(".class", "");
        Class<?> type = Class.forName(ConfigReader.class.getPackageName() + "." + name);
        for (Field field : type.getDeclaredFields()) {
          if (Modifier.isStatic(field.getModifiers()) && field.getType() == Section.class) {
            field.setAccessible(true);
            declared.add((Section) field.get(null));
          }
        }
      }
    }
    assertThat(declared).isNotEmpty();
    assertThat(ConfigReader.SECTIONS).as("ConfigReader.SECTIONS lists every declared section").containsAll(declared);
  }

  @Test
  void defaultsOnThePage_areTheValuesTheReaderApplies() {
    SidecarConfig c = new ConfigReader(java.util.Map.of()).parse("""
        kafka: {bootstrap-servers: k:9092}
        mysql: {database: og}
        routes: [{name: r, topics: [t], business-key: [/id], target: 127.0.0.1:7000}]
        """, "minimal.yaml");
    RouteConfig r = c.routes().get(0);
    assertThat(r.timings().lease()).isEqualTo(RouteSettings.LEASE.defaultValue());
    assertThat(r.delivery().retry().maxAttempts()).isEqualTo(RouteSettings.MAX_ATTEMPTS.defaultValue());
    assertThat(c.mysql().poolSize()).isEqualTo(MysqlSettings.POOL_SIZE.defaultValue());
    assertThat(c.redis().timeout()).isEqualTo(RedisSettings.TIMEOUT.defaultValue());
    assertThat(ConfigDoc.page()).contains("| `lease` | duration, at least 1s | `30s` |", "| `pool-size` | integer, 1 to 256 | `8` |");
  }

  /**
   * The other direction: every declared setting is read, so none is on the page but refused as an
   * unknown key. Each is written, alone, into a minimal file at its section's place; whatever
   * else its value causes, no problem may call it unknown.
   */
  @Test
  void everyDeclaredSetting_isReadWhereThePageSaysItIs() throws Exception {
    List<String> unknown = new ArrayList<>();
    for (Section section : ConfigReader.SECTIONS) {
      for (Setting<?> setting : section.settings()) {
        Map<String, Object> root = minimal();
        Map<String, Object> at = root;
        for (String segment : section.path().split("\\.")) {
          at = place(at, segment);
        }
        at.put(setting.key(), "x");
        String yaml = new ObjectMapper(new YAMLFactory()).writeValueAsString(root);
        try {
          new ConfigReader(Map.of()).parse(yaml, "one-setting.yaml");
        } catch (ConfigException e) {
          e.problems().stream().filter(p -> p.contains("unknown setting"))
              .forEach(p -> unknown.add(section.path() + " " + setting.key() + ": " + p));
        }
      }
    }
    assertThat(unknown).as("declared settings the reader refuses as unknown").isEmpty();
  }

  private static Map<String, Object> minimal() {
    Map<String, Object> route = new LinkedHashMap<>(Map.of("name", "r", "topics", List.of("t"), "target", "127.0.0.1:7000"));
    route.put("business-key", new ArrayList<>(List.of(new LinkedHashMap<>(Map.of("name", "id", "from", "/id")))));
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("kafka", new LinkedHashMap<>(Map.of("bootstrap-servers", "k:9092")));
    root.put("mysql", new LinkedHashMap<>(Map.of("database", "og")));
    root.put("routes", new ArrayList<>(List.of(route)));
    return root;
  }

  /** The mapping at {@code segment} of {@code parent} ({@code tls}, {@code <name>}, {@code routes[]}), made when missing. */
  @SuppressWarnings("unchecked")
  private static Map<String, Object> place(Map<String, Object> parent, String segment) {
    if (segment.endsWith("[]")) {
      List<Object> list = (List<Object>) parent.computeIfAbsent(segment.substring(0, segment.length() - 2), k -> new ArrayList<>());
      if (list.isEmpty() || !(list.get(0) instanceof Map)) {
        list.add(0, new LinkedHashMap<String, Object>());
      }
      return (Map<String, Object>) list.get(0);
    }
    String key = segment.startsWith("<") ? segment.substring(1, segment.length() - 1) : segment;
    return (Map<String, Object>) parent.computeIfAbsent(key, k -> new LinkedHashMap<String, Object>());
  }

  @Test
  void anchors_areGithubs() {
    assertThat(ConfigDoc.anchor("routes[].retry")).isEqualTo("routesretry");
    assertThat(ConfigDoc.anchor("machines.<name>.events.<event>")).isEqualTo("machinesnameeventsevent");
  }
}
