package dev.onceguard.bench;

/**
 * The scenarios of one run, by the names {@code results.json} uses.
 *
 * @param paced whether a paced run measures record age (the others report null latencies)
 */
enum Scenario {
  BASELINE("baseline", true, "the sidecar's pipeline forwarding every record, no guard"),
  GUARD_MACHINE("guard_machine", true, "guard with L1 (Redis) + L2 (ledger) + L3 (state machine); every record creates a new entity"),
  GUARD_NO_MACHINE("guard_no_machine", true, "guard with L1 + L2 on an append-only route (no state machine)"),
  REPLAY("replay", false, "guard_machine's records again on a new topic: all duplicates, all answered by L1"),
  REDIS_DOWN_DUPLICATES("redis_down_duplicates", false,
      "guard_machine's records again with L1 pointed at a closed port: all duplicates, answered by the ledger"),
  HAND_A("hand_a", true, "plain KafkaConsumer, per record Redis SET NX EX (lettuce, sync) then the business call; commitSync per poll"),
  HAND_B("hand_b", true,
      "plain KafkaConsumer, per poll one JDBC transaction of INSERT IGNORE per record into a table keyed by the business key, business call per inserted row; COMMIT, then commitSync"),
  GUARD_MACHINE_PROCESS("guard_machine_process", true,
      "paced only: guard_machine's route in the packaged sidecar as its own process, with the container image's JVM flags, one process for all its"
          + " paced runs, warmed up on a backlog of six times --records before its first and 15 s at the paced rate before each; a record ends when the business receives it, so this benchmark JVM's garbage collection is not in"
          + " the sidecar's figures");

  final String id;
  final boolean paced;
  final String description;

  Scenario(String id, boolean paced, String description) {
    this.id = id;
    this.paced = paced;
    this.description = description;
  }

  static Scenario byId(String id) {
    for (Scenario s : values()) {
      if (s.id.equals(id)) {
        return s;
      }
    }
    throw new IllegalArgumentException("unknown scenario " + id + " (known: " + java.util.Arrays.stream(values()).map(s -> s.id).toList() + ")");
  }

  /** Whether throughput runs measure it (the others are paced only). */
  boolean throughput() {
    return this != GUARD_MACHINE_PROCESS;
  }

  boolean sidecar() {
    return this != HAND_A && this != HAND_B;
  }

  boolean machine() {
    return this == GUARD_MACHINE || this == REPLAY || this == REDIS_DOWN_DUPLICATES || this == GUARD_MACHINE_PROCESS;
  }

  /**
   * Whether a run of this scenario needs its own database (dropped after it; the packaged
   * process's, shared by all its paced runs, when the bench closes it).
   */
  boolean ownDatabase() {
    return this == GUARD_MACHINE || this == GUARD_NO_MACHINE || this == HAND_B || this == GUARD_MACHINE_PROCESS;
  }
}
