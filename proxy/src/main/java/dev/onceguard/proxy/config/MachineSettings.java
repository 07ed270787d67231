package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The {@code machines} mapping, declared and read: each machine's states and events, checked as a
 * graph by {@link MachineGraph} (every state reachable from a creating event; cycles reported).
 */
public final class MachineSettings {
  private MachineSettings() {}

  static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  /** The key of the mapping of machines by name. */
  static final String MACHINES = "machines";

  static final Section MACHINE = Section.of("machines.<name>",
      "A state machine (L3), by name (`" + NAME.pattern() + "`). Optional: a route without a machine uses L1 and L2 only. "
          + "Every state must be reachable from a creating event; cycles are allowed and reported at start.");
  public static final Setting<List<String>> STATES = MACHINE.add(Setting.required("states", SettingType.STRINGS, "",
      "the states, each a name matching `" + NAME.pattern() + "`"));
  public static final Setting<List<String>> TERMINAL = MACHINE.add(Setting.of("terminal", SettingType.STRINGS, List.of(),
      "states no event may leave").shownAs("none"));
  public static final Setting<Object> EVENTS = MACHINE.add(Setting.required("events", SettingType.MAPPING, "",
      "the events by name, each `{from: [states], to: state}` (below); at least one creates the entity"));

  static final Section EVENT = Section.of("machines.<name>.events.<event>",
      "One event: the transition it makes. An event without `from` creates the entity.");
  public static final Setting<List<String>> FROM = EVENT.add(Setting.of("from", SettingType.STRINGS, List.of(),
      "the states the event applies in").shownAs("none: a creating event"));
  public static final Setting<String> TO = EVENT.add(Setting.required("to", SettingType.text("state"), "",
      "the state the entity is in after it"));

  /** The machines that are sound; one with problems (reported) is left out. */
  static Map<String, MachineConfig> read(NodeReader root, NodeReader machines) {
    Map<String, MachineConfig> out = new LinkedHashMap<>();
    for (String name : machines.keys()) {
      NodeReader mn = machines.object(name);
      if (!NAME.matcher(name).matches()) {
        machines.fail(name, "machine name must match " + NAME.pattern());
      }
      MachineConfig mc = root.problems().attempt(() -> readMachine(name, mn));
      if (mc != null) {
        out.put(name, mc);
      }
    }
    machines.done();
    return Collections.unmodifiableMap(out);
  }

  /** Returns {@code null} when the machine's problems leave nothing to check its routes against. */
  private static MachineConfig readMachine(String name, NodeReader n) {
    List<String> states = n.stringList(STATES);
    if (states.isEmpty()) {
      return null; // reported; every event would fail against no states
    }
    Set<String> stateSet = new LinkedHashSet<>();
    for (int i = 0; i < states.size(); i++) {
      String s = states.get(i);
      if (!NAME.matcher(s).matches()) {
        n.failAt(n.path("states[" + i + "]"), "state name '" + s + "' must match " + NAME.pattern());
      } else if (!stateSet.add(s)) {
        n.failAt(n.path("states[" + i + "]"), "duplicate state '" + s + "'");
      }
    }
    Set<String> terminal = new LinkedHashSet<>(n.stringList(TERMINAL));
    for (String t : terminal) {
      if (!stateSet.contains(t)) {
        n.fail(TERMINAL, "unknown state '" + t + "' (declared states: " + stateSet + ")");
      }
    }
    NodeReader evs = n.object(EVENTS.key());
    Map<String, EventConfig> events = new LinkedHashMap<>();
    for (String ev : evs.keys()) {
      if (!NAME.matcher(ev).matches()) {
        evs.fail(ev, "event name must match " + NAME.pattern());
      }
      EventConfig event = readEvent(ev, evs.object(ev), stateSet, terminal);
      if (event != null) {
        events.put(ev, event);
      }
    }
    evs.done();
    if (events.size() < evs.keys().size() || !n.has(EVENTS) || evs.broken()) {
      // each event's problem, or the section's, is reported already; the graph checks below
      // would only repeat it (a state unreachable for want of the event left out)
      n.done();
      return null;
    }
    if (events.isEmpty()) {
      n.fail(EVENTS, "a machine needs at least one event");
      n.done();
      return null;
    }
    if (events.values().stream().noneMatch(EventConfig::creating)) {
      n.fail(EVENTS, "no creating event (an event without 'from'); entities could never be created");
      n.done();
      return null;
    }
    MachineGraph graph = new MachineGraph(stateSet, events.values());
    for (String s : graph.unreachable()) {
      n.fail(STATES, "state '" + s + "' is unreachable from any creating event");
    }
    List<String> cycles = graph.onCycles();
    n.done();
    List<String> cycleReport = cycles.isEmpty() ? List.of() : List.of("states on a cycle: " + cycles);
    return new MachineConfig(name, List.copyOf(states), Collections.unmodifiableSet(terminal), Collections.unmodifiableMap(events),
        cycleReport);
  }

  /** {@code null} when the event has a problem (reported). */
  private static EventConfig readEvent(String name, NodeReader en, Set<String> states, Set<String> terminal) {
    Set<String> from = new LinkedHashSet<>(en.stringList(FROM));
    String to = en.get(TO);
    boolean valid = to != null;
    for (String f : from) {
      if (!states.contains(f)) {
        en.fail(FROM, "unknown state '" + f + "' (declared states: " + states + ")");
        valid = false;
      } else if (terminal.contains(f)) {
        en.fail(FROM, "state '" + f + "' is terminal; no event may leave it");
        valid = false;
      }
    }
    if (to != null && !states.contains(to)) {
      en.fail(TO, "unknown state '" + to + "' (declared states: " + states + ")");
      valid = false;
    }
    en.done();
    return valid ? new EventConfig(name, Collections.unmodifiableSet(from), to) : null;
  }
}
