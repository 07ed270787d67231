package dev.onceguard.proxy.guard;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.extract.ExtractedEvent;
import dev.onceguard.proxy.extract.FieldDigests;
import dev.onceguard.proxy.store.EntityRow;
import dev.onceguard.proxy.store.LedgerRow;
import dev.onceguard.proxy.store.Source;
import dev.onceguard.v1.AppliedFact;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import java.util.List;

/**
 * What a refused claim means (the design's "Processing one record", step 3): the store reports
 * facts — the ledger row that refused the INSERT, the entity whose CAS was lost, the rows that
 * applied a transition — and this class turns them into a verdict or into the next store step.
 * Pure and stateless: no I/O, no clock of its own (the attempt carries the caller's now, used only
 * to schedule retries; liveness comes from the database's clock inside the facts).
 */
final class ClaimPolicy {
  private ClaimPolicy() {}

  /**
   * One claim as the policy sees it.
   *
   * @param machine the route's machine, {@code null} without one
   * @param event the machine's event, {@code null} without one
   * @param ownAttemptActive this process still works on an earlier attempt of the same dedup key
   * @param nowMillis the caller's clock, to schedule retries
   */
  record Attempt(String route, StateMachine machine, EventConfig event, ExtractedEvent extracted, Source source, String owner,
      boolean ownAttemptActive, long nowMillis, long earlyArrivalRetryMillis) {

    Verdict.Builder verdict() {
      return Verdicts.base(route, extracted).addAllExpectedFromStates(event == null ? List.of() : event.from());
    }

    boolean fromKafka() {
      return source.partition() >= 0;
    }
  }

  /** The next thing to do. */
  sealed interface Decision {}

  /** A verdict or a wait: the claim attempt ends here. */
  record Done(ClaimResult result) implements Decision {}

  /** Take the row over (fenced in the store); {@code force}: our own abandoned attempt, though live. */
  record TakeOver(LedgerRow row, boolean force) implements Decision {}

  /** The entity is held by a claim whose lease ended: undo it if it is an abandoned API claim. */
  record ReleaseExpired(EntityRow entity) implements Decision {}

  /** The transition was applied already: read which rows applied it, then {@link #onApplied}. */
  record CompareApplied(EntityRow entity) implements Decision {}

  /** The facts went stale: claim again. */
  record Again(String why) implements Decision {}

  /** The INSERT of the ledger row was refused by {@code row}. */
  static Decision onLedgerConflict(Attempt a, LedgerRow row) {
    ExtractedEvent e = a.extracted();
    boolean sameSource = row.claimedFor(a.source());
    boolean thisKafkaRecord = sameSource && a.fromKafka();
    if (row.done() && thisKafkaRecord) {
      // the very record that applied the key, consumed again (its verdict or offset commit was lost
      // in a crash or rebalance): its outcome is ACCEPTED, said again without calling the business,
      // so that the last verdict of every record is its true one. By source coordinates, whatever
      // the fingerprint says now: a configuration changed since the confirm changes nothing.
      return done(new ClaimResult.Rejected(Verdicts.replayedAccept(a.verdict(), "applied and confirmed from this same record ("
          + row.source() + ") earlier; the business is not called again")));
    }
    if (row.rejected()) {
      // the business rejected a record under this key and the rejection undid it, so no fact
      // holds the key: this is the record's replay (rebalance, restart) or its re-drive after a
      // fix, possibly with corrected content. Claimed again, flagged, since the business has seen
      // the key; the rejected record itself stays on the escalation topic, so nothing is lost.
      return new TakeOver(row, false);
    }
    boolean ours = row.owner() != null && row.owner().equals(a.owner());
    long untilNotLive = a.nowMillis() + row.millisUntilNotLive();
    if (!row.done() && !a.fromKafka() && !row.apiClaim()) {
      // a Guard API caller never takes over a Kafka record's claim, live or not: Kafka redelivers
      // that record to its partition's next owner, which finishes it; a claim handed to the caller
      // instead would leave the Kafka record IN_FLIGHT behind a claim nobody redelivers
      return done(new ClaimResult.Rejected(Verdicts.duplicateOf(a.verdict(), Layer.LEDGER, Reason.IN_FLIGHT,
          "in flight from Kafka record " + row.source() + " (owner " + row.owner() + "), which its partition's owner finishes",
          a.nowMillis(), row.originalAtMillis())));
    }
    if (!row.fingerprint().equals(e.fingerprint()) && !(thisKafkaRecord && !row.done())) {
      // a PENDING claim of this very record is taken over whatever its fingerprint: the record is
      // the same, only the configuration (fingerprint-exclude) changed since it was claimed
      Verdict.Builder vb = differing(a.verdict().setApplied(appliedFact(row)), e, row);
      return done(new ClaimResult.Rejected(Verdicts.escalate(vb, Layer.LEDGER, Reason.KEY_COLLISION,
          "dedup key already used by a record with different content (ledger row " + row.status() + " from " + row.source()
              + differingText(vb) + "): the configured business key does not identify the record; add the missing field")));
    }
    if (row.done()) {
      return done(new ClaimResult.Rejected(Verdicts.duplicateOf(a.verdict(), Layer.LEDGER, Reason.LEDGER_HIT,
          "already confirmed from " + row.source(), a.nowMillis(), row.originalAtMillis())));
    }
    if (row.live() && row.apiClaim() && a.fromKafka()) {
      // held by a Guard API caller: unlike a Kafka owner, nothing redelivers its record if the
      // caller goes away, so a Kafka copy is never ignored: it waits for the claim to end. The same
      // answer in every process, the API claim's own included.
      return done(new ClaimResult.Wait(ClaimResult.Wait.Kind.OWN_LEASE_LIVE, untilNotLive,
          Verdicts.escalate(a.verdict(), Layer.LEDGER, Reason.IN_FLIGHT, "dedup key claimed through the Guard API by " + row.owner())));
    }
    if (ours && a.ownAttemptActive()) {
      // another attempt in this process still works on the key (its lease may even have lapsed
      // during a store outage): never run two at once; it finishes or gives it up
      long retryAt = sameSource && row.live() ? untilNotLive : a.nowMillis() + a.earlyArrivalRetryMillis();
      return done(new ClaimResult.Wait(sameSource ? ClaimResult.Wait.Kind.OWN_LEASE_LIVE : ClaimResult.Wait.Kind.KEY_HELD,
          retryAt, Verdicts.escalate(sinceClaimed(a, row), Layer.LEDGER, Reason.IN_FLIGHT, "dedup key still in flight in this process")));
    }
    if (row.live() && !sameSource) {
      return done(new ClaimResult.Rejected(Verdicts.duplicateOf(a.verdict(), Layer.LEDGER, Reason.IN_FLIGHT,
          "in flight from " + row.source() + " (owner " + row.owner() + ")", a.nowMillis(), row.originalAtMillis())));
    }
    if (row.live()) {
      if (ours) {
        // our own earlier, abandoned attempt of this very record: nobody forwards it now
        return new TakeOver(row, true);
      }
      return done(new ClaimResult.Wait(ClaimResult.Wait.Kind.OWN_LEASE_LIVE, untilNotLive,
          Verdicts.escalate(a.verdict(), Layer.LEDGER, Reason.IN_FLIGHT, "claim of this record by " + row.owner() + " did not expire")));
    }
    // lease over, or its owner stopped heartbeating
    return new TakeOver(row, false);
  }

  /**
   * The entity's CAS was lost; {@code entity} is its row read afterwards ({@code null}: none),
   * {@code keyRow} the ledger row of the attempt's own dedup key read with it ({@code null}: none).
   * A PENDING or DONE row there was written by another record after this claim's row was rolled
   * back: the key is held, so the ledger decides (LEDGER_HIT, IN_FLIGHT, KEY_COLLISION, a
   * takeover), exactly as if the INSERT had been refused. The machine would see the same copy as a
   * transition applied by other content or pending, and call it ALREADY_APPLIED or make it wait.
   * A REJECTED row holds no fact: the entity decides.
   */
  static Decision onCasLost(Attempt a, EntityRow entity, LedgerRow keyRow) {
    if (keyRow != null && !keyRow.rejected()) {
      return onLedgerConflict(a, keyRow);
    }
    if (entity == null && a.event().creating()) {
      return new Again("the entity was deleted (creation aborted) between the claim and the read");
    }
    if (entity != null && entity.busy() && entity.pendingExpired()) {
      return new ReleaseExpired(entity);
    }
    return classify(a, entity);
  }

  /**
   * The entity is held by a claim whose lease ended and which is not an abandoned Guard API claim;
   * {@code rows} are the PENDING ledger rows under its key. If it is this very Kafka record's claim
   * (same route and source coordinates), made under another dedup key (the business key changed
   * across a restart) by an owner that is gone, it is taken over: the record goes on under that
   * claim's key, flagged, since the business may have seen it. Otherwise the machine decides.
   */
  static Decision onExpiredPending(Attempt a, EntityRow entity, List<LedgerRow> rows) {
    if (a.fromKafka() && rows.size() == 1) {
      LedgerRow r = rows.get(0);
      boolean thisRecord = r.route().equals(a.route()) && r.claimedFor(a.source());
      if (thisRecord && !r.live()) {
        return new TakeOver(r, false);
      }
    }
    return classify(a, entity, rows.isEmpty());
  }

  /** The machine's view of a lost CAS, once any expired claim on the entity was dealt with. */
  static Decision classify(Attempt a, EntityRow entity) {
    return classify(a, entity, false);
  }

  /**
   * @param orphaned the entity's expired pending key has no PENDING ledger row: no claim holds it,
   *     so nothing can confirm, abort or take it over, and the verdict says how to release it
   */
  static Decision classify(Attempt a, EntityRow entity, boolean orphaned) {
    EventConfig ev = a.event();
    Verdict.Builder vb = withEntity(a.verdict(), entity);
    StateMachine.Classification cl = a.machine().classify(ev, entity == null ? null : entity.state(), entity != null && entity.busy());
    switch (cl) {
      case ALREADY_APPLIED:
        return new CompareApplied(entity);
      case EARLY_ARRIVAL: {
        boolean busy = entity != null && entity.busy();
        String why = entity == null ? "entity does not exist yet"
            : busy ? "entity has another transition pending (dedup key " + entity.pendingKey()
                + (orphaned
                    ? ", its lease expired " + entity.pendingOverdueMillis() + " ms ago and no ledger row holds that key, so no claim"
                        + " can finish it: `reset-entity --release-orphan` releases the entity"
                    : entity.pendingExpired()
                    ? ", its lease expired " + entity.pendingOverdueMillis() + " ms ago and nobody took it over: see Explain" : "")
                + ")"
            : "entity is in '" + entity.state() + "', not yet in " + ev.from();
        Verdict timeout = Verdicts.escalate(vb, Layer.STATE_MACHINE, Reason.OUT_OF_ORDER,
            "'" + ev.name() + "' arrived early and the entity never reached " + ev.from() + ": " + why);
        return done(new ClaimResult.Wait(busy ? ClaimResult.Wait.Kind.ENTITY_BUSY : ClaimResult.Wait.Kind.EARLY_ARRIVAL,
            a.nowMillis() + a.earlyArrivalRetryMillis(), timeout));
      }
      default:
        return done(new ClaimResult.Rejected(Verdicts.escalate(vb, Layer.STATE_MACHINE, Reason.ILLEGAL_TRANSITION,
            "'" + ev.name() + "' is not allowed from '" + entity.state() + "' (allowed from " + ev.from() + ")")));
    }
  }

  /**
   * The transition was applied already. Whether this record is what applied it is told by content:
   * a DONE row of the entity and event with this record's fingerprint makes it a re-send
   * (ALREADY_APPLIED, safe to ignore); anything else is a distinct fact the entity cannot hold, and
   * is escalated, never dropped (CONFLICTING_FACT).
   *
   * @param applied the DONE rows of the entity and event, those with this fingerprint first
   */
  static ClaimResult onApplied(Attempt a, EntityRow entity, List<LedgerRow> applied) {
    EventConfig ev = a.event();
    Verdict.Builder vb = withEntity(a.verdict(), entity);
    String where = "entity is already in '" + entity.state() + "' (version " + entity.version() + "); '" + ev.name()
        + "' leads to '" + ev.to() + "'";
    for (LedgerRow r : applied) {
      if (r.fingerprint().equals(a.extracted().fingerprint())) {
        return new ClaimResult.Rejected(Verdicts.duplicateOf(vb, Layer.STATE_MACHINE, Reason.ALREADY_APPLIED,
            where + ", applied by the same content from " + r.source() + " (business key " + r.businessKey() + ")", a.nowMillis(),
            r.originalAtMillis()));
      }
    }
    if (applied.isEmpty()) {
      return new ClaimResult.Rejected(Verdicts.escalate(vb, Layer.STATE_MACHINE, Reason.CONFLICTING_FACT,
          where + ", and no confirmed ledger row of it is left to compare this record with (purged, or applied outside"
              + " OnceGuard): it may be a distinct fact, so it is not ignored"));
    }
    LedgerRow r = applied.get(0);
    differing(vb.setApplied(appliedFact(r)), a.extracted(), r);
    return new ClaimResult.Rejected(Verdicts.escalate(vb, Layer.STATE_MACHINE, Reason.CONFLICTING_FACT,
        where + ", applied by a record with different content (" + r.businessKey() + " from " + r.source() + differingText(vb)
            + "): a distinct fact the entity cannot hold; if both are real, the entity must be finer (e.g. the order line"
            + " rather than the order)"));
  }

  /** The attempt's verdict with the age of {@code row}'s claim: a Guard API caller told "in progress" learns when it began. */
  private static Verdict.Builder sinceClaimed(Attempt a, LedgerRow row) {
    Verdict.Builder vb = a.verdict();
    if (row.originalAtMillis() != null) {
      vb.setOriginalAgeMs(Math.max(0, a.nowMillis() - row.originalAtMillis()));
    }
    return vb;
  }

  private static AppliedFact appliedFact(LedgerRow r) {
    return AppliedFact.newBuilder().setRoute(r.route()).setDedupKey(r.dedupKey()).setBusinessKey(r.businessKey())
        .setSourceTopic(r.sourceTopic()).setSourcePartition(r.sourcePartition()).setSourceOffset(r.sourceOffset()).build();
  }

  /**
   * Adds the fields in which the record differs from the applied row (by the row's digest map; none
   * when either side keeps no digests), at most {@value FieldDigests#MAX_DIFFERENCES}.
   */
  private static Verdict.Builder differing(Verdict.Builder vb, ExtractedEvent e, LedgerRow applied) {
    FieldDigests.Differences d = e.fields().differencesFrom(applied.fieldDigests());
    return vb.addAllDifferingFields(d.fields()).setDifferingFieldsTruncated(d.truncated());
  }

  /** The differing pointers for a verdict's detail (names only, never values). */
  private static String differingText(Verdict.Builder vb) {
    if (vb.getDifferingFieldsCount() == 0) {
      return "";
    }
    StringBuilder sb = new StringBuilder("; differing fields: ");
    for (int i = 0; i < vb.getDifferingFieldsCount(); i++) {
      sb.append(i == 0 ? "" : ", ").append(vb.getDifferingFields(i).getPointer());
    }
    return sb.append(vb.getDifferingFieldsTruncated() ? ", …" : "").toString();
  }

  private static Verdict.Builder withEntity(Verdict.Builder vb, EntityRow entity) {
    if (entity != null) {
      vb.setCurrentState(entity.state()).setCurrentVersion(entity.version());
    }
    return vb;
  }

  private static Decision done(ClaimResult r) {
    return new Done(r);
  }
}
