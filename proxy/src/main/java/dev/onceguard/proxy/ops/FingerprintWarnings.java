package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.FieldSource;
import dev.onceguard.proxy.config.RouteConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * Fingerprint settings that are valid but defeat what the fingerprint is for, printed by
 * {@code validate}. The fingerprint tells two facts apart when their keys say they are one: under
 * one dedup key (a difference is {@code KEY_COLLISION}), and for one entity and event under
 * different keys (a difference is {@code CONFLICTING_FACT}; a match is a re-send, ignored as
 * {@code ALREADY_APPLIED}). A fingerprint that leaves out a key or entity field makes two facts
 * that differ only there look like one re-send: the second one is dropped, never escalated.
 */
final class FingerprintWarnings {
  private FingerprintWarnings() {}

  static List<String> of(RouteConfig r) {
    List<String> out = new ArrayList<>();
    List<FieldSource> keyFields = new ArrayList<>(r.extraction().businessKey());
    keyFields.addAll(r.extraction().entityId());
    if (r.extraction().fingerprint().isEmpty()) {
      for (String x : r.extraction().fingerprintExclude()) {
        for (FieldSource f : keyFields) {
          if (f instanceof FieldSource.ValuePointer vp && (vp.pointer().equals(x) || vp.pointer().startsWith(x + "/"))) {
            out.add("route '" + r.name() + "': fingerprint-exclude '" + x + "' removes " + (r.extraction().businessKey().contains(f) ? "business-key"
                : "entity-id") + " field '" + f.name() + "' (" + f.spec() + ") from the fingerprint: two records of one entity and event"
                + " that differ only there fingerprint alike, so the second is ignored as a re-send (ALREADY_APPLIED) instead of"
                + " escalated (CONFLICTING_FACT)");
          }
        }
      }
      return out;
    }
    List<FieldSource> identifying = new ArrayList<>(keyFields);
    if (r.extraction().event() != null) {
      identifying.add(r.extraction().event());
    }
    boolean onlyIdentity = r.extraction().fingerprint().stream()
        .allMatch(f -> f instanceof FieldSource.Constant || identifying.stream().anyMatch(k -> k.spec().equals(f.spec())));
    if (onlyIdentity) {
      out.add("route '" + r.name() + "': fingerprint " + r.extraction().fingerprint().stream().map(FieldSource::spec).toList() + " holds only fields"
          + " of the business key, the entity id or the event: it tells no two facts of one key or one entity and event apart, so a"
          + " different record under the same key is ignored as a duplicate instead of escalated (KEY_COLLISION); add the fields"
          + " that carry the fact (quantity, warehouse, amount), or drop 'fingerprint' to use the whole value");
    }
    return out;
  }
}
