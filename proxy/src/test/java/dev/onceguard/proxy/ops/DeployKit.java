package dev.onceguard.proxy.ops;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import dev.onceguard.proxy.config.ConfigException;
import dev.onceguard.proxy.config.ConfigReader;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The deployment kit as shipped ({@code deploy/Dockerfile}, {@code deploy/k8s/*.yaml}), parsed, and
 * {@link #problems()}: every way in which its files disagree with each other or with the sidecar's
 * configuration as {@link ConfigReader} reads it. The parsed documents are mutable, so that a test
 * can break a freshly loaded kit on purpose.
 */
record DeployKit(String dockerfile, ObjectNode deployment, ObjectNode configMap, ObjectNode secret, ObjectNode podMonitor) {
  /** What the pod's termination grace period must leave beyond the sidecar's drain (the business stops first). */
  static final Duration GRACE_MARGIN = Duration.ofSeconds(10);
  /** Memory the container limit must leave above the maximum heap: metaspace, code cache, stacks, direct buffers. */
  static final long OFF_HEAP_BYTES = 128L << 20;
  /** Readiness runs its MySQL ping and metadata read bounded by 2 s each (Probes.DEFAULT_CHECK_TIMEOUT). */
  static final int MIN_READINESS_TIMEOUT_SECONDS = 3;
  static final String CONFIG_KEY = "onceguard.yaml";

  private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
  private static final ObjectMapper JSON = new ObjectMapper();
  /** {@code ${NAME}} and {@code ${NAME:-default}}, as ConfigReader expands them. */
  private static final Pattern ENV_REF = Pattern.compile("\\$\\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?}");
  private static final Set<String> LOOPBACK = Set.of("127.0.0.1", "localhost", "::1", "[::1]");

  /** The repository's {@code deploy} folder, found from the working directory (the module's) upwards. */
  static Path deployDir() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.isRegularFile(p.resolve("deploy/Dockerfile"))) {
        return p.resolve("deploy");
      }
    }
    throw new AssertionError("deploy/Dockerfile not found above " + Path.of("").toAbsolutePath());
  }

  static DeployKit load(Path deployDir) {
    Path k8s = deployDir.resolve("k8s");
    return new DeployKit(read(deployDir.resolve("Dockerfile")), yaml(k8s.resolve("deployment.yaml")),
        yaml(k8s.resolve("configmap.yaml")), yaml(k8s.resolve("secret.yaml")), yaml(k8s.resolve("podmonitor.yaml")));
  }

  DeployKit withDockerfile(String text) {
    return new DeployKit(text, deployment, configMap, secret, podMonitor);
  }

  /** The sidecar configuration held by the ConfigMap, as text. */
  String configYaml() {
    return configMap.path("data").path(CONFIG_KEY).asText(null);
  }

  void setConfigYaml(String yaml) {
    ((ObjectNode) configMap.get("data")).put(CONFIG_KEY, yaml);
  }

  /** The OnceGuard container of the pod template: the one whose image is {@code onceguard}, wherever it is. */
  ObjectNode sidecar() {
    for (String list : List.of("initContainers", "containers")) {
      for (JsonNode c : podSpec().path(list)) {
        String image = c.path("image").asText("");
        String repo = image.replaceFirst("[:@].*$", "");
        if (repo.equals("onceguard") || repo.endsWith("/onceguard")) {
          return (ObjectNode) c;
        }
      }
    }
    return null;
  }

  /** The ConfigMap's configuration as the sidecar reads it in the pod (with the pod's environment). */
  SidecarConfig config() {
    return new ConfigReader(podEnv(sidecar(), new ArrayList<>())).parse(configYaml(), "configmap.yaml data." + CONFIG_KEY);
  }

  ObjectNode podSpec() {
    return (ObjectNode) deployment.path("spec").path("template").path("spec");
  }

  /** Every disagreement, each a sentence naming the file and the setting; empty when the kit is consistent. */
  List<String> problems() {
    List<String> out = new ArrayList<>();
    Dockerfile docker = Dockerfile.parse(dockerfile);
    ObjectNode sidecar = sidecar();
    if (sidecar == null) {
      out.add("deployment.yaml: no container runs the onceguard image");
      return out;
    }
    checkNativeSidecar(sidecar, out);

    Map<String, String> env = podEnv(sidecar, out);
    String yaml = configYaml();
    if (yaml == null) {
      out.add("configmap.yaml: data." + CONFIG_KEY + " is missing");
      return out;
    }
    checkEnvReferences(yaml, env, out);
    SidecarConfig cfg;
    try {
      cfg = new ConfigReader(env).parse(yaml, "configmap.yaml data." + CONFIG_KEY);
    } catch (ConfigException e) {
      out.add("configmap.yaml: the sidecar rejects its configuration: " + e.getMessage());
      return out;
    }

    int grpcPort = port(cfg.grpcListen());
    if (!LOOPBACK.contains(host(cfg.grpcListen()))) {
      out.add("configmap.yaml: sidecar.grpc-listen " + cfg.grpcListen() + " is not on loopback: the gRPC API has no authentication, keep it inside the pod");
    }
    if (cfg.adminListen() == null) {
      out.add("configmap.yaml: sidecar.admin-listen is not set: the kubelet has nothing to probe");
      return out;
    }
    int adminPort = port(cfg.adminListen());
    if (LOOPBACK.contains(host(cfg.adminListen()))) {
      out.add("configmap.yaml: sidecar.admin-listen " + cfg.adminListen() + " is on loopback: the kubelet and Prometheus reach the pod IP (use 0.0.0.0:PORT)");
    }
    Set<Integer> listenPorts = new TreeSet<>(List.of(grpcPort, adminPort));
    if (cfg.metricsListen() != null) {
      listenPorts.add(port(cfg.metricsListen()));
    }
    for (RouteConfig rc : cfg.routes()) {
      if (rc.delivery().mode() == RouteConfig.Mode.PUSH && !LOOPBACK.contains(host(rc.delivery().target()))) {
        out.add("configmap.yaml: route '" + rc.name() + "' targets " + rc.delivery().target()
            + ", not the business container on loopback in the same pod");
      }
    }

    Map<String, Integer> namedPorts = new LinkedHashMap<>();
    Set<Integer> containerPorts = new TreeSet<>();
    for (JsonNode p : sidecar.path("ports")) {
      containerPorts.add(p.path("containerPort").asInt());
      if (p.hasNonNull("name")) {
        namedPorts.put(p.get("name").asText(), p.path("containerPort").asInt());
      }
    }
    if (!containerPorts.equals(listenPorts)) {
      out.add("deployment.yaml: the onceguard container's ports " + containerPorts + " are not the ports the configuration listens on " + listenPorts);
    }

    checkProbe(sidecar, "startupProbe", "/healthz", adminPort, namedPorts, false, out);
    checkProbe(sidecar, "livenessProbe", "/healthz", adminPort, namedPorts, true, out);
    checkProbe(sidecar, "readinessProbe", "/readyz", adminPort, namedPorts, true, out);
    JsonNode readinessTimeout = sidecar.path("readinessProbe").path("timeoutSeconds");
    if (readinessTimeout.asInt(1) < MIN_READINESS_TIMEOUT_SECONDS) {
      out.add("deployment.yaml: readinessProbe.timeoutSeconds " + readinessTimeout.asInt(1) + " is below " + MIN_READINESS_TIMEOUT_SECONDS
          + " (its MySQL and Kafka checks may take 2 s)");
    }

    // the kubelet's default grace period is 30 s
    long grace = podSpec().path("terminationGracePeriodSeconds").asLong(30);
    Duration needed = cfg.shutdownTimeout().plus(GRACE_MARGIN);
    if (Duration.ofSeconds(grace).compareTo(needed) < 0) {
      out.add("deployment.yaml: terminationGracePeriodSeconds " + grace + " is shorter than sidecar.shutdown-timeout "
          + cfg.shutdownTimeout().toSeconds() + " s + " + GRACE_MARGIN.toSeconds() + " s for the business container to stop first");
    }

    String configPath = checkConfigMount(sidecar, out);
    checkDockerfile(docker, sidecar, configPath, grpcPort, adminPort, out);
    checkMemory(docker, sidecar, out);
    checkScraping(adminPort, namedPorts, out);
    return out;
  }

  private void checkNativeSidecar(ObjectNode sidecar, List<String> out) {
    boolean isInit = false;
    for (JsonNode c : podSpec().path("initContainers")) {
      isInit |= c == sidecar;
    }
    if (!isInit) {
      out.add("deployment.yaml: the onceguard container is not among initContainers: a native sidecar is an init container with restartPolicy: Always");
    } else if (!"Always".equals(sidecar.path("restartPolicy").asText(null))) {
      out.add("deployment.yaml: the onceguard init container lacks restartPolicy: Always (without it the pod waits for it to exit before starting the business)");
    }
    JsonNode selector = deployment.path("spec").path("selector").path("matchLabels");
    if (!labelsMatch(selector, deployment.path("spec").path("template").path("metadata").path("labels"))) {
      out.add("deployment.yaml: spec.selector.matchLabels " + selector + " does not select the pod template's labels");
    }
  }

  /**
   * The environment the sidecar container gets, with each value as Kubernetes would resolve it from
   * the shipped Secret and ConfigMap; references to keys they lack are problems.
   */
  private Map<String, String> podEnv(ObjectNode sidecar, List<String> out) {
    Map<String, String> env = new LinkedHashMap<>();
    for (JsonNode from : sidecar.path("envFrom")) {
      if (from.has("secretRef")) {
        env.putAll(shipped("Secret", from.path("secretRef").path("name").asText(), out));
      } else if (from.has("configMapRef")) {
        env.putAll(shipped("ConfigMap", from.path("configMapRef").path("name").asText(), out));
      }
    }
    for (JsonNode e : sidecar.path("env")) {
      String name = e.path("name").asText();
      JsonNode vf = e.path("valueFrom");
      if (e.has("value")) {
        env.put(name, e.get("value").asText());
      } else if (vf.has("secretKeyRef")) {
        keyRef(name, "Secret", vf.get("secretKeyRef"), env, out);
      } else if (vf.has("configMapKeyRef")) {
        keyRef(name, "ConfigMap", vf.get("configMapKeyRef"), env, out);
      } else if (vf.has("fieldRef")) {
        env.put(name, "field-" + vf.path("fieldRef").path("fieldPath").asText().replace('.', '-'));
      } else {
        env.put(name, "1");
      }
    }
    return env;
  }

  private void keyRef(String var, String kind, JsonNode ref, Map<String, String> env, List<String> out) {
    String name = ref.path("name").asText();
    String key = ref.path("key").asText();
    String value = shipped(kind, name, out).get(key);
    if (value == null) {
      out.add("deployment.yaml: env " + var + " reads key '" + key + "' of " + kind + " '" + name + "', which " + fileOf(kind) + " does not have");
    } else {
      env.put(var, value);
    }
  }

  private Map<String, String> shipped(String kind, String name, List<String> out) {
    ObjectNode doc = kind.equals("Secret") ? secret : configMap;
    if (!name.equals(doc.path("metadata").path("name").asText())) {
      out.add("deployment.yaml: " + kind + " '" + name + "' is not the one in " + fileOf(kind));
      return Map.of();
    }
    Map<String, String> values = new LinkedHashMap<>();
    doc.path("data").fields().forEachRemaining(f -> values.put(f.getKey(), kind.equals("Secret")
        ? new String(Base64.getDecoder().decode(f.getValue().asText()), StandardCharsets.UTF_8) : f.getValue().asText()));
    doc.path("stringData").fields().forEachRemaining(f -> values.put(f.getKey(), f.getValue().asText()));
    return values;
  }

  private static String fileOf(String kind) {
    return kind.equals("Secret") ? "secret.yaml" : "configmap.yaml";
  }

  /**
   * Every {@code ${NAME}} in a value of the configuration must come from the pod, defaults
   * included: a shipped default would hide a Secret key that is missing. Comments are not values.
   */
  private static void checkEnvReferences(String yaml, Map<String, String> env, List<String> out) {
    Set<String> refs = new LinkedHashSet<>();
    try {
      collectRefs(YAML.readTree(yaml), refs);
    } catch (JsonProcessingException e) {
      return; // ConfigReader reports it
    }
    for (String ref : refs) {
      if (!env.containsKey(ref)) {
        out.add("configmap.yaml: ${" + ref + "} is not in the onceguard container's environment (deployment.yaml env or envFrom)");
      }
    }
  }

  private static void collectRefs(JsonNode n, Set<String> refs) {
    if (n.isTextual()) {
      Matcher m = ENV_REF.matcher(n.asText());
      while (m.find()) {
        refs.add(m.group(1));
      }
    }
    for (Iterator<JsonNode> it = n.elements(); it.hasNext(); ) {
      collectRefs(it.next(), refs);
    }
  }

  private static void checkProbe(ObjectNode c, String probe, String path, int adminPort, Map<String, Integer> named, boolean required,
      List<String> out) {
    JsonNode p = c.path(probe);
    if (p.isMissingNode()) {
      if (required) {
        out.add("deployment.yaml: the onceguard container has no " + probe);
      }
      return;
    }
    JsonNode get = p.path("httpGet");
    if (!path.equals(get.path("path").asText(null))) {
      out.add("deployment.yaml: " + probe + " GETs " + get.path("path").asText(null) + ", not " + path);
    }
    JsonNode port = get.path("port");
    Integer resolved = port.isInt() ? Integer.valueOf(port.asInt()) : named.get(port.asText());
    if (resolved == null || resolved != adminPort) {
      out.add("deployment.yaml: " + probe + " port " + port + " (" + resolved + ") is not sidecar.admin-listen's port " + adminPort);
    }
    if (get.has("host")) {
      out.add("deployment.yaml: " + probe + " sets httpGet.host; the kubelet must probe the pod IP");
    }
  }

  /** The {@code --config} path the ConfigMap volume provides in the sidecar, or {@code null}. */
  private String checkConfigMount(ObjectNode sidecar, List<String> out) {
    String cmName = configMap.path("metadata").path("name").asText();
    String volume = null;
    for (JsonNode v : podSpec().path("volumes")) {
      if (cmName.equals(v.path("configMap").path("name").asText(null))) {
        volume = v.path("name").asText();
      }
    }
    if (volume == null) {
      out.add("deployment.yaml: no volume holds ConfigMap '" + cmName + "' (configmap.yaml)");
      return null;
    }
    for (JsonNode m : sidecar.path("volumeMounts")) {
      if (volume.equals(m.path("name").asText())) {
        return m.path("mountPath").asText().replaceFirst("/$", "") + "/" + CONFIG_KEY;
      }
    }
    out.add("deployment.yaml: the onceguard container does not mount volume '" + volume + "' (its configuration)");
    return null;
  }

  private void checkDockerfile(Dockerfile docker, ObjectNode sidecar, String configPath, int grpcPort, int adminPort, List<String> out) {
    if (!docker.last("FROM").matches("\\S+:17\\b.*")) {
      out.add("Dockerfile: FROM " + docker.last("FROM") + " is not a Java 17 image");
    }
    String user = docker.last("USER").split(":")[0];
    if (!user.matches("\\d+") || Integer.parseInt(user) == 0) {
      out.add("Dockerfile: USER '" + docker.last("USER") + "' must be a numeric non-root uid (runAsNonRoot verifies only numbers)");
    }
    String[] copy = docker.last("COPY").split("\\s+");
    if (copy.length != 2 || !copy[0].equals("proxy/target/" + shadedJarName())) {
      out.add("Dockerfile: COPY " + docker.last("COPY") + " does not copy proxy/target/" + shadedJarName() + " (proxy/pom.xml's shaded jar)");
    }
    List<String> entry = docker.execForm("ENTRYPOINT", out);
    if (entry.size() < 3 || !entry.get(0).equals("java") || !entry.get(entry.size() - 2).equals("-jar")
        || copy.length != 2 || !entry.get(entry.size() - 1).equals(copy[1])) {
      out.add("Dockerfile: ENTRYPOINT " + entry + " does not end in java ... -jar <the copied jar>");
    }
    checkRunCommand("Dockerfile: CMD", docker.execForm("CMD", out), configPath, out);
    if (sidecar.has("args")) {
      List<String> args = new ArrayList<>();
      sidecar.get("args").forEach(a -> args.add(a.asText()));
      checkRunCommand("deployment.yaml: args", args, configPath, out);
    }
    Set<Integer> exposed = new TreeSet<>();
    for (String e : docker.all("EXPOSE")) {
      for (String p : e.trim().split("\\s+")) {
        exposed.add(Integer.parseInt(p.replaceFirst("/tcp$", "")));
      }
    }
    if (!exposed.equals(new TreeSet<>(List.of(grpcPort, adminPort)))) {
      out.add("Dockerfile: EXPOSE " + exposed + " is not the gRPC and admin ports " + new TreeSet<>(List.of(grpcPort, adminPort)));
    }
    String check = docker.last("HEALTHCHECK");
    int cmdAt = check.indexOf("CMD");
    String command = cmdAt < 0 ? "" : check.substring(cmdAt + 3).trim();
    if (!command.contains("/healthz") || !Pattern.compile("(?<!\\d)" + adminPort + "(?!\\d)").matcher(command).find()) {
      out.add("Dockerfile: HEALTHCHECK " + command + " does not GET /healthz on the admin port " + adminPort);
    }
  }

  private static void checkRunCommand(String where, List<String> command, String configPath, List<String> out) {
    int i = command.indexOf("--config");
    String path = i < 0 || i + 1 >= command.size() ? null : command.get(i + 1);
    if (command.isEmpty() || !command.get(0).equals("run") || path == null || !path.equals(configPath)) {
      out.add(where + " " + command + " is not run --config " + configPath + " (where the ConfigMap is mounted)");
    }
  }

  /** The container's memory limit must hold the maximum heap and what the JVM needs beside it. */
  private void checkMemory(Dockerfile docker, ObjectNode sidecar, List<String> out) {
    String options = docker.env("JAVA_TOOL_OPTIONS");
    for (JsonNode e : sidecar.path("env")) {
      if (e.path("name").asText().equals("JAVA_TOOL_OPTIONS")) {
        options = e.path("value").asText();
      }
    }
    Matcher xmx = Pattern.compile("-Xmx(\\d+)([kKmMgG]?)").matcher(options == null ? "" : options);
    if (!xmx.find()) {
      out.add("Dockerfile: JAVA_TOOL_OPTIONS sets no -Xmx: the heap would be a share of the limit, not a measured size");
      return;
    }
    long heap = Long.parseLong(xmx.group(1)) << switch (xmx.group(2).toLowerCase()) {
      case "k" -> 10;
      case "m" -> 20;
      case "g" -> 30;
      default -> 0;
    };
    JsonNode resources = sidecar.path("resources");
    String limit = resources.path("limits").path("memory").asText(null);
    String request = resources.path("requests").path("memory").asText(null);
    if (limit == null || request == null) {
      out.add("deployment.yaml: the onceguard container needs a memory request and limit");
      return;
    }
    if (quantity(limit) < heap + OFF_HEAP_BYTES) {
      out.add("deployment.yaml: memory limit " + limit + " leaves less than " + (OFF_HEAP_BYTES >> 20) + " MiB above -Xmx" + xmx.group(1)
          + xmx.group(2) + " for the JVM's other memory");
    }
    if (quantity(request) > quantity(limit)) {
      out.add("deployment.yaml: memory request " + request + " is above the limit " + limit);
    }
  }

  private void checkScraping(int adminPort, Map<String, Integer> named, List<String> out) {
    JsonNode ann = deployment.path("spec").path("template").path("metadata").path("annotations");
    if (ann.has("prometheus.io/port") && ann.get("prometheus.io/port").asInt() != adminPort) {
      out.add("deployment.yaml: annotation prometheus.io/port " + ann.get("prometheus.io/port").asText() + " is not the admin port " + adminPort);
    }
    if (ann.has("prometheus.io/path") && !ann.get("prometheus.io/path").asText().equals("/metrics")) {
      out.add("deployment.yaml: annotation prometheus.io/path is not /metrics");
    }
    if (!labelsMatch(podMonitor.path("spec").path("selector").path("matchLabels"),
        deployment.path("spec").path("template").path("metadata").path("labels"))) {
      out.add("podmonitor.yaml: spec.selector does not select the pod template's labels");
    }
    if (podMonitor.path("spec").path("podMetricsEndpoints").isEmpty()) {
      out.add("podmonitor.yaml: no podMetricsEndpoints");
    }
    for (JsonNode ep : podMonitor.path("spec").path("podMetricsEndpoints")) {
      Integer port = named.get(ep.path("port").asText());
      if (port == null || port != adminPort || !ep.path("path").asText("/metrics").equals("/metrics")) {
        out.add("podmonitor.yaml: endpoint port '" + ep.path("port").asText() + "' path " + ep.path("path").asText("/metrics")
            + " is not /metrics on the admin port " + adminPort);
      }
    }
  }

  private static boolean labelsMatch(JsonNode selector, JsonNode labels) {
    if (!selector.isObject() || selector.isEmpty()) {
      return false;
    }
    for (Iterator<Map.Entry<String, JsonNode>> it = selector.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> f = it.next();
      if (!f.getValue().asText().equals(labels.path(f.getKey()).asText(null))) {
        return false;
      }
    }
    return true;
  }

  private static String shadedJarName() {
    String pom = read(deployDir().resolveSibling("proxy").resolve("pom.xml"));
    Matcher m = Pattern.compile("<outputFile>\\$\\{project\\.build\\.directory}/([^<]+)</outputFile>").matcher(pom);
    return m.find() ? m.group(1) : "(no outputFile in proxy/pom.xml)";
  }

  /** A Kubernetes memory quantity in bytes: {@code 576Mi}, {@code 1Gi}, {@code 500M}, {@code 1000000}. */
  static long quantity(String q) {
    Matcher m = Pattern.compile("(\\d+)(Ki|Mi|Gi|k|M|G)?").matcher(q.trim());
    if (!m.matches()) {
      throw new IllegalArgumentException("not a memory quantity: " + q);
    }
    long n = Long.parseLong(m.group(1));
    return m.group(2) == null ? n : n * switch (m.group(2)) {
      case "Ki" -> 1L << 10;
      case "Mi" -> 1L << 20;
      case "Gi" -> 1L << 30;
      case "k" -> 1_000L;
      case "M" -> 1_000_000L;
      default -> 1_000_000_000L;
    };
  }

  private static String host(String hostPort) {
    return hostPort.substring(0, hostPort.lastIndexOf(':'));
  }

  private static int port(String hostPort) {
    return Integer.parseInt(hostPort.substring(hostPort.lastIndexOf(':') + 1));
  }

  private static String read(Path p) {
    try {
      return Files.readString(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static ObjectNode yaml(Path p) {
    try {
      return (ObjectNode) YAML.readTree(p.toFile());
    } catch (IOException e) {
      throw new UncheckedIOException(p + ": " + e.getMessage(), e);
    }
  }

  /**
   * The instructions of a Dockerfile: comment lines dropped, continuation lines joined. Enough for
   * the instructions this kit uses, not a full parser (no parser directives, no heredocs).
   */
  record Dockerfile(List<Map.Entry<String, String>> instructions) {
    static Dockerfile parse(String text) {
      List<Map.Entry<String, String>> out = new ArrayList<>();
      StringBuilder current = new StringBuilder();
      for (String line : text.split("\n", -1)) {
        String t = line.strip();
        if (t.startsWith("#") || (t.isEmpty() && current.isEmpty())) {
          continue;
        }
        boolean continued = t.endsWith("\\");
        current.append(continued ? t.substring(0, t.length() - 1) : t).append(' ');
        if (!continued) {
          String joined = current.toString().strip();
          int sp = joined.indexOf(' ');
          out.add(Map.entry(joined.substring(0, sp < 0 ? joined.length() : sp).toUpperCase(), sp < 0 ? "" : joined.substring(sp + 1).strip()));
          current.setLength(0);
        }
      }
      return new Dockerfile(out);
    }

    List<String> all(String keyword) {
      return instructions.stream().filter(e -> e.getKey().equals(keyword)).map(Map.Entry::getValue).toList();
    }

    /** The arguments of the last such instruction (the one that counts), or "" when there is none. */
    String last(String keyword) {
      List<String> all = all(keyword);
      return all.isEmpty() ? "" : all.get(all.size() - 1);
    }

    /** The JSON array of an exec-form instruction (a shell form is a problem: signals would reach sh, not java). */
    List<String> execForm(String keyword, List<String> problems) {
      String args = last(keyword);
      List<String> out = new ArrayList<>();
      try {
        JsonNode array = args.startsWith("[") ? JSON.readTree(args) : null;
        if (array != null && array.isArray()) {
          array.forEach(n -> out.add(n.asText()));
          return out;
        }
      } catch (JsonProcessingException e) {
        // reported below
      }
      problems.add("Dockerfile: " + keyword + " " + args + " is not in exec form [\"...\", ...]");
      return out;
    }

    /** The value an {@code ENV NAME="value"} or {@code ENV NAME value} gives, or {@code null}. */
    String env(String name) {
      String value = null;
      for (String e : all("ENV")) {
        Matcher m = Pattern.compile("(?:^|\\s)" + Pattern.quote(name) + "(?:=|\\s+)(\"([^\"]*)\"|(\\S+))").matcher(e);
        if (m.find()) {
          value = m.group(2) != null ? m.group(2) : m.group(3);
        }
      }
      return value;
    }
  }
}
