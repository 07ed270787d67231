package dev.onceguard.proxy.config;

/**
 * The {@code tracing} section: where spans go. Off unless an OTLP endpoint is set (the setting or
 * the standard {@code OTEL_EXPORTER_OTLP_ENDPOINT}); off, no span is made and no SDK class loads.
 *
 * @param otlpEndpoint base URL of an OTLP/HTTP (http/protobuf) receiver, e.g.
 *     {@code http://otel-collector:4318}; spans are posted to {@code <endpoint>/v1/traces}.
 *     {@code null}: tracing off
 * @param sampleRatio share of new traces recorded, 0 to 1; a record that arrives with a
 *     {@code traceparent} follows its sampled flag instead
 */
public record TracingConfig(String otlpEndpoint, double sampleRatio) {
  /** Tracing off. */
  public static final TracingConfig OFF = new TracingConfig(null, 1.0);

  public boolean enabled() {
    return otlpEndpoint != null;
  }

  @Override
  public String toString() {
    // an endpoint may carry credentials (https://user:token@collector)
    return "TracingConfig[" + (otlpEndpoint == null ? "off" : Secrets.withoutUserInfo(otlpEndpoint)) + ", sample ratio " + sampleRatio + "]";
  }
}
