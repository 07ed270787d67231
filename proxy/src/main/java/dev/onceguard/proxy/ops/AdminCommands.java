package dev.onceguard.proxy.ops;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import dev.onceguard.proxy.store.Db;
import dev.onceguard.proxy.store.MysqlGuardStore;
import dev.onceguard.proxy.store.AdminQueries.ResetOutcome;
import dev.onceguard.v1.Decision;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.ExplainResponse;
import dev.onceguard.v1.Layer;
import dev.onceguard.v1.LedgerEntry;
import dev.onceguard.v1.Reason;
import dev.onceguard.v1.Verdict;
import dev.onceguard.wire.Headers;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * The operator's commands: {@code explain} (what the ledger, the entity and the decision log say
 * about a key or an entity), {@code reset-entity} (set an entity's state by hand, audited) and
 * {@code redrive} (produce escalated records to their original topic again after a fix). Each
 * takes the sidecar's {@code --config} and talks to the stores directly; none needs a running
 * sidecar.
 */
final class AdminCommands {
  private AdminCommands() {}

  /** Exit code: the command ran but refused (an entity busy, nothing matched a required filter). */
  static final int EXIT_REFUSED = 3;

  static RouteConfig route(SidecarConfig cfg, String name) {
    return cfg.routes().stream().filter(r -> r.name().equals(name)).findFirst()
        .orElseThrow(() -> new IllegalArgumentException("--route: no route named '" + name + "' (configured: "
            + String.join(", ", cfg.routes().stream().map(RouteConfig::name).toList()) + ")"));
  }

  @Command(name = "explain", mixinStandardHelpOptions = true,
      description = "Print what the ledger, the entity and the decision log say about a dedup key or an entity.")
  static final class Explain extends Main.ConfigCommand {
    @Option(names = "--route", required = true, paramLabel = "NAME", description = "The route whose ledger and machine to read.")
    String route;

    @Parameters(arity = "0..1", paramLabel = "KEY", description = "Dedup key (lower-case hex SHA-256, as in verdicts and headers).")
    String key;

    @Option(names = "--entity", paramLabel = "ID", description = "Entity id instead of a key: its ledger rows, state and decisions.")
    String entity;

    @Option(names = "--limit", defaultValue = "50", description = "Decisions to show, newest first (default ${DEFAULT-VALUE}).")
    int limit;

    @Override
    int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) {
      if ((key == null) == (entity == null)) {
        err.println("usage error: give a dedup KEY or --entity ID (one of them)");
        err.flush();
        return Main.EXIT_CONFIG;
      }
      RouteConfig r;
      try {
        r = route(cfg, route);
      } catch (IllegalArgumentException e) {
        err.println("config error: " + e.getMessage());
        err.flush();
        return Main.EXIT_CONFIG;
      }
      try (MysqlGuardStore store = new MysqlGuardStore(new Db(cfg.mysql()), cfg.mysql().tablePrefix())) {
        ExplainResponse x = store.explain(r.name(), r.machine(), key, entity, limit).toCompletableFuture().join();
        print(x, out);
        out.flush();
        return x.getLedgerCount() == 0 && !x.hasEntity() && x.getDecisionsCount() == 0 ? EXIT_REFUSED : Main.EXIT_OK;
      } catch (RuntimeException e) {
        err.println("error: could not read MySQL (" + cfg.mysql() + "): " + rootMessage(e));
        err.flush();
        return Main.EXIT_FAILURE;
      }
    }

    static void print(ExplainResponse x, PrintWriter out) {
      if (x.hasEntity()) {
        var e = x.getEntity();
        out.printf(Locale.ROOT, "entity %s/%s: state %s, version %d%s, updated %s%n", e.getMachine(), e.getEntityId(), e.getState(),
            e.getVersion(), !e.getPendingKey().isEmpty() ? ", transition in flight (pending key " + e.getPendingKey() + ")" : "",
            Instant.ofEpochMilli(e.getUpdatedAtMs()));
      } else {
        out.println("entity: none");
      }
      out.println("ledger: " + (x.getLedgerCount() == 0 ? "no rows" : x.getLedgerCount() + " row(s)"));
      for (LedgerEntry l : x.getLedgerList()) {
        out.printf(Locale.ROOT, "  %s %s %s%s attempts %d, %s from %s/%d@%d, key %s (%s)%n", l.getStatus(), l.getEvent().isEmpty() ? "-" : l.getEvent(),
            l.getFromState().isEmpty() ? "" : l.getFromState() + " -> ", l.getToState(), l.getAttempts(),
            Instant.ofEpochMilli(l.getCreatedAtMs()), l.getSourceTopic(), l.getSourcePartition(), l.getSourceOffset(), l.getDedupKey(),
            l.getBusinessKey());
      }
      out.println("decisions: " + (x.getDecisionsCount() == 0 ? "none" : x.getDecisionsCount() + ", newest first"));
      for (Decision d : x.getDecisionsList()) {
        Verdict v = d.getVerdict();
        out.printf(Locale.ROOT, "  %s %s/%s/%s%s: %s%n", Instant.ofEpochMilli(d.getAtMs()), v.getDisposition(), v.getLayer(), v.getReason(),
            d.getSourceTopic().isEmpty() ? "" : " " + d.getSourceTopic() + "/" + d.getSourcePartition() + "@" + d.getSourceOffset(),
            v.getDetail());
      }
    }
  }

  @Command(name = "reset-entity", mixinStandardHelpOptions = true,
      description = "Set an entity's state by hand (a repair), unless a transition is in flight on it; recorded in the decision log.")
  static final class ResetEntity extends Main.ConfigCommand {
    @Option(names = "--route", required = true, paramLabel = "NAME", description = "A route of the entity's machine.")
    String route;

    @Option(names = "--entity", required = true, paramLabel = "ID", description = "Entity id.")
    String entity;

    @Option(names = "--state", required = true, paramLabel = "STATE", description = "The state to set; one of the machine's states.")
    String state;

    @Option(names = "--reason", required = true, paramLabel = "TEXT", description = "Why (kept in the decision log with the user name).")
    String reason;

    @Option(names = "--release-orphan", description = "If the transition in flight is orphaned (its lease ended or its owner is gone,"
        + " e.g. its route was removed), release it first: its ledger row is kept as REJECTED, so a later delivery of it is flagged"
        + " as a redelivery. A live claim is never released.")
    boolean releaseOrphan;

    @Override
    int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) {
      RouteConfig r;
      try {
        r = route(cfg, route);
        if (r.machine() == null) {
          throw new IllegalArgumentException("--route: route '" + route + "' has no state machine, so it has no entities");
        }
        List<String> states = cfg.machines().get(r.machine()).states();
        if (!states.contains(state)) {
          throw new IllegalArgumentException("--state: '" + state + "' is not a state of machine '" + r.machine() + "' " + states);
        }
      } catch (IllegalArgumentException e) {
        err.println("config error: " + e.getMessage());
        err.flush();
        return Main.EXIT_CONFIG;
      }
      String who = System.getProperty("user.name", "unknown");
      Verdict audit = Verdict.newBuilder().setRoute(r.name()).setEntityId(entity).setDisposition(Disposition.DISPOSITION_UNSPECIFIED)
          .setLayer(Layer.OPERATOR).setReason(Reason.OPERATOR_RESET)
          .setDetail("reset-entity by " + who + " to '" + state + "': " + reason).build();
      try (MysqlGuardStore store = new MysqlGuardStore(new Db(cfg.mysql()), cfg.mysql().tablePrefix())) {
        ResetOutcome o = store.resetEntity(r.machine(), entity, state, audit, System.currentTimeMillis(), releaseOrphan);
        if (o instanceof ResetOutcome.Busy b) {
          err.printf(Locale.ROOT, "refused: entity %s/%s has a transition in flight (pending key %s); nothing was changed. %s%n",
              r.machine(), entity, b.pendingKey(), b.live()
                  ? "Its owner is alive and its lease runs: let it finish (explain --entity shows it) and run this again."
                  : "Its claim is orphaned (lease ended, or its owner is gone): --release-orphan releases it first.");
          err.flush();
          return EXIT_REFUSED;
        }
        ResetOutcome.Reset done = (ResetOutcome.Reset) o;
        if (done.releasedClaim() != null) {
          out.printf(Locale.ROOT, "released the orphaned claim %s (kept as REJECTED: a later delivery of it is flagged)%n",
              done.releasedClaim());
        }
        out.printf(Locale.ROOT, "entity %s/%s: %s -> '%s' (version %d); recorded in the decision log%n", r.machine(), entity,
            done.previousState() == null ? "created" : "'" + done.previousState() + "' (version " + done.previousVersion() + ")", state,
            done.version());
        out.flush();
        return Main.EXIT_OK;
      } catch (RuntimeException e) {
        err.println("error: could not reset the entity (" + cfg.mysql() + "): " + rootMessage(e));
        err.flush();
        return Main.EXIT_FAILURE;
      }
    }
  }

  @Command(name = "redrive", mixinStandardHelpOptions = true,
      description = "Produce escalated records of a route to their original topic again (after a fix), without the onceguard-* headers;"
          + " an escalation too large to hold the whole record is produced from its original, read back at its coordinates. Each record"
          + " is checked first against the ledger and its entity: one that could only come back as a duplicate is skipped (unless"
          + " --force), one redriven --max-redrives times already is refused.")
  static final class Redrive extends Main.ConfigCommand {
    @Option(names = "--route", required = true, paramLabel = "NAME", description = "The route whose escalation topic to read.")
    String route;

    @Option(names = "--reason", paramLabel = "REASON", split = ",",
        description = "Only these reasons, e.g. BUSINESS_REJECTED,OUT_OF_ORDER (default: all).")
    Set<Reason> reasons;

    @Option(names = "--since", paramLabel = "TIME", description = "Only records escalated at or after this instant (ISO-8601, e.g. 2026-12-01T08:00:00Z).")
    Instant since;

    @Option(names = "--until", paramLabel = "TIME", description = "Only records escalated before this instant (ISO-8601).")
    Instant until;

    @Option(names = "--partition", paramLabel = "P", description = "Only this partition of the escalation topic.")
    Integer partition;

    @Option(names = "--from-offset", paramLabel = "OFFSET", description = "Only offsets at or above this (with --partition).")
    Long fromOffset;

    @Option(names = "--to-offset", paramLabel = "OFFSET", description = "Only offsets below this (with --partition).")
    Long toOffset;

    @Option(names = "--dry-run", description = "Classify every selected record against the ledger and its entity's current state"
        + " (APPLY, DUPLICATE, CONFLICT, REFUSED, WAIT, INVALID) and print what would be produced; produce nothing.")
    boolean dryRun;

    @Option(names = "--groups", description = "Print the escalations grouped by reason and normalised detail (id, count, first and"
        + " last time); produce nothing.")
    boolean listGroups;

    @Option(names = "--group", paramLabel = "ID", description = "Only the escalations of this group (an id printed by --groups).")
    String group;

    @Option(names = "--rate", paramLabel = "N/s", description = "Produce at most N records a second (e.g. 50/s); default: as fast as"
        + " the producer goes.")
    String rate;

    @Option(names = "--max-redrives", paramLabel = "N", defaultValue = "3", description = "Refuse a record redriven N times already"
        + " (the onceguard-redrive-count header; default ${DEFAULT-VALUE}).")
    int maxRedrives;

    @Option(names = "--force", description = "Also produce records that would only come back as duplicates (and skip the check).")
    boolean force;

    @Option(names = "--json", description = "One JSON object per selected record instead of a text line.")
    boolean json;

    @Override
    int call(SidecarConfig cfg, PrintWriter out, PrintWriter err) {
      RouteConfig r;
      double perSecond;
      try {
        r = route(cfg, route);
        if ((fromOffset != null || toOffset != null) && partition == null) {
          throw new IllegalArgumentException("--from-offset/--to-offset: give --partition too (offsets are per partition)");
        }
        if (maxRedrives < 1) {
          throw new IllegalArgumentException("--max-redrives: give 1 or more");
        }
        perSecond = RedriveSender.parseRate(rate);
      } catch (IllegalArgumentException e) {
        err.println("config error: " + e.getMessage());
        err.flush();
        return Main.EXIT_CONFIG;
      }
      String topic = r.outputs().escalationTopic();
      // the guard's view of each record is read only when it decides something: a dry run, or the skip of duplicates
      boolean check = !listGroups && (dryRun || !force);
      try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(clientProps(cfg, true));
          MysqlGuardStore store = check ? new MysqlGuardStore(new Db(cfg.mysql()), cfg.mysql().tablePrefix()) : null) {
        List<PartitionInfo> infos = consumer.partitionsFor(topic, java.time.Duration.ofSeconds(15));
        if (infos == null || infos.isEmpty()) {
          err.println("error: escalation topic '" + topic + "' of route '" + r.name() + "' does not exist");
          err.flush();
          return EXIT_REFUSED;
        }
        List<TopicPartition> parts = new ArrayList<>();
        for (PartitionInfo p : infos) {
          if (partition == null || p.partition() == partition) {
            parts.add(new TopicPartition(topic, p.partition()));
          }
        }
        if (parts.isEmpty()) {
          err.println("config error: --partition: topic '" + topic + "' has no partition " + partition);
          err.flush();
          return Main.EXIT_CONFIG;
        }
        consumer.assign(parts);
        Map<TopicPartition, Long> end = consumer.endOffsets(parts);
        seekStart(consumer, parts);
        EscalationGroups groups = new EscalationGroups();
        RedrivePlan plan = new RedrivePlan(check ? StorePreview.of(cfg, r, store) : null, maxRedrives, force);
        List<ProducerRecord<byte[], byte[]>> chosen = new ArrayList<>();
        List<RedrivePlan.Entry> chosenEntries = new ArrayList<>();
        Map<TopicPartition, Long> remaining = new HashMap<>(end);
        remaining.entrySet().removeIf(e -> consumer.position(e.getKey()) >= e.getValue());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        int gone = 0;
        while (!remaining.isEmpty() && System.nanoTime() < deadline) {
          for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(java.time.Duration.ofMillis(500))) {
            TopicPartition tp = new TopicPartition(rec.topic(), rec.partition());
            Long stop = end.get(tp);
            if (stop == null || rec.offset() >= stop || (toOffset != null && rec.offset() >= toOffset)) {
              continue;
            }
            ProducerRecord<byte[], byte[]> again = select(rec, r.name());
            if (again == null) {
              continue;
            }
            String groupId = groups.add(header(rec, Headers.REASON), header(rec, Headers.DETAIL),
                parseLong(header(rec, Headers.TIMESTAMP), rec.timestamp()));
            if (listGroups || (group != null && !group.equals(groupId))) {
              continue;
            }
            if (partial(rec)) {
              if (originals == null) {
                originals = new KafkaConsumer<>(clientProps(cfg, true));
              }
              ProducerRecord<byte[], byte[]> original = original(originals, rec, again.topic());
              if (original == null) {
                gone++;
                err.printf(Locale.ROOT, "error: cannot redrive %s/%d@%d: the escalation leaves out the record's %s (too large for the"
                    + " escalation topic), and %s/%s@%s no longer holds the original%n", rec.topic(), rec.partition(), rec.offset(),
                    header(rec, Headers.OMITTED), again.topic(), header(rec, Headers.ORIGINAL_PARTITION),
                    header(rec, Headers.ORIGINAL_OFFSET));
                continue;
              }
              again = original;
            }
            RedrivePlan.Entry entry = plan.decide(rec, again, groupId, System.currentTimeMillis());
            if (entry.action() == RedrivePlan.Action.SEND) {
              chosen.add(RedrivePlan.counted(again, entry.redrives()));
              chosenEntries.add(entry);
            }
            if (json) {
              out.println(entry.json());
            } else {
              out.printf(Locale.ROOT, "%s %s/%d@%d -> %s (reason %s, consumed at %s/%s@%s) %s%n",
                  entry.action() != RedrivePlan.Action.SEND ? (dryRun ? "would not redrive" : "not redriven") : dryRun ? "would redrive" : "redrive",
                  rec.topic(), rec.partition(), rec.offset(), again.topic(), header(rec, Headers.REASON), again.topic(),
                  header(rec, Headers.ORIGINAL_PARTITION), header(rec, Headers.ORIGINAL_OFFSET), entry.text());
            }
          }
          remaining.entrySet().removeIf(e -> consumer.position(e.getKey()) >= e.getValue()
              || (toOffset != null && consumer.position(e.getKey()) >= toOffset));
        }
        if (!remaining.isEmpty()) {
          err.println("error: could not read escalation topic '" + topic + "' to its end within 60 s: " + remaining.keySet());
          err.flush();
          return Main.EXIT_FAILURE;
        }
        if (listGroups) {
          groups.groups().forEach(g -> out.println(g.line()));
          out.printf(Locale.ROOT, "%d group(s) of route '%s'; redrive --group ID sends one%n", groups.groups().size(), r.name());
          out.flush();
          return Main.EXIT_OK;
        }
        if (!dryRun && !chosen.isEmpty()) {
          try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(clientProps(cfg, false))) {
            List<String> sentTo = new RedriveSender(producer, perSecond, err).send(chosen);
            for (int i = 0; i < sentTo.size(); i++) {
              out.println("sent " + chosenEntries.get(i).escalation() + " -> " + sentTo.get(i));
            }
          }
        }
        out.print(plan.summary());
        out.printf(Locale.ROOT, "%d record(s) of route '%s' %s%n", chosen.size(), r.name(), dryRun ? "would be redriven (dry run)" : "redriven");
        out.flush();
        if (gone > 0) {
          err.printf(Locale.ROOT, "error: %d escalation(s) could not be redriven: their originals are gone%n", gone);
          err.flush();
          return Main.EXIT_FAILURE;
        }
        return Main.EXIT_OK;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        err.println("error: interrupted");
        err.flush();
        return Main.EXIT_FAILURE;
      } catch (Exception e) {
        err.println("error: redrive failed: " + rootMessage(e));
        err.flush();
        return Main.EXIT_FAILURE;
      } finally {
        if (originals != null) {
          originals.close();
        }
      }
    }

    /** Reads the originals of escalations that leave part of the record out; opened on the first one. */
    private KafkaConsumer<byte[], byte[]> originals;

    /**
     * The escalation is not the whole record: the escalation topic could not take it, so its value,
     * own headers or key were left out ({@link Headers#OMITTED}); a cut detail does not matter here.
     */
    private static boolean partial(ConsumerRecord<byte[], byte[]> rec) {
      String omitted = header(rec, Headers.OMITTED);
      if (omitted == null) {
        return false;
      }
      List<String> parts = List.of(omitted.split(","));
      return parts.contains(Headers.OMITTED_VALUE) || parts.contains(Headers.OMITTED_HEADERS) || parts.contains(Headers.OMITTED_KEY);
    }

    /**
     * The original of the partial escalation {@code copy}, read back from its coordinates in
     * {@code topic} (key, value and its own headers), or {@code null} when that topic no longer
     * holds it (retention or compaction removed it).
     */
    private static ProducerRecord<byte[], byte[]> original(KafkaConsumer<byte[], byte[]> reader, ConsumerRecord<byte[], byte[]> copy,
        String topic) {
      int p = Integer.parseInt(header(copy, Headers.ORIGINAL_PARTITION));
      long offset = Long.parseLong(header(copy, Headers.ORIGINAL_OFFSET));
      TopicPartition tp = new TopicPartition(topic, p);
      List<TopicPartition> one = List.of(tp);
      reader.assign(one);
      if (offset < reader.beginningOffsets(one).get(tp) || offset >= reader.endOffsets(one).get(tp)) {
        return null;
      }
      reader.seek(tp, offset);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (System.nanoTime() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : reader.poll(java.time.Duration.ofMillis(500))) {
          if (r.offset() > offset) {
            return null; // compacted away
          }
          if (r.offset() == offset) {
            List<Header> keep = new ArrayList<>();
            for (Header h : r.headers()) {
              if (!h.key().startsWith(Headers.PREFIX)) {
                keep.add(h);
              }
            }
            return new ProducerRecord<>(topic, null, r.key(), r.value(), keep);
          }
        }
      }
      throw new IllegalStateException("could not read the original at " + tp + "@" + offset + " within 30 s");
    }

    private void seekStart(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> parts) {
      if (partition != null && fromOffset != null) {
        consumer.seek(parts.get(0), fromOffset);
        return;
      }
      if (since == null) {
        consumer.seekToBeginning(parts);
        return;
      }
      // the escalation is written at its verdict, so the record's timestamp bounds the search
      Map<TopicPartition, Long> at = new LinkedHashMap<>();
      parts.forEach(tp -> at.put(tp, since.toEpochMilli()));
      Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(at);
      Map<TopicPartition, Long> ends = consumer.endOffsets(parts);
      for (TopicPartition tp : parts) {
        OffsetAndTimestamp o = found.get(tp);
        consumer.seek(tp, o == null ? ends.get(tp) : o.offset());
      }
    }

    /** The record to produce again, or null if {@code rec} does not pass the filters. */
    private ProducerRecord<byte[], byte[]> select(ConsumerRecord<byte[], byte[]> rec, String routeName) {
      if (!routeName.equals(header(rec, Headers.ROUTE))) {
        return null;
      }
      String reason = header(rec, Headers.REASON);
      if (reasons != null && !reasons.isEmpty() && (reason == null || reasons.stream().noneMatch(x -> x.name().equals(reason)))) {
        return null;
      }
      long at = parseLong(header(rec, Headers.TIMESTAMP), rec.timestamp());
      if ((since != null && at < since.toEpochMilli()) || (until != null && at >= until.toEpochMilli())) {
        return null;
      }
      String original = header(rec, Headers.ORIGINAL_TOPIC);
      if (original == null) {
        return null;
      }
      List<Header> keep = new ArrayList<>();
      for (Header h : rec.headers()) {
        if (!h.key().startsWith(Headers.PREFIX)) {
          keep.add(h);
        }
      }
      return new ProducerRecord<>(original, null, rec.key(), rec.value(), keep);
    }
  }

  static String header(ConsumerRecord<byte[], byte[]> rec, String name) {
    Header h = rec.headers().lastHeader(name);
    return h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
  }

  private static long parseLong(String s, long otherwise) {
    try {
      return s == null ? otherwise : Long.parseLong(s);
    } catch (NumberFormatException e) {
      return otherwise;
    }
  }

  /** {@code kafka.properties}, then what this command owns. */
  static Map<String, Object> clientProps(SidecarConfig cfg, boolean consumer) {
    Map<String, Object> p = new HashMap<>(cfg.kafka().properties());
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cfg.kafka().bootstrapServers());
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, "onceguard-admin-" + UUID.randomUUID().toString().substring(0, 8));
    if (consumer) {
      p.keySet().removeIf(k -> k.equals(ConsumerConfig.GROUP_ID_CONFIG));
      p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
      p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    } else {
      p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
      p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
      p.put(ProducerConfig.ACKS_CONFIG, "all");
      p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    }
    return p;
  }

  static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t && (t.getMessage() == null || t instanceof java.util.concurrent.CompletionException
        || t instanceof java.util.concurrent.ExecutionException)) {
      t = t.getCause();
    }
    return t.getMessage() == null ? t.toString() : t.getMessage();
  }
}
