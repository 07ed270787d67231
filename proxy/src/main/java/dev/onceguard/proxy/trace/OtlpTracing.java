package dev.onceguard.proxy.trace;

import dev.onceguard.proxy.config.TracingConfig;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The OpenTelemetry SDK with an OTLP/HTTP (http/protobuf) span exporter, built only when
 * {@code tracing.otlp-endpoint} is set: it is the one class that names SDK types, so that a sidecar
 * with tracing off never loads them. Spans are batched (the SDK's batch processor: a bounded queue,
 * dropped spans when the collector cannot keep up, never a blocked record). The exporter uses the
 * JDK's HTTP client.
 */
final class OtlpTracing {
  private static final Logger log = LoggerFactory.getLogger(OtlpTracing.class);
  private static final AttributeKey<String> SERVICE_NAME = AttributeKey.stringKey("service.name");

  private OtlpTracing() {}

  static Tracing start(TracingConfig config, String serviceName) {
    String url = config.otlpEndpoint().replaceAll("/+$", "") + "/v1/traces";
    OtlpHttpSpanExporter exporter = OtlpHttpSpanExporter.builder().setEndpoint(url).build();
    SdkTracerProvider provider = SdkTracerProvider.builder()
        .setResource(Resource.getDefault().toBuilder().put(SERVICE_NAME, serviceName).build())
        // a record that comes with a traceparent follows the caller's sampling decision
        .setSampler(Sampler.parentBased(Sampler.traceIdRatioBased(config.sampleRatio())))
        .addSpanProcessor(BatchSpanProcessor.builder(exporter).build())
        .build();
    log.info("tracing on: spans to {} (OTLP http/protobuf), service.name {}, sample ratio {}",
        dev.onceguard.proxy.config.Secrets.withoutUserInfo(url), serviceName,
        config.sampleRatio());
    return new Tracing(provider.get(Tracing.SCOPE), () -> provider.shutdown().join(5, TimeUnit.SECONDS));
  }
}
