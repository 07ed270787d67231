package dev.onceguard.proxy.guard;

import static dev.onceguard.proxy.guard.StateMachine.Classification.ALREADY_APPLIED;
import static dev.onceguard.proxy.guard.StateMachine.Classification.EARLY_ARRIVAL;
import static dev.onceguard.proxy.guard.StateMachine.Classification.ILLEGAL;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.guard.StateMachine.Classification;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class StateMachineTest {

  /** The reference order pipeline: created → paid → to_ship → shipped → delivered, cancel from the first three. */
  private static final StateMachine ORDER = machine("order",
      List.of("created", "paid", "to_ship", "shipped", "delivered", "cancelled"),
      Set.of("delivered", "cancelled"),
      event("create", "created"),
      event("pay", "paid", "created"),
      event("prepare", "to_ship", "paid"),
      event("ship", "shipped", "to_ship"),
      event("deliver", "delivered", "shipped"),
      event("cancel", "cancelled", "created", "paid", "to_ship"));

  /** A review loop: open ⇄ review → closed. */
  private static final StateMachine TICKET = machine("ticket",
      List.of("open", "review", "closed"),
      Set.of("closed"),
      event("open", "open"),
      event("submit", "review", "open"),
      event("reject", "open", "review"),
      event("approve", "closed", "review"));

  /** A diamond: start → (left | right) → joined → done. */
  private static final StateMachine DIAMOND = machine("diamond",
      List.of("start", "left", "right", "joined", "done"),
      Set.of("done"),
      event("begin", "start"),
      event("goLeft", "left", "start"),
      event("goRight", "right", "start"),
      event("joinLeft", "joined", "left"),
      event("joinRight", "joined", "right"),
      event("finish", "done", "joined"));

  private static EventConfig event(String name, String to, String... from) {
    return new EventConfig(name, Set.of(from), to);
  }

  private static StateMachine machine(String name, List<String> states, Set<String> terminal, EventConfig... events) {
    Map<String, EventConfig> byName = new LinkedHashMap<>();
    for (EventConfig e : events) {
      byName.put(e.name(), e);
    }
    return new StateMachine(new MachineConfig(name, states, terminal, byName, List.of()));
  }

  private static Classification classify(StateMachine m, String event, String current) {
    return m.classify(m.event(event), current, false);
  }

  // ------------------------------------------------------------------------- ALREADY_APPLIED

  @ParameterizedTest(name = "{0} while {1}")
  @CsvSource({
      "create, created",
      "pay, paid",
      "prepare, to_ship",
      "ship, shipped",
      "deliver, delivered",
      "cancel, cancelled",
  })
  void classify_replayOfTheCurrentStatesEvent_alreadyApplied(String event, String current) {
    assertThat(classify(ORDER, event, current)).isEqualTo(ALREADY_APPLIED);
  }

  @ParameterizedTest(name = "{0} while {1}")
  @CsvSource({
      "pay, delivered",
      "create, delivered",
      "prepare, delivered",
      "ship, delivered",
      "pay, shipped",
      "prepare, shipped",
      "pay, to_ship",
      "create, paid",
      "create, cancelled",
  })
  void classify_targetBeforeCurrentOnEveryPath_alreadyApplied(String event, String current) {
    assertThat(classify(ORDER, event, current)).isEqualTo(ALREADY_APPLIED);
  }

  // ------------------------------------------------------------------------- EARLY_ARRIVAL

  @Test
  void classify_deliverWhileToShip_earlyArrival() {
    assertThat(classify(ORDER, "deliver", "to_ship")).isEqualTo(EARLY_ARRIVAL);
  }

  @ParameterizedTest(name = "{0} while {1}")
  @CsvSource({
      "ship, created",
      "deliver, created",
      "prepare, created",
      "deliver, paid",
      "cancel, created",
  })
  void classify_fromStateStillAhead_earlyArrival(String event, String current) {
    assertThat(classify(ORDER, event, current)).isEqualTo(EARLY_ARRIVAL);
  }

  @Test
  void classify_entityMissing_earlyArrival() {
    assertThat(ORDER.classify(ORDER.event("ship"), null, false)).isEqualTo(EARLY_ARRIVAL);
    assertThat(ORDER.classify(ORDER.event("deliver"), null, false)).isEqualTo(EARLY_ARRIVAL);
  }

  @Test
  void classify_entityBusy_earlyArrivalWhateverTheState() {
    // the pending transition may still roll back, so even an otherwise illegal event waits
    assertThat(ORDER.classify(ORDER.event("deliver"), "to_ship", true)).isEqualTo(EARLY_ARRIVAL);
    assertThat(ORDER.classify(ORDER.event("pay"), "paid", true)).isEqualTo(EARLY_ARRIVAL);
    assertThat(ORDER.classify(ORDER.event("prepare"), "cancelled", true)).isEqualTo(EARLY_ARRIVAL);
  }

  @Test
  void classify_currentIsAFromStateAgain_earlyArrival() {
    // The CAS lost because another transition was pending; that one was aborted and the entity
    // went back to a from-state before we read it. The CAS can succeed now: retry, don't escalate.
    assertThat(classify(ORDER, "pay", "created")).isEqualTo(EARLY_ARRIVAL);
    assertThat(classify(ORDER, "cancel", "paid")).isEqualTo(EARLY_ARRIVAL);
    assertThat(classify(ORDER, "deliver", "shipped")).isEqualTo(EARLY_ARRIVAL);
  }

  // ------------------------------------------------------------------------- ILLEGAL

  @Test
  void classify_prepareWhenCancelled_illegalBecauseCancelledIsNotDominatedByToShip() {
    // cancelled is reachable from to_ship, but an order may reach it straight from paid
    assertThat(ORDER.reachable("to_ship", "cancelled")).isTrue();
    assertThat(ORDER.alwaysPassesThrough("cancelled", "to_ship")).isFalse();

    assertThat(classify(ORDER, "prepare", "cancelled")).isEqualTo(ILLEGAL);
  }

  @Test
  void classify_payWhenCancelled_illegalBecauseCancelMayComeStraightFromCreated() {
    assertThat(classify(ORDER, "pay", "cancelled")).isEqualTo(ILLEGAL);
  }

  @ParameterizedTest(name = "{0} while {1}")
  @CsvSource({
      "cancel, delivered",
      "deliver, cancelled",
      "ship, cancelled",
      "prepare, cancelled",
  })
  void classify_fromTerminalStateNotAlreadyApplied_illegal(String event, String current) {
    assertThat(ORDER.terminal(current)).isTrue();
    assertThat(classify(ORDER, event, current)).isEqualTo(ILLEGAL);
  }

  @Test
  void classify_cancelAfterShipped_illegal() {
    // shipped is not terminal, but no cancel source can be reached from it any more
    assertThat(ORDER.terminal("shipped")).isFalse();
    assertThat(classify(ORDER, "cancel", "shipped")).isEqualTo(ILLEGAL);
  }

  @Test
  void classify_cycleWhereAppliedAndFromAheadBothHold_illegal() {
    // in review: every path went through review (applied), yet open - submit's from - is ahead
    assertThat(TICKET.alwaysPassesThrough("review", "review")).isTrue();
    assertThat(TICKET.reachable("review", "open")).isTrue();
    assertThat(classify(TICKET, "submit", "review")).isEqualTo(ILLEGAL);

    assertThat(TICKET.alwaysPassesThrough("open", "open")).isTrue();
    assertThat(TICKET.reachable("open", "review")).isTrue();
    assertThat(classify(TICKET, "reject", "open")).isEqualTo(ILLEGAL);
  }

  @Test
  void classify_selfLoopWithTheEntityFreeInItsFromState_triesAgain() {
    // open -> open ("comment"): a CAS lost to another comment that has committed since finds the
    // entity free in the from-state; the CAS applies on the retry, and the ledger alone tells a
    // re-send of this comment from the next one
    StateMachine thread = machine("thread", List.of("open", "closed"), Set.of("closed"),
        event("start", "open"), event("comment", "open", "open"), event("close", "closed", "open"));
    assertThat(thread.alwaysPassesThrough("open", "open")).isTrue();

    assertThat(classify(thread, "comment", "open")).isEqualTo(EARLY_ARRIVAL);
    // closed: every path to it went through open, so a comment there is compared with the applied
    // rows by content (a re-send is ignored, another comment escalated), as on any machine
    assertThat(classify(thread, "comment", "closed")).isEqualTo(ALREADY_APPLIED);
  }

  @Test
  void classify_cycleMachineOutsideTheAmbiguity_stillClassifies() {
    assertThat(classify(TICKET, "approve", "open")).isEqualTo(EARLY_ARRIVAL);
    assertThat(classify(TICKET, "submit", "closed")).isEqualTo(ALREADY_APPLIED);
    assertThat(classify(TICKET, "open", "closed")).isEqualTo(ALREADY_APPLIED);
    assertThat(classify(TICKET, "approve", "closed")).isEqualTo(ALREADY_APPLIED);
  }

  @Test
  void classify_diamond_branchEventAfterJoin_illegalButCommonAncestorApplied() {
    // joined may have been reached through either branch: goLeft cannot be judged applied
    assertThat(classify(DIAMOND, "goLeft", "joined")).isEqualTo(ILLEGAL);
    assertThat(classify(DIAMOND, "goRight", "done")).isEqualTo(ILLEGAL);
    assertThat(classify(DIAMOND, "begin", "joined")).isEqualTo(ALREADY_APPLIED);
    assertThat(classify(DIAMOND, "joinLeft", "done")).isEqualTo(ALREADY_APPLIED);
    assertThat(classify(DIAMOND, "joinRight", "left")).isEqualTo(ILLEGAL);
    assertThat(classify(DIAMOND, "goLeft", "right")).isEqualTo(ILLEGAL);
    assertThat(classify(DIAMOND, "finish", "left")).isEqualTo(EARLY_ARRIVAL);
  }

  // ------------------------------------------------------------------------- graph queries

  @Test
  void alwaysPassesThrough_diamond_joinIsDominatedOnlyByItsCommonAncestors() {
    assertThat(DIAMOND.alwaysPassesThrough("joined", "start")).isTrue();
    assertThat(DIAMOND.alwaysPassesThrough("joined", "joined")).isTrue();
    assertThat(DIAMOND.alwaysPassesThrough("joined", "left")).isFalse();
    assertThat(DIAMOND.alwaysPassesThrough("joined", "right")).isFalse();
    assertThat(DIAMOND.alwaysPassesThrough("done", "joined")).isTrue();
    assertThat(DIAMOND.alwaysPassesThrough("done", "start")).isTrue();
    assertThat(DIAMOND.alwaysPassesThrough("done", "left")).isFalse();
    assertThat(DIAMOND.alwaysPassesThrough("left", "start")).isTrue();
    assertThat(DIAMOND.alwaysPassesThrough("left", "right")).isFalse();
    assertThat(DIAMOND.alwaysPassesThrough("start", "left")).isFalse();
  }

  @Test
  void alwaysPassesThrough_orderMachine_dominatorsOfEveryState() {
    assertThat(dominatorsOf(ORDER, "created")).containsExactlyInAnyOrder("created");
    assertThat(dominatorsOf(ORDER, "paid")).containsExactlyInAnyOrder("created", "paid");
    assertThat(dominatorsOf(ORDER, "to_ship")).containsExactlyInAnyOrder("created", "paid", "to_ship");
    assertThat(dominatorsOf(ORDER, "shipped")).containsExactlyInAnyOrder("created", "paid", "to_ship", "shipped");
    assertThat(dominatorsOf(ORDER, "delivered")).containsExactlyInAnyOrder("created", "paid", "to_ship", "shipped", "delivered");
    assertThat(dominatorsOf(ORDER, "cancelled")).containsExactlyInAnyOrder("created", "cancelled");
  }

  @Test
  void alwaysPassesThrough_twoCreatingEvents_neitherRootDominatesTheJoin() {
    StateMachine m = machine("two-doors",
        List.of("web", "shop", "placed"), Set.of(),
        event("fromWeb", "web"),
        event("fromShop", "shop"),
        event("placeWeb", "placed", "web"),
        event("placeShop", "placed", "shop"));

    assertThat(dominatorsOf(m, "placed")).containsExactly("placed");
    assertThat(classify(m, "fromWeb", "placed")).isEqualTo(ILLEGAL);
  }

  @Test
  void alwaysPassesThrough_creatingTargetOnACycle_isDominatedOnlyByItself() {
    // reject leads back into open, but open is also entered straight from creation
    assertThat(dominatorsOf(TICKET, "open")).containsExactly("open");
    assertThat(dominatorsOf(TICKET, "review")).containsExactlyInAnyOrder("open", "review");
    assertThat(dominatorsOf(TICKET, "closed")).containsExactlyInAnyOrder("open", "review", "closed");
  }

  @Test
  void alwaysPassesThrough_unknownState_false() {
    assertThat(ORDER.alwaysPassesThrough("refunded", "created")).isFalse();
  }

  @Test
  void reachable_isOneOrMoreSteps() {
    assertThat(ORDER.reachable("created", "delivered")).isTrue();
    assertThat(ORDER.reachable("created", "cancelled")).isTrue();
    assertThat(ORDER.reachable("shipped", "cancelled")).isFalse();
    assertThat(ORDER.reachable("delivered", "created")).isFalse();
    assertThat(ORDER.reachable("created", "created")).isFalse();
    assertThat(TICKET.reachable("open", "open")).isTrue();
  }

  @Test
  void terminal_declaredOrWithoutOutgoingEvents() {
    StateMachine undeclared = machine("m", List.of("a", "b"), Set.of(), event("mk", "a"), event("go", "b", "a"));

    assertThat(ORDER.terminal("delivered")).isTrue();
    assertThat(ORDER.terminal("cancelled")).isTrue();
    assertThat(ORDER.terminal("to_ship")).isFalse();
    assertThat(undeclared.terminal("b")).isTrue();
    assertThat(undeclared.terminal("a")).isFalse();
  }

  @Test
  void event_unknownName_throwsNamingTheMachine() {
    assertThat(ORDER.event("pay").to()).isEqualTo("paid");
    assertThatThrownBy(() -> ORDER.event("refund"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("no event 'refund' in machine 'order'");
  }

  @Test
  void name_andConfig_areThoseGiven() {
    assertThat(ORDER.name()).isEqualTo("order");
    assertThat(ORDER.config().states()).hasSize(6);
  }

  private static List<String> dominatorsOf(StateMachine m, String state) {
    return m.config().states().stream().filter(s -> m.alwaysPassesThrough(state, s)).toList();
  }
}
