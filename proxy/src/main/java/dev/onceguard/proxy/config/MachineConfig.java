package dev.onceguard.proxy.config;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A state machine as configured. Validated by {@link MachineSettings} with {@link MachineGraph}:
 * every state named by an event is declared, every state is reachable from a creating event, event
 * names are unique.
 *
 * @param states declared states, in declaration order
 * @param terminal states no event leaves
 * @param events by name, in declaration order
 * @param cycles human-readable description of cycles found (allowed, reported at start-up)
 */
public record MachineConfig(
    String name, List<String> states, Set<String> terminal, Map<String, EventConfig> events, List<String> cycles) {

  /**
   * One event. An event with no {@code from} states is a creating event: it inserts the entity.
   */
  public record EventConfig(String name, Set<String> from, String to) {
    public boolean creating() {
      return from.isEmpty();
    }
  }
}
