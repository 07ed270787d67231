package dev.onceguard.it.scenario;

/**
 * The cases of the Q5 experiment ({@link UpstreamOnly}), in the order it runs them, and where
 * their duplicates come from, which decides whether a producer could remove them.
 */
enum UpstreamCase {
  KILL_NINE("kill", "one kill -9", "kill -9 of one of two instances, a replacement joins at once", Origin.CONSUMER),
  REBALANCE("rebalance", "a join and a leave", "a third instance joins, then one of the first two leaves (SIGTERM)", Origin.CONSUMER),
  BROKER_RESTART("broker", "a broker restart", "the broker killed (kill -9) and started again on its data", Origin.CONSUMER),
  LATE_COMPENSATION("late", "the compensation 9 days late", "a compensation re-run re-publishes facts of 9 days ago (business time in"
      + " the payload): same business key and Kafka key, new message id", Origin.LATE_RESEND),
  REKEYED_RESEND("rekeyed", "the re-keyed re-sends", "re-sends of facts of the same stream with a new message id and a new Kafka key",
      Origin.REKEYED_RESEND);

  /** Where a case's duplicates are made. */
  enum Origin {
    /** After the producer: the consumer delivers a record again. */
    CONSUMER("No: the producer sent every fact once; the consumer delivered records again after the fault. Only a check at the"
        + " consumer or the business sees them."),
    /** The producer sends a fact again long after the first time. */
    LATE_RESEND("Only with a store of every sent business key kept longer than the re-run is late (9 days here; the team's longest"
        + " re-run is 28 days)."),
    /** The producer sends a fact again under a new identity. */
    REKEYED_RESEND("Only if its store is keyed by the business key, not by the message id or Kafka key that changed.");

    /** Whether, and with what, a producer could remove these duplicates. */
    final String upstreamCanDedup;

    Origin(String upstreamCanDedup) {
      this.upstreamCanDedup = upstreamCanDedup;
    }
  }

  /** The case's prefix of message ids ({@link FactStream}). */
  final String id;
  /** A few words, for a sentence. */
  final String label;
  final String what;
  final Origin origin;

  UpstreamCase(String id, String label, String what, Origin origin) {
    this.id = id;
    this.label = label;
    this.what = what;
    this.origin = origin;
  }
}
