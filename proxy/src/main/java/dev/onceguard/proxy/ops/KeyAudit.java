package dev.onceguard.proxy.ops;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.onceguard.proxy.config.FieldSource;
import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.Extraction;
import dev.onceguard.proxy.extract.Extractor;
import dev.onceguard.proxy.guard.ClaimPreview;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.v1.Reason;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/**
 * What a route's extraction (or a candidate business key) would make of records that exist
 * already, before it is deployed: the records that share a key but differ in content (each would
 * be escalated {@code KEY_COLLISION}, the narrow-index incident), with the JSON pointers that tell
 * them apart; the exact duplicates and how late they come; the records whose key fields are
 * missing or blank; and, for a machine route, the events that arrive before their predecessor and
 * the transitions the machine would refuse.
 *
 * <p>Fed the records in topic order; pure (no I/O) and single-threaded. Memory grows with the
 * distinct keys (per key its fingerprint, first coordinates and a 64-bit digest per JSON leaf, so a
 * few hundred bytes for a small record) and, for a machine route, with the entities (their state and
 * a row per applied fact, as the ledger would hold them): a scan of tens of millions of records
 * should be bounded with {@code --from} or {@code --last}. The machine replay is judged by the
 * guard's own policy through {@link ClaimPreview}, the class {@code redrive --dry-run} uses against
 * the real store.
 */
final class KeyAudit {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final RouteConfig route;
  private final Extractor extractor;
  private final MachineConfig machine;
  private final int examples;

  private long records;
  private final Map<String, First> firsts = new HashMap<>();
  private final Set<String> collidingKeys = new HashSet<>();
  private long collisions;
  private final Map<String, Long> differing = new TreeMap<>();
  private final List<CollisionExample> collisionExamples = new ArrayList<>();
  private long duplicates;
  private long[] ages = new long[64];
  private final List<Example> duplicateExamples = new ArrayList<>();
  private long missing;
  private final Map<String, Long> missingByField = new TreeMap<>();
  private final List<Example> missingExamples = new ArrayList<>();
  private final Map<String, Long> unreadable = new TreeMap<>();
  private final List<Example> unreadableExamples = new ArrayList<>();
  private final Replay replay = new Replay();
  private final ClaimPreview guard;
  private final MachineTally tally = new MachineTally();

  /**
   * @param route the route as it would run (its extraction, key and fingerprint rules)
   * @param machine the route's machine, {@code null} for a route without one
   * @param examples how many example coordinates to keep per finding
   */
  KeyAudit(RouteConfig route, MachineConfig machine, int examples) {
    this.route = route;
    this.extractor = new Extractor(route, machine);
    this.machine = machine;
    this.examples = examples;
    this.guard = machine == null ? null : new ClaimPreview(route, machine, List.of(route.name()), replay);
  }

  /** Where a record is: {@code topic/partition@offset}. */
  static String at(ConsumerRecord<byte[], byte[]> r) {
    return r.topic() + "/" + r.partition() + "@" + r.offset();
  }

  /** Audits one record; records come in topic order (per partition, by offset). */
  void add(ConsumerRecord<byte[], byte[]> r) {
    records++;
    Extraction x = extractor.extract(r.key(), r.value(), r.headers());
    if (x instanceof Extraction.Failed f) {
      if (f.reason() == Reason.MISSING_FIELD) {
        missing++;
        missingByField.merge(f.detail(), 1L, Long::sum);
        keep(missingExamples, new Example(at(r), f.detail()));
      } else {
        unreadable.merge(f.reason().name(), 1L, Long::sum);
        keep(unreadableExamples, new Example(at(r), f.reason() + ": " + f.detail()));
      }
      return;
    }
    ExtractedEvent e = ((Extraction.Ok) x).event();
    First first = firsts.get(e.dedupKey());
    if (first == null) {
      firsts.put(e.dedupKey(), new First(e.fingerprint(), at(r), r.timestamp(), leaves(r)));
      if (machine != null) {
        onFact(e, r);
      }
      return;
    }
    if (first.fingerprint().equals(e.fingerprint())) {
      duplicates++;
      if (duplicates > ages.length) {
        ages = Arrays.copyOf(ages, ages.length * 2);
      }
      ages[(int) duplicates - 1] = Math.max(0, r.timestamp() - first.timestamp());
      keep(duplicateExamples, new Example(at(r), "duplicate of " + first.at() + " (" + e.businessKey() + ")"));
      return;
    }
    collisions++;
    collidingKeys.add(e.dedupKey());
    List<String> fields = differingFields(first.leaves(), leaves(r));
    fields.forEach(p -> differing.merge(p, 1L, Long::sum));
    keep(collisionExamples, new CollisionExample(e.businessKey(), first.at(), at(r), fields));
  }

  private <T> void keep(List<T> list, T example) {
    if (list.size() < examples) {
      list.add(example);
    }
  }

  // ------------------------------------------------------------------------ content, by field

  /**
   * A 64-bit digest of every leaf of the content the fingerprint covers, by JSON pointer: the
   * configured {@code fingerprint} fields, or the whole value without {@code fingerprint-exclude}.
   * A value that is not JSON is one leaf, {@code (value)}.
   */
  private Map<String, Long> leaves(ConsumerRecord<byte[], byte[]> r) {
    Map<String, Long> out = new HashMap<>();
    JsonNode value = parse(r.value());
    if (!route.extraction().fingerprint().isEmpty()) {
      for (FieldSource f : route.extraction().fingerprint()) {
        if (f instanceof FieldSource.ValuePointer vp) {
          if (value != null) {
            flatten(value.at(vp.pointer()), vp.pointer(), out);
          }
        } else if (f instanceof FieldSource.Header h) {
          Header last = r.headers().lastHeader(h.header());
          out.put(f.spec(), digest(last == null || last.value() == null ? "\u0000absent" : new String(last.value(), StandardCharsets.UTF_8)));
        } else if (f instanceof FieldSource.Key) {
          out.put(f.spec(), digest(r.key() == null ? "\u0000absent" : new String(r.key(), StandardCharsets.UTF_8)));
        }
      }
      return out;
    }
    if (value == null || !value.isContainerNode()) {
      out.put("(value)", digest(r.value() == null ? "\u0000null" : new String(r.value(), StandardCharsets.ISO_8859_1)));
      return out;
    }
    flatten(value, "", out);
    out.keySet().removeIf(p -> route.extraction().fingerprintExclude().stream().anyMatch(x -> p.equals(x) || p.startsWith(x + "/")));
    return out;
  }

  private static JsonNode parse(byte[] value) {
    if (value == null) {
      return null;
    }
    try {
      return JSON.readTree(value);
    } catch (java.io.IOException e) {
      return null;
    }
  }

  private static void flatten(JsonNode n, String pointer, Map<String, Long> out) {
    if (n.isObject()) {
      for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        flatten(e.getValue(), pointer + "/" + e.getKey().replace("~", "~0").replace("/", "~1"), out);
      }
    } else if (n.isArray()) {
      for (int i = 0; i < n.size(); i++) {
        flatten(n.get(i), pointer + "/" + i, out);
      }
    } else if (!n.isMissingNode()) {
      // interned: the same few pointers repeat in every record
      out.put(pointer.intern(), digest(n.isTextual() ? "s" + n.asText() : n.toString()));
    }
  }

  /** FNV-1a, 64 bits: enough to tell a field's values apart; not a security boundary. */
  private static long digest(String s) {
    long h = 0xcbf29ce484222325L;
    for (int i = 0; i < s.length(); i++) {
      h ^= s.charAt(i);
      h *= 0x100000001b3L;
    }
    return h;
  }

  private static List<String> differingFields(Map<String, Long> a, Map<String, Long> b) {
    TreeSet<String> out = new TreeSet<>();
    for (Map.Entry<String, Long> e : a.entrySet()) {
      if (!e.getValue().equals(b.get(e.getKey()))) {
        out.add(e.getKey());
      }
    }
    for (String k : b.keySet()) {
      if (!a.containsKey(k)) {
        out.add(k);
      }
    }
    return List.copyOf(out);
  }

  // -------------------------------------------------------------------------- machine replay

  /**
   * Replays a new fact (its key seen for the first time, so the ledger lets it through) against
   * the entity's state as the earlier facts left it, judged by the guard's own policy
   * ({@link ClaimPreview}): applied; an early arrival (waits for its predecessor, and is applied
   * when it comes within {@code early-arrival-timeout} by the records' timestamps, else escalated
   * {@code OUT_OF_ORDER}); already applied (a re-send under another key if an applied fact of the
   * entity and event has its fingerprint, else {@code CONFLICTING_FACT}); or refused
   * ({@code ILLEGAL_TRANSITION}).
   */
  private void onFact(ExtractedEvent e, ConsumerRecord<byte[], byte[]> r) {
    EntityRow before = replay.entity(machine.name(), e.entityId());
    ClaimPreview.Preview p = guard.preview(e, r.topic(), r.timestamp());
    switch (p.outcome()) {
      case APPLY -> {
        replay.apply(e, r);
        heal(e.entityId(), r.timestamp());
      }
      case WAIT -> {
        tally.outOfOrder++;
        tally.outOfOrderEntities.add(e.entityId());
        replay.early.computeIfAbsent(e.entityId(), k -> new ArrayList<>()).add(new Early(e, r));
      }
      case DUPLICATE -> tally.alreadyApplied++;
      case CONFLICT -> {
        tally.conflictingFacts++;
        keep(tally.examples, new Example(at(r), p.reason() + ": entity " + e.entityId() + ": " + p.detail()));
      }
      default -> {
        tally.refused.merge("'" + e.event() + "' from '" + (before == null ? "(no entity)" : before.state()) + "'", 1L, Long::sum);
        keep(tally.examples, new Example(at(r), p.reason() + ": entity " + e.entityId() + ": " + p.detail()));
      }
    }
  }

  /** Applies the entity's waiting early arrivals that its new state lets through. */
  private void heal(String entityId, long now) {
    List<Early> waiting = replay.early.getOrDefault(entityId, List.of());
    boolean progress = true;
    while (progress && !waiting.isEmpty()) {
      progress = false;
      for (Iterator<Early> it = waiting.iterator(); it.hasNext(); ) {
        Early x = it.next();
        if (now - x.record().timestamp() > route.timings().earlyArrivalTimeout().toMillis()) {
          it.remove();
          tally.escalatedOutOfOrder++;
          keep(tally.examples, new Example(at(x.record()), "OUT_OF_ORDER: its predecessor came "
              + TtlAdvice.human(now - x.record().timestamp()) + " later, after early-arrival-timeout " + route.timings().earlyArrivalTimeout()));
          progress = true;
        } else if (guard.preview(x.event(), x.record().topic(), now).outcome() == ClaimPreview.Outcome.APPLY) {
          it.remove();
          replay.apply(x.event(), x.record());
          tally.healed++;
          progress = true;
        }
      }
    }
  }

  /**
   * The store as the replayed facts leave it, for {@link ClaimPreview}: the entities' states and
   * the applied facts per entity and event. No ledger row: only a key's first fact is replayed.
   */
  private final class Replay implements ClaimPreview.Facts {
    final Map<String, EntityRow> entities = new HashMap<>();
    /** entity id + NUL + event -> the facts that applied it. */
    final Map<String, List<LedgerRow>> applied = new HashMap<>();
    /** entity id -> its early arrivals, in arrival order. */
    final Map<String, List<Early>> early = new HashMap<>();

    @Override
    public LedgerRow ledgerRow(String route, String dedupKey) {
      return null;
    }

    @Override
    public EntityRow entity(String machine, String entityId) {
      return entities.get(entityId);
    }

    @Override
    public List<LedgerRow> appliedRows(List<String> routes, String entityId, String event, String fingerprint, int limit) {
      return applied.getOrDefault(entityId + "\u0000" + event, List.of());
    }

    void apply(ExtractedEvent e, ConsumerRecord<byte[], byte[]> r) {
      EntityRow was = entities.get(e.entityId());
      String to = machine.events().get(e.event()).to();
      entities.put(e.entityId(), new EntityRow(to, was == null ? 1 : was.version() + 1, null, null));
      applied.computeIfAbsent(e.entityId() + "\u0000" + e.event(), k -> new ArrayList<>()).add(new LedgerRow(route.name(), e.dedupKey(),
          e.businessKey(), e.fingerprint(), "DONE", null, null, r.topic(), r.partition(), r.offset(), was == null ? null : was.state(), to,
          1, null, null, r.timestamp()));
    }
  }

  // ---------------------------------------------------------------------------------- report

  /** The findings so far. */
  Report report() {
    long stillEarly = 0;
    List<Example> machineExamples = new ArrayList<>(tally.examples);
    if (machine != null) {
      for (List<Early> waiting : replay.early.values()) {
        for (Early x : waiting) {
          stillEarly++;
          if (machineExamples.size() < examples) {
            machineExamples.add(new Example(at(x.record()), "OUT_OF_ORDER: '" + x.event().event() + "' waits for "
                + machine.events().get(x.event().event()).from() + ", which never came"));
          }
        }
      }
    }
    long[] a = Arrays.copyOf(ages, (int) duplicates);
    Arrays.sort(a);
    Ages dist = a.length == 0 ? null : new Ages(TtlAdvice.pct(a, 50), TtlAdvice.pct(a, 90), TtlAdvice.pct(a, 99), a[a.length - 1]);
    MachineFindings m = machine == null ? null : new MachineFindings(machine.name(), replay.entities.size(), tally.outOfOrder,
        tally.outOfOrderEntities.size(), tally.healed, tally.escalatedOutOfOrder + stillEarly, tally.alreadyApplied, tally.conflictingFacts,
        new TreeMap<>(tally.refused), List.copyOf(machineExamples));
    return new Report(route.name(), route.extraction().businessKey().stream().map(FieldSource::spec).toList(), route.extraction().fingerprintExclude(), records,
        firsts.size(), new Collisions(collisions, collidingKeys.size(), new TreeMap<>(differing), List.copyOf(collisionExamples)),
        new Duplicates(duplicates, dist, List.copyOf(duplicateExamples)),
        new Missing(missing, new TreeMap<>(missingByField), List.copyOf(missingExamples)),
        new Unreadable(unreadable.values().stream().mapToLong(Long::longValue).sum(), new TreeMap<>(unreadable), List.copyOf(unreadableExamples)),
        m);
  }

  /** Everything {@code audit-key} prints, as text or as JSON. */
  record Report(String route, List<String> businessKey, List<String> fingerprintExclude, long records, long distinctKeys,
      Collisions collisions, Duplicates duplicates, Missing missing, Unreadable unreadable, MachineFindings machine) {

    /** No collision, no missing key field and no conflicting fact: the key tells every fact apart. */
    public boolean sound() {
      return collisions.records() == 0 && missing.records() == 0 && (machine == null || machine.conflictingFacts() == 0);
    }

    String text() {
      StringBuilder sb = new StringBuilder();
      sb.append(String.format(Locale.ROOT, "route '%s', business key %s, fingerprint-exclude %s%n", route, businessKey, fingerprintExclude));
      sb.append(String.format(Locale.ROOT, "%d record(s) read, %d distinct key(s)%n", records, distinctKeys));
      sb.append(String.format(Locale.ROOT, "key collisions: %d record(s) on %d key(s) share a key with a record of different content"
          + " (each would be escalated KEY_COLLISION)%n", collisions.records(), collisions.keys()));
      collisions.differingFields().forEach((p, n) -> sb.append(String.format(Locale.ROOT, "  differing field %s: in %d collision(s)%n", p, n)));
      for (CollisionExample x : collisions.examples()) {
        sb.append(String.format(Locale.ROOT, "  e.g. %s and %s, both %s, differ at %s%n", x.first(), x.other(), x.businessKey(),
            x.differingFields().isEmpty() ? "(the whole value)" : String.join(", ", x.differingFields())));
      }
      sb.append(String.format(Locale.ROOT, "exact duplicates: %d record(s)%s%n", duplicates.records(), duplicates.ages() == null ? ""
          : String.format(Locale.ROOT, ", age after the first copy p50 %s, p90 %s, p99 %s, max %s", TtlAdvice.human(duplicates.ages().p50Ms()),
              TtlAdvice.human(duplicates.ages().p90Ms()), TtlAdvice.human(duplicates.ages().p99Ms()), TtlAdvice.human(duplicates.ages().maxMs()))));
      examples(sb, duplicates.examples());
      sb.append(String.format(Locale.ROOT, "missing or blank key fields: %d record(s) (each would be escalated MISSING_FIELD)%n",
          missing.records()));
      missing.byField().forEach((d, n) -> sb.append(String.format(Locale.ROOT, "  %s: %d%n", d, n)));
      examples(sb, missing.examples());
      if (unreadable.records() > 0) {
        sb.append(String.format(Locale.ROOT, "unreadable: %d record(s) %s (escalated whatever the key)%n", unreadable.records(),
            unreadable.byReason()));
        examples(sb, unreadable.examples());
      }
      if (machine != null) {
        sb.append(String.format(Locale.ROOT, "machine '%s': %d entit(ies); %d event(s) on %d entit(ies) arrived before their predecessor"
                + " (%d healed by waiting, %d would be escalated OUT_OF_ORDER); %d re-sent under another key (ALREADY_APPLIED);"
                + " %d conflicting fact(s) (CONFLICTING_FACT)%n", machine.machine(), machine.entities(), machine.outOfOrder(),
            machine.outOfOrderEntities(), machine.healed(), machine.escalatedOutOfOrder(), machine.alreadyApplied(),
            machine.conflictingFacts()));
        machine.refused().forEach((t, n) -> sb.append(String.format(Locale.ROOT, "  refused by the machine: %s: %d%n", t, n)));
        examples(sb, machine.examples());
      }
      sb.append(sound() ? "verdict: the key is sound on these records\n"
          : "verdict: the key is NOT sound: " + problems() + "\n");
      return sb.toString();
    }

    private String problems() {
      List<String> p = new ArrayList<>();
      if (collisions.records() > 0) {
        p.add("records that differ at " + String.join(", ", collisions.differingFields().keySet())
            + " share a key; add the field(s) that tell them apart to the business key");
      }
      if (missing.records() > 0) {
        p.add("records lack a key field");
      }
      if (machine != null && machine.conflictingFacts() > 0) {
        p.add("distinct facts collide on one entity and event; the entity should be finer");
      }
      return String.join("; ", p);
    }

    private static void examples(StringBuilder sb, List<Example> xs) {
      xs.forEach(x -> sb.append("  e.g. ").append(x.at()).append(": ").append(x.detail()).append('\n'));
    }
  }

  record Collisions(long records, long keys, Map<String, Long> differingFields, List<CollisionExample> examples) {}

  /** Two records under one key; {@code first} is the one the ledger would keep. */
  record CollisionExample(String businessKey, String first, String other, List<String> differingFields) {}

  record Duplicates(long records, Ages ages, List<Example> examples) {}

  /** Ages of exact duplicates after the first copy, by the records' timestamps. */
  record Ages(long p50Ms, long p90Ms, long p99Ms, long maxMs) {}

  record Missing(long records, Map<String, Long> byField, List<Example> examples) {}

  record Unreadable(long records, Map<String, Long> byReason, List<Example> examples) {}

  record MachineFindings(String machine, long entities, long outOfOrder, long outOfOrderEntities, long healed, long escalatedOutOfOrder,
      long alreadyApplied, long conflictingFacts, Map<String, Long> refused, List<Example> examples) {}

  record Example(String at, String detail) {}

  private record First(String fingerprint, String at, long timestamp, Map<String, Long> leaves) {}

  /** A fact waiting for its predecessor. */
  private record Early(ExtractedEvent event, ConsumerRecord<byte[], byte[]> record) {}

  private static final class MachineTally {
    long outOfOrder;
    final Set<String> outOfOrderEntities = new HashSet<>();
    long healed;
    long escalatedOutOfOrder;
    long alreadyApplied;
    long conflictingFacts;
    final Map<String, Long> refused = new HashMap<>();
    final List<Example> examples = new ArrayList<>();
  }
}
