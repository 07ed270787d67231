package dev.onceguard.it.faults;

import dev.onceguard.proxy.dispatch.DispatchResult;
import dev.onceguard.v1.Delivery;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;

/**
 * The business container of a run: answers each delivery as the scenario's script says for the
 * n-th delivery of its dedup key, and remembers every delivery and answer. It is idempotent as a
 * business must be: once it applied a key, every later delivery of that key is answered OK
 * without applying it again.
 */
final class Business {
  /** What the business does with one delivery. */
  enum Answer {
    OK, REJECT, RETRY
  }

  /** One delivery as the business received it. */
  record Received(Delivery delivery, int nth, Answer answer, long seq, String instance) {
    long offset() {
      return delivery.getRecord().getOffset();
    }
  }

  private final World[] world = new World[1];
  /** The scenario's answer to the n-th (1-based) delivery of a key whose event is given. */
  private final BiFunction<String, Integer, Answer> script;
  final List<Received> received = Collections.synchronizedList(new ArrayList<>());
  /** Dedup key → the event number at which the business applied it. */
  final Map<String, Long> appliedAt = Collections.synchronizedMap(new HashMap<>());

  /** Deliveries whose RETRY answer the sidecar heard as the business gave it (not lost, not late). */
  final java.util.Set<String> heardRetry = java.util.concurrent.ConcurrentHashMap.newKeySet();

  Business(BiFunction<String, Integer, Answer> script) {
    this.script = script;
  }

  void bind(World w) {
    world[0] = w;
  }

  synchronized DispatchResult receive(Delivery d, String instance) {
    int nth = (int) received.stream().filter(r -> r.delivery().getDedupKey().equals(d.getDedupKey())).count() + 1;
    Answer a = appliedAt.containsKey(d.getDedupKey()) ? Answer.OK : script.apply(Scenario.scriptKey(d.getEvent(), d.getRecord().getKey().toStringUtf8()), nth);
    long seq = world[0].nextEvent();
    received.add(new Received(d, nth, a, seq, instance));
    return switch (a) {
      case OK -> {
        appliedAt.putIfAbsent(d.getDedupKey(), seq);
        yield DispatchResult.ok();
      }
      case REJECT -> DispatchResult.reject("the business refuses " + d.getEvent());
      case RETRY -> DispatchResult.retry("the business is busy", Duration.ZERO);
    };
  }
}
