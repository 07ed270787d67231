package dev.onceguard.proxy.config;

/** The {@code tracing} mapping, declared and read. Off unless an endpoint is set. */
public final class TracingSettings {
  private TracingSettings() {}

  /** The OpenTelemetry standard variable, {@code tracing.otlp-endpoint}'s default. */
  public static final String OTLP_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT";

  static final Section SECTION = Section.of("tracing",
      "Where spans go ([tracing](operations.md#tracing)). Off without an endpoint: no span is made and no SDK class loads.");
  public static final Setting<String> OTLP_ENDPOINT = SECTION.add(Setting.of("otlp-endpoint", SettingType.text("http(s) URL"), null,
      "base URL of an OTLP/HTTP (http/protobuf) receiver, e.g. `http://otel-collector:4318`; spans go to `<endpoint>/v1/traces`, "
          + "`service.name` is `sidecar.instance-id`").shownAs("`$" + OTLP_ENDPOINT_ENV + "`, else none (tracing off)"));
  public static final Setting<Double> SAMPLE_RATIO = SECTION.add(Setting.of("sample-ratio", SettingType.RATIO, 1.0,
      "share of new traces recorded; a record that arrives with a `traceparent` follows its sampled flag"));

  static TracingConfig read(NodeReader root) {
    NodeReader t = root.section(SECTION, false);
    String fromEnv = t.source().env(OTLP_ENDPOINT_ENV);
    boolean inFile = t.has(OTLP_ENDPOINT);
    String endpoint = t.get(OTLP_ENDPOINT, fromEnv == null || fromEnv.isBlank() ? null : fromEnv.trim());
    if (endpoint != null) {
      String problem = otlpEndpointProblem(endpoint);
      if (problem != null) {
        t.fail(OTLP_ENDPOINT, "'" + Secrets.withoutUserInfo(endpoint) + "'" + (inFile ? "" : " (from " + OTLP_ENDPOINT_ENV + ")")
            + " " + problem + ", e.g. http://otel-collector:4318");
        endpoint = null;
      }
    }
    double ratio = t.get(SAMPLE_RATIO);
    t.done();
    return new TracingConfig(endpoint, ratio);
  }

  /** Why {@code endpoint} is not an http(s) base URL with a host; {@code null} when it is. */
  private static String otlpEndpointProblem(String endpoint) {
    try {
      java.net.URI u = new java.net.URI(endpoint);
      if (!"http".equals(u.getScheme()) && !"https".equals(u.getScheme())) {
        return "is not an http:// or https:// URL (OTLP over HTTP, http/protobuf)";
      }
      if (u.getHost() == null || u.getHost().isEmpty()) {
        return "has no host";
      }
      return null;
    } catch (java.net.URISyntaxException e) {
      return "is not a URL (" + e.getReason() + ")";
    }
  }
}
