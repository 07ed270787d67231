package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.ConfigException;
import dev.onceguard.proxy.config.FieldSource;
import dev.onceguard.proxy.config.RouteConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * A route as configured, with a candidate business key or fingerprint exclusion given on the
 * command line in its place: what {@code audit-key} tries before the configuration is changed.
 * The candidate fields are parsed like the configuration's, so an error names the option and the
 * position ({@code --business-key[1]: 'sku_id' is not a field source}).
 */
final class CandidateKey {
  private CandidateKey() {}

  /**
   * {@code route} with {@code businessKey} and {@code fingerprintExclude} replaced where given
   * ({@code null} keeps the route's own).
   *
   * @throws ConfigException naming the option and the position of a bad field
   */
  static RouteConfig apply(RouteConfig route, List<String> businessKey, List<String> fingerprintExclude) {
    RouteConfig.Extraction x = route.extraction();
    List<FieldSource> key = x.businessKey();
    if (businessKey != null) {
      key = new ArrayList<>();
      for (int i = 0; i < businessKey.size(); i++) {
        key.add(FieldSource.parse(businessKey.get(i).strip(), null, "--business-key[" + i + "]"));
      }
      if (key.isEmpty()) {
        throw new ConfigException("--business-key: give at least one field");
      }
    }
    List<String> exclude = x.fingerprintExclude();
    if (fingerprintExclude != null) {
      exclude = new ArrayList<>();
      for (int i = 0; i < fingerprintExclude.size(); i++) {
        String p = fingerprintExclude.get(i).strip();
        if (!(FieldSource.parse(p, null, "--fingerprint-exclude[" + i + "]") instanceof FieldSource.ValuePointer)) {
          throw new ConfigException("--fingerprint-exclude[" + i + "]: '" + p + "' is not a JSON pointer into the value");
        }
        exclude.add(p);
      }
    }
    RouteConfig.Extraction candidate = new RouteConfig.Extraction(x.entityId(), x.event(), List.copyOf(key), x.fingerprint(),
        List.copyOf(exclude));
    return new RouteConfig(route.name(), route.machine(), route.intake(), candidate, route.delivery(), route.timings(), route.outputs());
  }
}
