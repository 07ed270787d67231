package dev.onceguard.proxy.config;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The configuration file as a YAML tree, and the references in its values. {@code ${NAME}} and
 * {@code ${NAME:-default}} are replaced by the environment variable, so that secrets and
 * per-deployment addresses can stay out of the file; {@code ${file:/path}} by the file's content
 * without one trailing newline (a mounted Kubernetes or Docker secret), which is then masked in
 * every problem. One per read; not thread-safe.
 */
final class YamlSource {
  /** {@code ${file:/path}} (group 1) or {@code ${NAME}} / {@code ${NAME:-default}} (groups 2 and 4). */
  private static final Pattern REF = Pattern.compile("\\$\\{(?:file:([^}]*)|([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?)}");

  private final Map<String, String> env;
  private final Problems problems;

  YamlSource(Map<String, String> env, Problems problems) {
    this.env = env;
    this.problems = problems;
  }

  /** The mapping at the root of {@code yaml}; a repeated key or a document that is no mapping is refused. */
  static JsonNode parse(String yaml, String sourceName) {
    JsonNode root;
    try {
      // a repeated key (two 'cancel:' events, two 'routes:') must fail, not let the last one win
      YAMLFactory yamlFactory = YAMLFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
      root = new ObjectMapper(yamlFactory).readTree(yaml);
    } catch (JacksonException e) {
      String line = e.getLocation() == null || e.getLocation().getLineNr() < 1 ? "" : " (line " + e.getLocation().getLineNr() + ")";
      throw new ConfigException(sourceName + ": not valid YAML: " + e.getOriginalMessage() + line, e);
    }
    if (root == null || !root.isObject()) {
      throw new ConfigException(sourceName + ": the configuration must be a YAML mapping");
    }
    return root;
  }

  /** The environment variable {@code name}, or {@code null}. */
  String env(String name) {
    return env.get(name);
  }

  /**
   * {@code s} with its references replaced; {@code null} (reported against {@code path}) when a
   * variable without default is not set or a file cannot be read.
   *
   * @param keepFileRefs leave {@code ${file:...}} as written (Kafka's config providers resolve them)
   */
  String expand(String s, String path, boolean keepFileRefs) {
    Matcher mt = REF.matcher(s);
    StringBuilder sb = new StringBuilder();
    while (mt.find()) {
      String val;
      if (mt.group(1) != null) {
        if (keepFileRefs) {
          val = mt.group();
        } else {
          try {
            val = Secrets.readFile(mt.group(1));
          } catch (Secrets.Unreadable e) {
            problems.add(path + ": " + e.getMessage());
            return null;
          }
          problems.secret(val);
        }
      } else {
        val = env.get(mt.group(2));
        if (val == null) {
          if (mt.group(3) == null) {
            problems.add(path + ": environment variable " + mt.group(2) + " is not set (write ${" + mt.group(2) + ":-default} for a default)");
            return null;
          }
          val = mt.group(4);
        }
      }
      mt.appendReplacement(sb, Matcher.quoteReplacement(val));
    }
    mt.appendTail(sb);
    return sb.toString();
  }
}
