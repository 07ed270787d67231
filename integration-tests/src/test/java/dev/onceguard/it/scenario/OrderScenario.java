package dev.onceguard.it.scenario;

import dev.onceguard.v1.Reason;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * The order-fulfilment scenario of issue 4, as data: the lines (entities), the records to
 * produce in waves, and what must come of each record. Deterministic for a seed; immutable once
 * built.
 *
 * <h2>Model</h2>
 * An entity is one fulfilment line, {@code line_id = order_id + "/" + warehouse_id}: a
 * cross-warehouse order is two legitimate entities sharing order, sku and batch. Machine
 * {@code line}: create → created, pay: created→paid, prepare: paid→to_ship, ship: to_ship→shipped,
 * deliver: shipped→delivered, cancel: created|paid|to_ship→cancelled. One route (topic + consumer
 * group) per transition node: create, pay, prepare, ship, deliver; a cancel travels on the topic of
 * the node where the line stops (pay, prepare or ship), as in the reference pipeline where each
 * node's producer also emits cancellations.
 *
 * <h2>Keys and fingerprints</h2>
 * Every route keys on {@code order_id, sku_id, warehouse_id, batch_no} (plus the event) and
 * fingerprints the whole value except {@code message_id} and {@code sent_at}. The deliver route
 * also puts {@code message_id} into its key ({@link #MESSAGE_ID_IN_KEY}), as an operator does whose
 * upstream cannot tell its own re-sends apart otherwise: there a re-send with a new message id has
 * a new dedup key but the same fingerprint, so only the state machine sees it, and it is a true
 * re-send (ALREADY_APPLIED). On the other routes a record with another batch number is another
 * fact (its fingerprint differs): when its transition was already applied by the first batch, it
 * is a distinct fact the line entity cannot hold (CONFLICTING_FACT, escalated).
 *
 * <h2>Waves</h2>
 * One wave per node; the driver produces a wave once the previous one's transitions were all
 * delivered, so that legitimate early arrivals stay short. The L1 cache is wiped before the
 * prepare wave; that wave also carries late compensation re-sends of create/pay records.
 *
 * <p>With {@link Settings#concurrentStages()} there is a single wave instead: every line runs the
 * whole pipeline (create … deliver, with the same duplicate copies), and each route's records form
 * one independent stream in a line order of its own (shuffled within a window), which the driver
 * produces concurrently with the other routes' streams; cross-group order is then not given by
 * construction, and the guard's early-arrival waits must restore machine order. Only order-independent outcomes are planned there
 * (no cancels, illegal or distinct facts: which of two racing records wins would be chance).
 *
 * <h2>Injected faults</h2>
 * On every accepted fact: exact duplicates (same bytes, same message id), re-sends with a new
 * message id, copies on another partition (on the deliver route a new message id is a new dedup key:
 * a true re-send caught by the state machine, ALREADY_APPLIED); late re-sends after the Redis keys
 * are gone; distinct facts (a second "pay" with another batch number after the line moved on: a
 * different dedup key and a different fingerprint, escalated as CONFLICTING_FACT, never ignored);
 * "deliver before ship" that heals; "deliver" for lines that
 * never ship (OUT_OF_ORDER); illegal transitions (prepare/ship/deliver after cancel, cancel after
 * ship: ILLEGAL_TRANSITION); and, optionally, records the business rejects (BUSINESS_REJECTED).
 */
public final class OrderScenario {
  public static final String MACHINE = "line";
  /** Route names, in machine order; each is also the event its topic mainly carries. */
  public static final List<String> ROUTES = List.of("create", "pay", "prepare", "ship", "deliver");
  /** The deliver route's early-arrival timeout: never-shipped lines escalate after it. */
  public static final String DELIVER_EARLY_ARRIVAL_TIMEOUT = "10s";
  /** Routes whose business key also holds {@code /message_id} (which the fingerprint excludes). */
  public static final Set<String> MESSAGE_ID_IN_KEY = Set.of("deliver");

  /** Target state of each event. */
  public static final Map<String, String> TO = Map.of(
      "create", "created", "pay", "paid", "prepare", "to_ship", "ship", "shipped", "deliver", "delivered", "cancel", "cancelled");

  public static final String MACHINE_YAML = """
      machines:
        line:
          states: [created, paid, to_ship, shipped, delivered, cancelled]
          terminal: [delivered, cancelled]
          events:
            create:  {to: created}
            pay:     {from: [created], to: paid}
            prepare: {from: [paid], to: to_ship}
            ship:    {from: [to_ship], to: shipped}
            deliver: {from: [shipped], to: delivered}
            cancel:  {from: [created, paid, to_ship], to: cancelled}
      """;

  /** What becomes of a line. */
  public enum Fate {
    FULL(List.of("create", "pay", "prepare", "ship", "deliver")),
    CANCEL_CREATED(List.of("create", "cancel")),
    CANCEL_PAID(List.of("create", "pay", "cancel")),
    CANCEL_TO_SHIP(List.of("create", "pay", "prepare", "cancel")),
    /** "deliver" is produced before "ship"; both must be applied, in machine order. */
    SWAPPED(List.of("create", "pay", "prepare", "ship", "deliver")),
    /** "deliver" arrives, "ship" never does: OUT_OF_ORDER after the deliver route's timeout. */
    NEVER_SHIPS(List.of("create", "pay", "prepare")),
    /** The business rejects "pay": the entity goes back to created. */
    REJECT_PAY(List.of("create")),
    /** The business rejects "deliver": the entity goes back to shipped. */
    REJECT_DELIVER(List.of("create", "pay", "prepare", "ship"));

    /** Events that must be delivered (and applied), in order. */
    public final List<String> applied;

    Fate(List<String> applied) {
      this.applied = applied;
    }
  }

  /** How a record relates to the fact it carries. */
  public enum Kind {
    /** The first planned copy of an accepted fact. */
    ORIGINAL,
    /** Byte-identical copy (same message id) on the same partition. */
    EXACT_DUP,
    /** Same content, new message id and sent_at (an upstream re-send). */
    NEW_MESSAGE_ID,
    /** Byte-identical copy on a different partition of the same topic. */
    OTHER_PARTITION,
    /** Re-send with a new message id after the test deleted the L1 keys. */
    LATE_RESEND,
    /**
     * A "pay" with another batch number after the line moved on: another dedup key and another
     * fingerprint for a transition already applied: CONFLICTING_FACT.
     */
    DISTINCT_FACT,
    /** Not allowed in the line's state: ILLEGAL_TRANSITION. */
    ILLEGAL,
    /** Early arrival that never heals: OUT_OF_ORDER. */
    NEVER_HEALS,
    /** The business answers REJECT: BUSINESS_REJECTED. */
    REJECTED
  }

  public record Line(String id, String orderId, String sku, String warehouse, int batch, Fate fate, boolean crossWarehouse) {
    public String finalState() {
      return TO.get(fate.applied.get(fate.applied.size() - 1));
    }

    public int finalVersion() {
      return fate.applied.size();
    }

    /** The same line, as a record with another batch number would describe it. */
    public Line withBatch(int otherBatch) {
      return new Line(id, orderId, sku, warehouse, otherBatch, fate, crossWarehouse);
    }
  }

  /** One transition of one entity. */
  public record Transition(String lineId, String event) {
    @Override
    public String toString() {
      return lineId + ":" + event;
    }
  }

  /**
   * One record to produce.
   *
   * @param fact copies of one fact share it; an accepted fact's id is its transition
   * @param escalation the reason it must be escalated with; null if it must not be
   */
  public record Planned(String route, Line line, String event, Kind kind, String fact, int partition, byte[] value, Reason escalation) {
    public Transition transition() {
      return new Transition(line.id(), event);
    }

    public byte[] key() {
      return line.id().getBytes(StandardCharsets.UTF_8);
    }
  }

  /**
   * One wave: batches are produced in order, each acknowledged before the next is sent; or, when
   * {@code concurrent}, each batch is one route's stream, all produced at the same time.
   *
   * @param expected the transitions that must all be delivered before the next wave
   * @param wipeL1First delete the test's Redis keys before producing (keys "expired")
   */
  public record Wave(String name, List<List<Planned>> batches, Set<Transition> expected, boolean wipeL1First, boolean concurrent) {
    public int size() {
      return batches.stream().mapToInt(List::size).sum();
    }
  }

  /**
   * @param lines number of entities (fulfilment lines)
   * @param partitions partitions of every route topic
   * @param rejects whether some lines' pay/deliver are rejected by the business
   * @param concurrentStages one wave of five concurrent route streams, every line FULL (see the class comment)
   */
  public record Settings(int lines, int partitions, long seed, double exactDupRate, double newMessageIdRate,
      double otherPartitionRate, boolean rejects, boolean concurrentStages) {
    public static Settings of(int lines, int partitions, long seed) {
      return new Settings(lines, partitions, seed, 0.20, 0.05, 0.03, false, false);
    }

    public Settings withRejects() {
      return new Settings(lines, partitions, seed, exactDupRate, newMessageIdRate, otherPartitionRate, true, concurrentStages);
    }

    public Settings withConcurrentStages() {
      return new Settings(lines, partitions, seed, exactDupRate, newMessageIdRate, otherPartitionRate, rejects, true);
    }
  }

  private final Settings settings;
  private final List<Line> lines = new ArrayList<>();
  private final List<Wave> waves = new ArrayList<>();
  /** Accepted fact id -> its transition; every other planned record is a one-copy fact. */
  private final Map<String, Transition> acceptedFacts = new LinkedHashMap<>();
  private final Random rnd;
  private long messageSeq;
  private int records;

  private OrderScenario(Settings settings) {
    this.settings = settings;
    this.rnd = new Random(settings.seed());
  }

  public static OrderScenario generate(Settings settings) {
    OrderScenario s = new OrderScenario(settings);
    s.build();
    return s;
  }

  public Settings settings() {
    return settings;
  }

  public List<Line> lines() {
    return Collections.unmodifiableList(lines);
  }

  public List<Wave> waves() {
    return Collections.unmodifiableList(waves);
  }

  public int records() {
    return records;
  }

  /** Transitions that must be delivered exactly once, over all waves. */
  public Set<Transition> expectedTransitions() {
    Set<Transition> all = new LinkedHashSet<>();
    waves.forEach(w -> all.addAll(w.expected()));
    return all;
  }

  public Map<String, Transition> acceptedFacts() {
    return Collections.unmodifiableMap(acceptedFacts);
  }

  // --------------------------------------------------------------------------------- building

  private void build() {
    int order = 0;
    while (lines.size() < settings.lines()) {
      order++;
      String orderId = String.format("o-%06d", order);
      String sku = "sku-" + (1 + rnd.nextInt(400));
      int batch = 1 + rnd.nextInt(9);
      boolean pair = lines.size() + 2 <= settings.lines() && rnd.nextDouble() < 0.06;
      // a cross-warehouse transfer: same order, sku and batch, two warehouses, two legitimate lines
      int w0 = 1 + rnd.nextInt(5);
      lines.add(line(orderId, sku, "w-" + w0, batch, pair));
      if (pair) {
        lines.add(line(orderId, sku, "w-" + (w0 % 5 + 1), batch, true));
      }
    }
    if (settings.concurrentStages()) {
      buildConcurrentStages();
      return;
    }

    // per-line extras
    Set<Line> illegalPrepare = new LinkedHashSet<>();
    Set<Line> cancelAfterShip = new LinkedHashSet<>();
    Set<Line> lateResend = new LinkedHashSet<>();
    Set<Line> distinct = new LinkedHashSet<>();
    for (Line l : lines) {
      if (l.fate() == Fate.CANCEL_CREATED && rnd.nextBoolean()) {
        illegalPrepare.add(l);
      }
      if (l.fate() == Fate.FULL) {
        double x = rnd.nextDouble();
        if (x < 0.01) {
          cancelAfterShip.add(l);
        } else if (x < 0.025) {
          distinct.add(l);
        }
      }
      if (l.fate() != Fate.REJECT_PAY && rnd.nextDouble() < 0.03) {
        lateResend.add(l);
      }
    }

    // wave 1: create
    WaveBuilder create = new WaveBuilder("create", false);
    for (Line l : lines) {
      create.accepted(0, "create", l, "create");
    }
    waves.add(create.build());

    // wave 2: pay (or cancel from created)
    WaveBuilder pay = new WaveBuilder("pay", false);
    for (Line l : lines) {
      switch (l.fate()) {
        case CANCEL_CREATED -> pay.accepted(0, "pay", l, "cancel");
        case REJECT_PAY -> pay.single(0, "pay", l, "pay", Kind.REJECTED, Reason.BUSINESS_REJECTED);
        default -> pay.accepted(0, "pay", l, "pay");
      }
    }
    waves.add(pay.build());

    // wave 3: prepare (or cancel from paid); L1 wiped first; late re-sends of create/pay facts
    WaveBuilder prepare = new WaveBuilder("prepare", true);
    for (Line l : lines) {
      switch (l.fate()) {
        case CANCEL_CREATED -> {
          if (illegalPrepare.contains(l)) {
            prepare.single(0, "prepare", l, "prepare", Kind.ILLEGAL, Reason.ILLEGAL_TRANSITION);
          }
        }
        case REJECT_PAY -> { }
        case CANCEL_PAID -> prepare.accepted(0, "prepare", l, "cancel");
        default -> prepare.accepted(0, "prepare", l, "prepare");
      }
    }
    for (Line l : lateResend) {
      prepare.copy(0, "create", l, "create", Kind.LATE_RESEND);
      prepare.copy(0, "pay", l, l.fate() == Fate.CANCEL_CREATED ? "cancel" : "pay", Kind.LATE_RESEND);
    }
    waves.add(prepare.build());

    // wave 4: ship. Batch 0: the swapped lines' "deliver" (early); batch 1: their "ship"; batch 2: the rest
    WaveBuilder ship = new WaveBuilder("ship", false);
    for (Line l : lines) {
      switch (l.fate()) {
        case SWAPPED -> {
          ship.accepted(0, "deliver", l, "deliver");
          ship.accepted(1, "ship", l, "ship");
        }
        case FULL, REJECT_DELIVER -> ship.accepted(2, "ship", l, "ship");
        case CANCEL_TO_SHIP -> ship.accepted(2, "ship", l, "cancel");
        case CANCEL_PAID -> ship.single(2, "ship", l, "ship", Kind.ILLEGAL, Reason.ILLEGAL_TRANSITION);
        case CANCEL_CREATED -> {
          if (!illegalPrepare.contains(l)) {
            ship.single(2, "ship", l, "ship", Kind.ILLEGAL, Reason.ILLEGAL_TRANSITION);
          }
        }
        default -> { }
      }
    }
    for (Line l : distinct) {
      ship.single(2, "pay", l.withBatch(l.batch() + 1000), "pay", Kind.DISTINCT_FACT, Reason.CONFLICTING_FACT);
    }
    waves.add(ship.build());

    // wave 5: deliver
    WaveBuilder deliver = new WaveBuilder("deliver", false);
    for (Line l : lines) {
      switch (l.fate()) {
        case FULL -> deliver.accepted(0, "deliver", l, "deliver");
        case REJECT_DELIVER -> deliver.single(0, "deliver", l, "deliver", Kind.REJECTED, Reason.BUSINESS_REJECTED);
        case NEVER_SHIPS -> deliver.single(0, "deliver", l, "deliver", Kind.NEVER_HEALS, Reason.OUT_OF_ORDER);
        case CANCEL_TO_SHIP -> deliver.single(0, "deliver", l, "deliver", Kind.ILLEGAL, Reason.ILLEGAL_TRANSITION);
        default -> { }
      }
    }
    for (Line l : cancelAfterShip) {
      deliver.single(0, "ship", l, "cancel", Kind.ILLEGAL, Reason.ILLEGAL_TRANSITION);
    }
    waves.add(deliver.build());
  }

  /** How far (in lines) a concurrent stream may move a line from its place in the line order. */
  static final int CONCURRENT_WINDOW = 16;

  /**
   * One wave, five streams: route r carries event r of every line, with the usual copies, in an
   * order of its own: the line order with each line moved by up to {@link #CONCURRENT_WINDOW}
   * places. Streams that run at the same pace then meet every line at about the same time, so
   * a stage arrives early by the window or by a route's lag, not by half a stream: the records
   * waiting at once stay a small share of the run.
   */
  private void buildConcurrentStages() {
    WaveBuilder all = new WaveBuilder("all-stages", false, true);
    for (int r = 0; r < ROUTES.size(); r++) {
      String route = ROUTES.get(r);
      Map<Line, Double> place = new LinkedHashMap<>();
      for (int i = 0; i < lines.size(); i++) {
        place.put(lines.get(i), i + rnd.nextDouble() * CONCURRENT_WINDOW);
      }
      List<Line> order = new ArrayList<>(lines);
      order.sort(java.util.Comparator.comparing(place::get));
      for (Line l : order) {
        all.accepted(r, route, l, route);
      }
    }
    waves.add(all.build());
  }

  private Line line(String orderId, String sku, String warehouse, int batch, boolean pair) {
    double x = rnd.nextDouble();
    Fate f;
    if (settings.concurrentStages()) {
      f = Fate.FULL;
    } else if (x < 0.03) {
      f = Fate.CANCEL_CREATED;
    } else if (x < 0.06) {
      f = Fate.CANCEL_PAID;
    } else if (x < 0.09) {
      f = Fate.CANCEL_TO_SHIP;
    } else if (x < 0.12) {
      f = Fate.SWAPPED;
    } else if (x < 0.13) {
      f = Fate.NEVER_SHIPS;
    } else if (settings.rejects() && x < 0.16) {
      f = Fate.REJECT_PAY;
    } else if (settings.rejects() && x < 0.19) {
      f = Fate.REJECT_DELIVER;
    } else {
      f = Fate.FULL;
    }
    return new Line(orderId + "/" + warehouse, orderId, sku, warehouse, batch, f, pair);
  }

  private int partitionOf(Line l) {
    return Math.floorMod(l.id().hashCode() * 31 + 7, settings.partitions());
  }

  private byte[] value(Line l, String event, String messageId, int qty) {
    String json = "{\"line_id\":\"" + l.id() + "\",\"order_id\":\"" + l.orderId() + "\",\"sku_id\":\"" + l.sku()
        + "\",\"warehouse_id\":\"" + l.warehouse() + "\",\"batch_no\":" + l.batch() + ",\"event\":\"" + event
        + "\",\"qty\":" + qty + ",\"message_id\":\"" + messageId + "\",\"sent_at\":\"2026-11-29T10:" + String.format("%02d:%02d", (messageSeq / 60) % 60, messageSeq % 60)
        + "Z\"}";
    return json.getBytes(StandardCharsets.UTF_8);
  }

  private String nextMessageId() {
    return "m-" + (++messageSeq);
  }

  private static int qty(Line l) {
    return 1 + Math.floorMod(l.id().hashCode(), 5);
  }

  /** Collects one wave's batches; faults are drawn per accepted fact. */
  private final class WaveBuilder {
    final String name;
    final boolean wipe;
    final boolean concurrent;
    final List<List<Planned>> batches = new ArrayList<>();
    final Set<Transition> expected = new LinkedHashSet<>();
    /** Accepted fact id -> its original, for copies made later in the wave. */
    final Map<String, Planned> originals = new LinkedHashMap<>();

    WaveBuilder(String name, boolean wipe) {
      this(name, wipe, false);
    }

    WaveBuilder(String name, boolean wipe, boolean concurrent) {
      this.name = name;
      this.wipe = wipe;
      this.concurrent = concurrent;
    }

    List<Planned> batch(int i) {
      while (batches.size() <= i) {
        batches.add(new ArrayList<>());
      }
      return batches.get(i);
    }

    static String factId(String route, Line l, String event) {
      return route + ":" + l.id() + ":" + event;
    }

    void accepted(int batch, String route, Line l, String event) {
      String fact = factId(route, l, event);
      Planned p = new Planned(route, l, event, Kind.ORIGINAL, fact, partitionOf(l), value(l, event, nextMessageId(), qty(l)), null);
      acceptedFacts.put(fact, p.transition());
      expected.add(p.transition());
      List<Planned> b = batch(batch);
      b.add(p);
      if (rnd.nextDouble() < settings.exactDupRate()) {
        b.add(new Planned(route, l, event, Kind.EXACT_DUP, fact, p.partition(), p.value(), null));
      }
      if (rnd.nextDouble() < settings.newMessageIdRate()) {
        b.add(new Planned(route, l, event, Kind.NEW_MESSAGE_ID, fact, p.partition(), value(l, event, nextMessageId(), qty(l)), null));
      }
      if (rnd.nextDouble() < settings.otherPartitionRate() && settings.partitions() > 1) {
        int other = (p.partition() + 1 + rnd.nextInt(settings.partitions() - 1)) % settings.partitions();
        b.add(new Planned(route, l, event, Kind.OTHER_PARTITION, fact, other, p.value(), null));
      }
    }

    /** A one-copy record, escalated with {@code reason}. */
    void single(int batch, String route, Line l, String event, Kind kind, Reason reason) {
      String fact = factId(route, l, event) + ":" + kind.name().toLowerCase(java.util.Locale.ROOT);
      batch(batch).add(new Planned(route, l, event, kind, fact, partitionOf(l), value(l, event, nextMessageId(), qty(l)), reason));
    }

    /** A re-send of an accepted fact of an earlier wave. */
    void copy(int batch, String route, Line l, String event, Kind kind) {
      String fact = factId(route, l, event);
      if (!acceptedFacts.containsKey(fact)) {
        throw new IllegalStateException("no accepted fact " + fact + " to re-send");
      }
      batch(batch).add(new Planned(route, l, event, kind, fact, partitionOf(l), value(l, event, nextMessageId(), qty(l)), null));
    }

    Wave build() {
      // the last batch is the bulk of the wave: shuffled, so that duplicates land anywhere after,
      // or even before, the original. Earlier batches keep their order (they are the early
      // arrivals). Concurrent streams keep their (windowed) order; their copies are shuffled
      // within a chunk-sized window.
      List<List<Planned>> out = new ArrayList<>();
      for (int i = 0; i < batches.size(); i++) {
        List<Planned> b = new ArrayList<>(batches.get(i));
        if (concurrent) {
          for (int from = 0; from < b.size(); from += CONCURRENT_WINDOW) {
            Collections.shuffle(b.subList(from, Math.min(b.size(), from + CONCURRENT_WINDOW)), rnd);
          }
        } else if (i == batches.size() - 1) {
          Collections.shuffle(b, rnd);
        }
        records += b.size();
        out.add(List.copyOf(b));
      }
      return new Wave(name, List.copyOf(out), Set.copyOf(expected), wipe, concurrent);
    }
  }
}
