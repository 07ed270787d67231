package dev.onceguard.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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

  @Test
  void anchors_areGithubs() {
    assertThat(ConfigDoc.anchor("routes[].retry")).isEqualTo("routesretry");
    assertThat(ConfigDoc.anchor("machines.<name>.events.<event>")).isEqualTo("machinesnameeventsevent");
  }
}
