package dev.onceguard.bench.contention;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * The markdown fragment of the contention bench (docs/answers.md, Q3): the short answer computed
 * from the figures, the setup, the table, and what each cell rests on. Pure: no I/O.
 */
final class ContentionReport {
  private ContentionReport() {}

  /** The team's FOR UPDATE lock-wait p99, few instances and four. */
  static final double TEAM_FROM_MS = 2;
  static final double TEAM_TO_MS = 45;
  /** "Reproduces": with all instances at least this many times the lock-wait p99 with one ... */
  static final double REPRODUCED_FACTOR = 5;
  /** ... and within a factor of two of the team's 45 ms. */
  static final double REPRODUCED_ALL_FROM_MS = TEAM_TO_MS / 2;
  static final double REPRODUCED_ALL_TO_MS = TEAM_TO_MS * 2;
  /** A p99 moves only when more than this share of transitions waits. */
  static final double P99_SHARE = 0.01;

  /**
   * How the run was made.
   *
   * @param instances the instance processes of the contended cells (the contrast runs one)
   * @param earlyArrivalRetryMs the route's {@code early-arrival-retry}: how long a claim that found its entity busy is parked
   * @param poolSize the claim side's MySQL connections per instance
   */
  record Setup(int entities, int instances, double measureSeconds, double warmupSeconds, long earlyArrivalRetryMs, int poolSize,
      int cpus, String loadBefore, String loadAfter) {}

  record Result(Cell cell, Figures figures) {}

  /** The claim with all instances at one setting with {@code early-arrival-retry} of {@code retryMs}. */
  record Retuned(Setting setting, long retryMs, Figures figures) {}

  /** An RTT and business call, measured for each variant and instance count. */
  record Setting(double rttMs, int holdMs) {
    String text() {
      return "RTT " + num(rttMs) + " ms, " + (holdMs == 0 ? "no business call" : holdMs + " ms call");
    }
  }

  /** @param retuned the claim with a shorter retry, or {@code null} if it was not measured */
  static String render(Setup s, Map<Double, Double> probeMs, List<Result> results, Retuned retuned) {
    return shortAnswer(s, results) + "\n\n" + setup(s) + "\n\n" + table(results) + "\n\n"
        + (retuned == null ? "" : retuned(s, results, retuned) + "\n\n") + footer(s, probeMs, results) + "\n";
  }

  /** The claim with a shorter {@code early-arrival-retry}, beside the same setting's default and FOR UPDATE. */
  static String retuned(Setup s, List<Result> results, Retuned r) {
    Figures f = r.figures();
    Figures byDefault = find(results, Variant.CLAIM, r.setting(), s.instances());
    Figures forUpdate = find(results, Variant.FOR_UPDATE, r.setting(), s.instances());
    return "**A shorter `early-arrival-retry`.** With `early-arrival-retry: " + r.retryMs() + "ms` (" + r.setting().text() + ", "
        + s.instances() + " instances) the claim's p50 / p99 is " + ms(f.p50Ms()) + " / " + ms(f.p99Ms()) + " ms (claim wait p99 "
        + ms(f.waitP99Ms()) + " ms, " + pct(f.metBusyShare()) + " met a busy entity, " + rate(f.perSecond()) + " transitions/s)"
        + (byDefault == null ? "" : ", against " + ms(byDefault.p50Ms()) + " / " + ms(byDefault.p99Ms()) + " ms with the default "
            + s.earlyArrivalRetryMs() + " ms")
        + (forUpdate == null ? "" : " and " + ms(forUpdate.p50Ms()) + " / " + ms(forUpdate.p99Ms()) + " ms for FOR UPDATE")
        + ". The same setting also retries a record that is truly early (its entity not yet in a from-state) that much more"
        + " often, each retry a claim transaction.";
  }

  static String shortAnswer(Setup s, List<Result> results) {
    List<String> out = new ArrayList<>();
    which(s, results).ifPresent(out::add);
    team(s, results).ifPresent(out::add);
    out.addAll(claimSentences(s, results));
    return String.join(" ", out);
  }

  /** The answer to the question: which variant has the lower transition p99 with all instances, per setting. */
  private static Optional<String> which(Setup s, List<Result> results) {
    int all = s.instances();
    List<String> forUpdate = new ArrayList<>();
    List<String> claim = new ArrayList<>();
    List<Double> forUpdateP99 = new ArrayList<>();
    List<Double> claimP99 = new ArrayList<>();
    for (Setting st : settings(results)) {
      Figures f = find(results, Variant.FOR_UPDATE, st, all);
      Figures c = find(results, Variant.CLAIM, st, all);
      if (f != null && c != null) {
        (f.p99Ms() <= c.p99Ms() ? forUpdate : claim).add(st.text() + ": " + ms(f.p99Ms()) + " vs " + ms(c.p99Ms()) + " ms");
        forUpdateP99.add(f.p99Ms());
        claimP99.add(c.p99Ms());
      }
    }
    int n = forUpdateP99.size();
    if (n == 0) {
      return Optional.empty();
    }
    String where = " with " + all + " instances on " + s.entities() + " shared hot entities";
    if (claim.isEmpty() || forUpdate.isEmpty()) {
      boolean fu = claim.isEmpty();
      return Optional.of("**" + (fu ? "FOR UPDATE" : "OnceGuard's claim") + " has the better transition p99" + where
          + (n == 1 ? "" : ", in all " + n + " settings") + "**: " + range(fu ? forUpdateP99 : claimP99) + " ms against "
          + range(fu ? claimP99 : forUpdateP99) + " ms for " + (fu ? "the claim" : "FOR UPDATE") + " (business call included).");
    }
    return Optional.of("**Neither has the better transition p99 everywhere**" + where + ": FOR UPDATE in " + forUpdate.size()
        + " of " + n + " settings (" + String.join("; ", forUpdate) + "), OnceGuard's claim in " + claim.size() + " ("
        + String.join("; ", claim) + "), FOR UPDATE first.");
  }

  /** Whether the team's FOR UPDATE lock-wait jump reproduces, and in which setting; FOR UPDATE without a business call. */
  private static Optional<String> team(Setup s, List<Result> results) {
    int all = s.instances();
    List<String> reproduced = new ArrayList<>();
    boolean onlyWithCall = true;
    Setting worst = null;
    for (Setting st : settings(results)) {
      Figures one = find(results, Variant.FOR_UPDATE, st, 1);
      Figures many = find(results, Variant.FOR_UPDATE, st, all);
      if (one == null || many == null) {
        continue;
      }
      if (reproduces(one.waitP99Ms(), many.waitP99Ms())) {
        reproduced.add(ms(one.waitP99Ms()) + " → " + ms(many.waitP99Ms()) + " ms at " + st.text());
        onlyWithCall &= st.holdMs() > 0;
      }
      if (worst == null || many.waitP99Ms() > find(results, Variant.FOR_UPDATE, worst, all).waitP99Ms()) {
        worst = st;
      }
    }
    if (worst == null) {
      return Optional.empty();
    }
    String jump = "The team's FOR UPDATE jump (lock-wait p99 " + num(TEAM_FROM_MS) + " → " + num(TEAM_TO_MS) + " ms; here: with "
        + all + " instances within a factor of 2 of " + num(TEAM_TO_MS) + " ms and at least " + num(REPRODUCED_FACTOR)
        + " times the p99 with 1)";
    String text;
    if (!reproduced.isEmpty()) {
      text = jump + " **reproduces" + (onlyWithCall ? " with the business call inside the transaction" : "") + "**: "
          + String.join("; ", reproduced) + ", from 1 to " + all + " instances.";
    } else {
      text = jump + " **does not reproduce here**: the largest lock-wait p99 with " + all + " instances is "
          + ms(find(results, Variant.FOR_UPDATE, worst, all).waitP99Ms()) + " ms (" + worst.text() + "), against "
          + ms(find(results, Variant.FOR_UPDATE, worst, 1).waitP99Ms()) + " ms with 1.";
    }
    List<String> noCall = new ArrayList<>();
    for (Setting st : settings(results)) {
      Figures many = find(results, Variant.FOR_UPDATE, st, all);
      if (st.holdMs() == 0 && many != null) {
        noCall.add(ms(many.waitP99Ms()) + " ms at RTT " + num(st.rttMs()) + " ms");
      }
    }
    if (!noCall.isEmpty()) {
      text += " Without a business call in the transaction it is " + join(noCall) + " with " + all + " instances.";
    }
    return Optional.of(text);
  }

  /** The team's jump, by the criterion the page states. */
  static boolean reproduces(double oneMs, double allMs) {
    return allMs >= REPRODUCED_ALL_FROM_MS && allMs <= REPRODUCED_ALL_TO_MS && allMs >= REPRODUCED_FACTOR * oneMs;
  }

  /** What sets the claim's figures: parked busy entities with several instances, round trips with one. */
  private static List<String> claimSentences(Setup s, List<Result> results) {
    List<String> out = new ArrayList<>();
    int all = s.instances();
    List<Double> busy = new ArrayList<>();
    List<Double> parkedP99 = new ArrayList<>();
    for (Setting st : settings(results)) {
      Figures c = find(results, Variant.CLAIM, st, all);
      if (c != null) {
        busy.add(c.metBusyShare());
        if (c.metBusyShare() > P99_SHARE) {
          parkedP99.add(c.p99Ms());
        }
      }
    }
    if (!busy.isEmpty()) {
      double lo = busy.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
      double hi = busy.stream().mapToDouble(Double::doubleValue).max().orElseThrow();
      out.add("The claim holds no row lock past its COMMIT, so a business call lengthens no other instance's wait; but a claim"
          + " that finds its entity busy (another instance between claim and confirm) is parked for `early-arrival-retry` ("
          + s.earlyArrivalRetryMs() + " ms) while its instance goes on with other records. With " + all + " instances "
          + pct(lo) + (hi > lo ? "–" + pct(hi) : "") + " of the claim's transitions met a busy entity"
          + (parkedP99.isEmpty() ? "." : "; in the " + parkedP99.size() + " setting" + (parkedP99.size() == 1 ? "" : "s")
              + " where more than " + pct(P99_SHARE) + " did, that wait sets the claim's p99 (" + range(parkedP99) + " ms)."));
    }
    Setting far = null;
    for (Setting st : settings(results)) {
      if (st.holdMs() == 0 && find(results, Variant.CLAIM, st, 1) != null && find(results, Variant.FOR_UPDATE, st, 1) != null
          && (far == null || st.rttMs() > far.rttMs())) {
        far = st;
      }
    }
    if (far != null && far.rttMs() > 0) {
      out.add("Uncontended (1 instance) the difference is round trips, 3 for FOR UPDATE and 5 for claim and confirm: at RTT "
          + num(far.rttMs()) + " ms their p50 is " + ms(find(results, Variant.FOR_UPDATE, far, 1).p50Ms()) + " vs "
          + ms(find(results, Variant.CLAIM, far, 1).p50Ms()) + " ms.");
    }
    return out;
  }

  /** "a–b" of the values in milliseconds, or the one value. */
  private static String range(List<Double> values) {
    double lo = values.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
    double hi = values.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
    return ms(lo).equals(ms(hi)) ? ms(lo) : ms(lo) + "–" + ms(hi);
  }

  static String setup(Setup s) {
    double held = (double) (s.instances() - 1) / s.entities();
    return String.format(Locale.ROOT, """
        **Setup.** %d instance processes (separate JVMs; 1 for contrast), each making one transition at a time on one of %d \
        hot entities picked at random, the same entities for every instance: while the other %d instances each hold an entity, \
        about %d/%d = %s of transitions find theirs held, more than the %s a p99 needs to move (the team's lock-wait p99 moved, \
        so at least that share of their transitions waited). MySQL is reached through a user-space delaying TCP proxy (each \
        chunk held RTT/2 in each direction; netem is not available on this kernel), the same for both variants.

        - **FOR UPDATE**: one JDBC connection per instance, autocommit off: `SELECT … FOR UPDATE`, the business call (a sleep), \
        `UPDATE`, `COMMIT`. 3 round trips; the row lock is held across the call.
        - **Claim**: the sidecar's own MySQL store (`MysqlGuardStore`, pool of %d connections, group commit, owner \
        heartbeat; L1 not involved, since every transition is a new fact): claim (`BEGIN`, ledger `INSERT`, the entity's CAS \
        `UPDATE`, `COMMIT`), the business call, confirm (one `UPDATE`). 5 round trips; no lock is held during the call. A \
        claim whose CAS is lost to another instance's pending transition is parked for `early-arrival-retry` and claimed \
        again, as the sidecar's pipeline parks a record whose entity is busy, while the instance goes on with new records. \
        (Within one sidecar, a record waiting for an earlier record of its entity in the same partition is woken as soon as \
        that one finishes; the whole `early-arrival-retry` is waited when the entity is held by another process, as here: \
        another consumer group's route on the same entities, or a copy of the record on another partition.)
        - The machine has one state and a self-loop, so a transition is legal whenever its entity is free: every conflict is \
        over the entity, never a state mismatch. A lost CAS is parked and claimed again, as the sidecar's `Guard` answers \
        one that finds the entity busy, or free again in the transition's from-state.
        - *Latency*: from a transition's start to its `COMMIT` or confirm, business call included. *Lock wait*: the time in \
        `SELECT … FOR UPDATE`, its round trip included. *Claim wait*: from the first claim attempt to the accepted claim \
        (round trips and parked time included). *Met busy*: transitions whose claim lost its CAS at least once.""",
        s.instances(), s.entities(), s.instances() - 1, s.instances() - 1, s.entities(), pct(held), pct(P99_SHARE), s.poolSize());
  }

  static String table(List<Result> results) {
    StringBuilder sb = new StringBuilder();
    sb.append("| MySQL RTT | business call | instances | FOR UPDATE p50 / p99 | lock wait p50 / p99 | transitions/s |")
        .append(" claim p50 / p99 | claim wait p50 / p99 | met busy | transitions/s |\n");
    sb.append("|---|---|---|---|---|---|---|---|---|---|\n");
    Set<Integer> counts = new TreeSet<>();
    results.forEach(r -> counts.add(r.cell().instances()));
    for (Setting st : settings(results)) {
      for (int n : counts) {
        Figures f = find(results, Variant.FOR_UPDATE, st, n);
        Figures c = find(results, Variant.CLAIM, st, n);
        if (f == null && c == null) {
          continue;
        }
        sb.append("| ").append(num(st.rttMs())).append(" ms | ").append(st.holdMs()).append(" ms | ").append(n).append(" | ")
            .append(f == null ? "– | – | –" : ms(f.p50Ms()) + " / " + ms(f.p99Ms()) + " | " + ms(f.waitP50Ms()) + " / "
                + ms(f.waitP99Ms()) + " | " + rate(f.perSecond()))
            .append(" | ")
            .append(c == null ? "– | – | – | –" : ms(c.p50Ms()) + " / " + ms(c.p99Ms()) + " | " + ms(c.waitP50Ms()) + " / "
                + ms(c.waitP99Ms()) + " | " + pct(c.metBusyShare()) + " | " + rate(c.perSecond()))
            .append(" |\n");
      }
    }
    return sb.toString().stripTrailing();
  }

  static String footer(Setup s, Map<Double, Double> probeMs, List<Result> results) {
    Result fewest = null;
    for (Result r : results) {
      if (fewest == null || r.figures().count() < fewest.figures().count()) {
        fewest = r;
      }
    }
    List<String> lines = new ArrayList<>();
    if (fewest != null) {
      Cell c = fewest.cell();
      int n = fewest.figures().count();
      lines.add(String.format(Locale.ROOT, "Each cell: %s s measured after %s s of warm-up; the fewest transitions in a cell: %d (%s,"
              + " %s, %d instance%s)%s.", num(s.measureSeconds()), num(s.warmupSeconds()), n,
          c.variant() == Variant.FOR_UPDATE ? "FOR UPDATE" : "claim", new Setting(c.rttMs(), c.holdMs()).text(), c.instances(),
          c.instances() == 1 ? "" : "s", n < 100 ? "; the p99 of fewer than 100 transitions is their largest" : ""));
    }
    if (!probeMs.isEmpty()) {
      lines.add("`SELECT 1` through the proxy, median: " + probeMs.entrySet().stream()
          .map(e -> ms(e.getValue()) + " ms at RTT " + num(e.getKey()) + " ms").collect(Collectors.joining(", ")) + ".");
    }
    lines.add("Load average " + s.loadBefore() + " before and " + s.loadAfter() + " after, on " + s.cpus() + " cores shared by"
        + " every instance, the proxy and MariaDB.");
    return String.join(" ", lines);
  }

  static List<Setting> settings(List<Result> results) {
    Set<Setting> out = new LinkedHashSet<>();
    results.forEach(r -> out.add(new Setting(r.cell().rttMs(), r.cell().holdMs())));
    return new ArrayList<>(out);
  }

  static Figures find(List<Result> results, Variant v, Setting st, int instances) {
    for (Result r : results) {
      Cell c = r.cell();
      if (c.variant() == v && c.rttMs() == st.rttMs() && c.holdMs() == st.holdMs() && c.instances() == instances) {
        return r.figures();
      }
    }
    return null;
  }

  private static String join(List<String> parts) {
    if (parts.size() <= 1) {
      return String.join("", parts);
    }
    return String.join(", ", parts.subList(0, parts.size() - 1)) + " and " + parts.get(parts.size() - 1);
  }

  /** Milliseconds: one decimal below 10, whole above; a dash for no value. */
  static String ms(double v) {
    if (Double.isNaN(v)) {
      return "–";
    }
    return v < 10 ? String.format(Locale.ROOT, "%.1f", v) : String.format(Locale.ROOT, "%.0f", v);
  }

  static String pct(double share) {
    return String.format(Locale.ROOT, share < 0.1 ? "%.1f%%" : "%.0f%%", share * 100);
  }

  private static String rate(double perSecond) {
    return String.format(Locale.ROOT, "%.0f", perSecond);
  }

  /** A setting's value as given: 2, 0.5. */
  static String num(double v) {
    return v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%s", v);
  }
}
