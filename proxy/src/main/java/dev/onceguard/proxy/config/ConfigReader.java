package dev.onceguard.proxy.config;

import com.fasterxml.jackson.databind.JsonNode;
import dev.onceguard.proxy.config.SidecarConfig.KafkaConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Reads the sidecar's YAML once and validates all of it, so that a bad setting fails start-up
 * with a message naming its path ({@code routes[0].business-key[2]: ...}). Every problem of the
 * file is reported at once ({@link ConfigException#problems()}), not only the first. Unknown keys
 * are errors too (a typo must not silently fall back to a default), with the known key they are
 * closest to.
 *
 * <p>It only orchestrates: {@link YamlSource} parses the text and expands {@code ${NAME}},
 * {@code ${NAME:-default}} and {@code ${file:/path}} references; each section's settings are
 * declared, with type, default and meaning, by its class ({@link SidecarSettings},
 * {@link KafkaSettings}, {@link MysqlSettings}, {@link RedisSettings}, {@link TracingSettings},
 * {@link MachineSettings}, {@link RouteSettings}, {@link TlsSettings}), which also reads them; this
 * class checks the rules that span sections. What a secret file held never appears in a problem.
 */
public final class ConfigReader {
  /** The sections in the order the reference page ({@code docs/configuration.md}) lists them. */
  public static final List<Section> SECTIONS = List.of(
      SidecarSettings.SECTION, TlsSettings.SERVER, SidecarSettings.AUTH, TracingSettings.SECTION, KafkaSettings.SECTION,
      MysqlSettings.SECTION, RedisSettings.SECTION, MachineSettings.MACHINE, MachineSettings.EVENT, RouteSettings.ROUTE,
      FieldSourceSettings.ITEM, RouteSettings.RETRY, TlsSettings.TARGET);

  private final Map<String, String> env;

  public ConfigReader() {
    this(System.getenv());
  }

  /** For tests: a fixed environment for {@code ${NAME}} expansion. */
  public ConfigReader(Map<String, String> env) {
    this.env = env;
  }

  public SidecarConfig read(Path file) {
    String text;
    try {
      text = Files.readString(file);
    } catch (IOException e) {
      throw new ConfigException("cannot read config file " + file + ": " + e.getMessage(), e);
    }
    return parse(text, file.toString());
  }

  public SidecarConfig parse(String yaml, String sourceName) {
    JsonNode tree = YamlSource.parse(yaml, sourceName);
    Problems problems = new Problems();
    NodeReader root = NodeReader.root(tree, new YamlSource(env, problems), problems);
    SidecarSettings.Process process = SidecarSettings.read(root);
    KafkaConfig kafka = KafkaSettings.read(root);
    MysqlConfig mysql = MysqlSettings.read(root);
    RedisConfig redis = RedisSettings.read(root);
    NodeReader machineSection = root.optionalObject(MachineSettings.MACHINES);
    Map<String, MachineConfig> machines = MachineSettings.read(root, machineSection);
    List<RouteConfig> routes = readRoutes(root, machines, machineSection.keys());
    TracingConfig tracing = TracingSettings.read(root);
    root.done();
    problems.throwIfAny();
    return new SidecarConfig(process.instanceId(), process.grpcListen(), process.metricsListen(), process.adminListen(),
        process.shutdownTimeout(), process.commitInterval(), kafka, mysql, redis, machines, routes, process.logFormat(), tracing,
        process.security());
  }

  private static List<RouteConfig> readRoutes(NodeReader root, Map<String, MachineConfig> machines, List<String> declaredMachines) {
    List<NodeReader> items = root.list(RouteSettings.ROUTE);
    String key = RouteSettings.ROUTE.key();
    if (!root.has(key)) {
      root.missing(key, "at least one route is required");
    } else if (root.raw(key).isEmpty()) {
      root.fail(key, "at least one route is required");
    }
    List<RouteConfig> routes = new ArrayList<>();
    Set<String> names = new HashSet<>();
    Map<String, RouteConfig> firstOfMachine = new HashMap<>();
    for (NodeReader item : items) {
      RouteConfig rc = root.problems().attempt(() -> RouteSettings.read(item, machines, declaredMachines));
      if (rc == null) {
        continue;
      }
      if (!names.add(rc.name())) {
        item.fail(RouteSettings.NAME, "duplicate route name '" + rc.name() + "'");
      }
      checkSameEntityModel(item, rc, firstOfMachine);
      routes.add(rc);
    }
    return List.copyOf(routes);
  }

  /**
   * Routes of one machine share its entities (one {@code og_entity} row per id), so they must
   * build ids from the same number of fields: a route keyed by order and one keyed by line would
   * never meet, and the composite encoding is unambiguous only for a fixed number of fields.
   */
  private static void checkSameEntityModel(NodeReader item, RouteConfig rc, Map<String, RouteConfig> firstOfMachine) {
    if (!rc.hasMachine()) {
      return;
    }
    RouteConfig first = firstOfMachine.putIfAbsent(rc.machine(), rc);
    List<FieldSource> mine = rc.extraction().entityId();
    List<FieldSource> theirs = first == null ? mine : first.extraction().entityId();
    if (theirs.size() != mine.size()) {
      item.fail(RouteSettings.ENTITY_ID, mine.size() + " field(s) " + fieldNames(mine) + ", but route '" + first.name()
          + "' of machine '" + rc.machine() + "' has " + theirs.size() + " " + fieldNames(theirs)
          + "; every route of a machine must identify its entities the same way");
    }
  }

  private static List<String> fieldNames(List<FieldSource> fields) {
    return fields.stream().map(FieldSource::name).toList();
  }
}
