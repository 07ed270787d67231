package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.SidecarConfig.KafkaConfig;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.utils.Utils;

/**
 * The {@code kafka} mapping, declared and read. {@code kafka.properties} are checked against the
 * Kafka clients' own definitions (type and allowed values), so that a bad value fails here, naming
 * {@code kafka.properties.<key>}, and not later inside a client blamed on something else.
 */
public final class KafkaSettings {
  private KafkaSettings() {}

  static final Section SECTION = Section.of("kafka", "The cluster the routes consume from and escalate to. Required.");
  public static final Setting<String> BOOTSTRAP_SERVERS = SECTION.add(Setting.required("bootstrap-servers",
      SettingType.text("`host:port` list"), "", "the brokers to start from, comma-separated, e.g. `kafka-1:9092,kafka-2:9092`"));
  public static final Setting<Object> PROPERTIES = SECTION.add(Setting.of("properties", SettingType.checkedBySection("mapping of strings"),
      null, "extra client properties (security, SASL, …): each a property of the Kafka consumer, producer or admin client "
          + "with a value those clients accept; OnceGuard keeps manual commits and cooperative-sticky assignment").shownAs("`{}`"));
  public static final Setting<Boolean> CREATE_TOPICS = SECTION.add(Setting.of("create-topics", SettingType.BOOLEAN, false,
      "`run` creates missing escalation and verdict topics at start (partitions as the route's first source topic), never "
          + "source topics; without it a missing one makes `run` exit 4"));

  static KafkaConfig read(NodeReader root) {
    NodeReader k = root.section(SECTION, true);
    String bootstrap = k.get(BOOTSTRAP_SERVERS);
    if (bootstrap != null) {
      for (String server : bootstrap.split(",")) {
        // read as the Kafka clients read it (an optional SECURITY_PROTOCOL:// prefix, [IPv6]:port),
        // without resolving the host: this machine may not know the cluster's names
        String s = server.trim();
        String host = Utils.getHost(s);
        Integer port = Utils.getPort(s);
        if (host == null || host.isEmpty() || port == null || port < 1 || port > 65535) {
          k.fail(BOOTSTRAP_SERVERS, "'" + s + "' is not host:port (port 1 to 65535), e.g. kafka-1:9092,kafka-2:9092");
        }
      }
    }
    Map<String, String> props = k.stringMap(PROPERTIES);
    props.forEach((key, value) -> checkProperty(k, key, value));
    boolean createTopics = k.get(CREATE_TOPICS);
    k.done();
    return new KafkaConfig(bootstrap, props, createTopics);
  }

  /** Checks one {@code kafka.properties} entry the way the Kafka clients parse it: its type and its validator. */
  private static void checkProperty(NodeReader kafka, String key, String value) {
    String at = PROPERTIES.key() + "." + key;
    List<ConfigDef> defs = List.of(ConsumerConfig.configDef(), ProducerConfig.configDef(), AdminClientConfig.configDef());
    boolean known = false;
    for (ConfigDef def : defs) {
      ConfigDef.ConfigKey ck = def.configKeys().get(key);
      if (ck == null) {
        continue;
      }
      known = true;
      try {
        Object parsed = ConfigDef.parseType(key, value, ck.type);
        if (ck.validator != null) {
          ck.validator.ensureValid(key, parsed);
        }
      } catch (org.apache.kafka.common.config.ConfigException e) {
        kafka.fail(at, e.getMessage());
        return;
      }
    }
    if (!known) {
      // A name close to a client property is a typo. Any other unknown name is passed on: the
      // clients hand their configuration to plugins (interceptors, SASL callback handlers, config
      // providers), whose own settings no ConfigDef here knows.
      Set<String> names = new HashSet<>();
      defs.forEach(d -> names.addAll(d.names()));
      String near = Typos.closest(key, names);
      if (near != null) {
        kafka.fail(at, "not a property of the Kafka consumer, producer or admin client (did you mean '" + near + "'?)");
      }
    }
  }
}
