package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import java.util.ArrayDeque;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The states of a machine and the transitions its events allow, with each state's reachability
 * closure: the one place that walks the graph. The configuration checks it (every state reachable
 * from a creating event, cycles reported) and the guard's {@code StateMachine} classifies a lost
 * CAS with it. Immutable and thread-safe.
 */
public final class MachineGraph {
  private final List<String> states;
  /** state -> every state reachable from it in one or more steps. */
  private final Map<String, Set<String>> reach = new HashMap<>();
  /** The targets of the creating events. */
  private final Set<String> created = new LinkedHashSet<>();

  public MachineGraph(MachineConfig machine) {
    this(machine.states(), machine.events().values());
  }

  MachineGraph(Collection<String> states, Collection<EventConfig> events) {
    this.states = List.copyOf(states);
    Map<String, Set<String>> next = new HashMap<>();
    for (EventConfig e : events) {
      if (e.creating()) {
        created.add(e.to());
      }
      for (String f : e.from()) {
        next.computeIfAbsent(f, k -> new LinkedHashSet<>()).add(e.to());
      }
    }
    for (String s : this.states) {
      reach.put(s, Set.copyOf(closure(next.getOrDefault(s, Set.of()), next)));
    }
  }

  private static Set<String> closure(Collection<String> start, Map<String, Set<String>> next) {
    Set<String> seen = new LinkedHashSet<>();
    ArrayDeque<String> todo = new ArrayDeque<>(start);
    while (!todo.isEmpty()) {
      String x = todo.poll();
      if (seen.add(x)) {
        todo.addAll(next.getOrDefault(x, Set.of()));
      }
    }
    return seen;
  }

  /** True if {@code to} can be reached from {@code from} in one or more transitions. */
  public boolean reachable(String from, String to) {
    return reach.getOrDefault(from, Set.of()).contains(to);
  }

  /** True if no transition leaves {@code state}. */
  public boolean deadEnd(String state) {
    return reach.getOrDefault(state, Set.of()).isEmpty();
  }

  /** The targets of the creating events. */
  public Set<String> createdIn() {
    return Set.copyOf(created);
  }

  /** The declared states that no creating event leads to, in declaration order. */
  public List<String> unreachable() {
    return states.stream().filter(s -> !created.contains(s) && created.stream().noneMatch(c -> reachable(c, s))).toList();
  }

  /** The states that can reach themselves (they lie on a cycle), in declaration order. */
  public List<String> onCycles() {
    return states.stream().filter(s -> reachable(s, s)).toList();
  }
}
