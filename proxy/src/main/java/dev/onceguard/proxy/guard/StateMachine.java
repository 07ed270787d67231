package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig;
import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.MachineGraph;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * A validated state machine with its reachability closure, used to classify a lost CAS.
 * Immutable and thread-safe.
 */
public final class StateMachine {

  /** How a transition that could not be applied relates to the entity's current state. */
  public enum Classification {
    /** The entity is in the event's target state, or every path to its state passed through it. */
    ALREADY_APPLIED,
    /** The entity may still reach a from-state (or does not exist yet, or is busy): wait. */
    EARLY_ARRIVAL,
    /** Terminal state, unrelated branch, or ambiguous because of a cycle: needs a human. */
    ILLEGAL
  }

  private final MachineConfig config;
  /** The transitions and their reachability, shared with the configuration's checks. */
  private final MachineGraph graph;
  /** state -> the states on every path from creation to it (its dominators, itself included). */
  private final Map<String, Set<String>> dominators = new HashMap<>();

  public StateMachine(MachineConfig config) {
    this.config = config;
    this.graph = new MachineGraph(config);
    computeDominators();
  }

  /**
   * Iterative dominator sets over the state graph with a virtual root before every creating
   * event's target: dom(s) = {s} ∪ ⋂ dom(p) over predecessors p.
   */
  private void computeDominators() {
    Map<String, Set<String>> pred = new HashMap<>();
    Set<String> roots = graph.createdIn();
    for (EventConfig e : config.events().values()) {
      for (String f : e.from()) {
        pred.computeIfAbsent(e.to(), k -> new HashSet<>()).add(f);
      }
    }
    Set<String> all = new HashSet<>(config.states());
    for (String s : config.states()) {
      dominators.put(s, roots.contains(s) ? Set.of(s) : new HashSet<>(all));
    }
    boolean changed = true;
    while (changed) {
      changed = false;
      for (String s : config.states()) {
        if (roots.contains(s)) {
          continue; // the virtual root dominates nothing but itself: {s} is final
        }
        Set<String> d = null;
        for (String p : pred.getOrDefault(s, Set.of())) {
          if (d == null) {
            d = new HashSet<>(dominators.get(p));
          } else {
            d.retainAll(dominators.get(p));
          }
        }
        if (d == null) {
          d = new HashSet<>();
        }
        d.add(s);
        if (!d.equals(dominators.get(s))) {
          dominators.put(s, d);
          changed = true;
        }
      }
    }
    dominators.replaceAll((k, v) -> Set.copyOf(v));
  }

  /** True if every way to reach {@code state} passes through {@code through}. */
  public boolean alwaysPassesThrough(String state, String through) {
    return dominators.getOrDefault(state, Set.of()).contains(through);
  }

  public String name() {
    return config.name();
  }

  public MachineConfig config() {
    return config;
  }

  public EventConfig event(String name) {
    EventConfig e = config.events().get(name);
    if (e == null) {
      throw new IllegalArgumentException("no event '" + name + "' in machine '" + config.name() + "'");
    }
    return e;
  }

  /** True if {@code to} can be reached from {@code from} in one or more transitions. */
  public boolean reachable(String from, String to) {
    return graph.reachable(from, to);
  }

  public boolean terminal(String state) {
    return config.terminal().contains(state) || graph.deadEnd(state);
  }

  /**
   * Classifies an event whose CAS did not apply.
   *
   * @param current the entity's state, or {@code null} if the entity does not exist
   * @param busy whether the entity has another transition pending
   */
  public Classification classify(EventConfig event, String current, boolean busy) {
    if (current == null) {
      // a non-creating event for an entity not created yet: its creation may still arrive;
      // a creating event cannot lose the CAS to a missing entity, so this is the first case.
      return Classification.EARLY_ARRIVAL;
    }
    if (busy) {
      // another transition is between claim and confirm: it may commit or roll back; only then
      // can this one be judged
      return Classification.EARLY_ARRIVAL;
    }
    // Applied only if the entity cannot be where it is without having gone through the event's
    // target. Mere reachability is not enough: "cancelled" is reachable from "to_ship", yet an
    // order cancelled straight from "paid" never was to_ship, and a late "prepare" for it needs a
    // human, not a silent ignore.
    if (event.from().contains(current)) {
      // free and in a from-state: what the CAS lost to has ended (committed, or aborted and put
      // back), and the CAS can apply now. On a self-loop the target is the current state too, so
      // "applied" would also hold; the state cannot tell this record from the next occurrence of
      // the event there, the ledger does (by key), so the claim is tried again
      return Classification.EARLY_ARRIVAL;
    }
    boolean applied = alwaysPassesThrough(current, event.to());
    boolean fromAhead = event.from().stream().anyMatch(f -> reachable(current, f));
    if (applied && fromAhead) {
      // on a cycle both hold and the record cannot be placed: a human decides
      return Classification.ILLEGAL;
    }
    if (applied) {
      return Classification.ALREADY_APPLIED;
    }
    if (fromAhead) {
      return Classification.EARLY_ARRIVAL;
    }
    return Classification.ILLEGAL;
  }
}
