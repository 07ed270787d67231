package dev.onceguard.it.scenario;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The business facts of the Q5 experiment ({@link UpstreamOnly}) as Kafka records, deterministic
 * for a seed. A fact is the creation of one order line ({@code line_id}, event {@code create});
 * its business key is order, sku, warehouse and batch, its business time {@code occurred_at}.
 * Every record also carries a message id {@code <case>-<n>}, which names the case that produced
 * it, and {@code sent_at}; the sidecar's fingerprint leaves both out, so a re-send of a fact has
 * the fact's content. The Kafka key is the line, except for a re-keyed re-send. Not thread-safe.
 */
final class FactStream {
  /** The payload field that names the fact (the line). */
  static final String FACT_FIELD = "line_id";

  /** One record to produce: the fact it carries, its message id, Kafka key and value. */
  record Sent(String fact, String messageId, String key, String json) {
    ProducerRecord<byte[], byte[]> toRecord(String topic) {
      return new ProducerRecord<>(topic, key.getBytes(StandardCharsets.UTF_8), json.getBytes(StandardCharsets.UTF_8));
    }
  }

  /**
   * A case's records, in the order to produce them; {@code resends}: how many of them carry a
   * fact that an earlier record already carried (the duplicates upstream put into the stream).
   */
  record Batch(String caseId, List<Sent> records, int resends) {
    List<String> facts() {
      return records.stream().map(Sent::fact).distinct().toList();
    }
  }

  private record Fact(String line, int sku, int warehouse, Instant occurredAt) {}

  private final Random random;
  private final Instant now;
  private final List<Fact> all = new ArrayList<>();
  private int messages;

  /** @param now the business "now": a fresh fact happened then, a fact of {@code age} that long before */
  FactStream(long seed, Instant now) {
    this.random = new Random(seed);
    this.now = now;
  }

  /** {@code n} new facts that happened {@code age} before now, each sent once. */
  Batch fresh(String caseId, int n, Duration age) {
    List<Sent> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(send(caseId, newFact(age), false));
    }
    return new Batch(caseId, List.copyOf(out), 0);
  }

  /**
   * {@code n} records: new facts, and every {@code every}-th record a re-send of an earlier fact of
   * this batch under a new message id, keyed by that message id (an upstream that changed its key).
   */
  Batch rekeyed(String caseId, int n, int every) {
    List<Sent> out = new ArrayList<>(n);
    List<Fact> mine = new ArrayList<>();
    int resends = 0;
    for (int i = 1; i <= n; i++) {
      if (i % every == 0 && !mine.isEmpty()) {
        out.add(send(caseId, mine.get(random.nextInt(mine.size())), true));
        resends++;
      } else {
        Fact f = newFact(Duration.ZERO);
        mine.add(f);
        out.add(send(caseId, f, false));
      }
    }
    return new Batch(caseId, List.copyOf(out), resends);
  }

  /**
   * {@code n} records: new facts, and {@code count} of them, spread evenly, a compensation re-run:
   * facts of {@code earlier} published again unchanged (business time, business key, Kafka key)
   * under new message ids.
   */
  Batch compensation(String caseId, int n, Batch earlier, int count) {
    List<String> pool = new ArrayList<>(earlier.facts());
    if (count > pool.size() || count > n) {
      throw new IllegalArgumentException("a re-run of " + count + " facts needs as many earlier facts (" + pool.size()
          + ") and records (" + n + ")");
    }
    Collections.shuffle(pool, random);
    List<Sent> out = new ArrayList<>(n);
    int rerun = 0;
    for (int i = 0; i < n; i++) {
      // record i is a re-run when it crosses the next multiple of n / count
      if (count > 0 && (long) (i + 1) * count / n > rerun) {
        out.add(send(caseId, factOf(pool.get(rerun)), false));
        rerun++;
      } else {
        out.add(send(caseId, newFact(Duration.ZERO), false));
      }
    }
    return new Batch(caseId, List.copyOf(out), count);
  }

  private Fact newFact(Duration age) {
    Fact f = new Fact(String.format("L%06d", all.size()), random.nextInt(50), random.nextInt(3), now.minus(age));
    all.add(f);
    return f;
  }

  private Fact factOf(String line) {
    return all.get(Integer.parseInt(line.substring(1)));
  }

  private Sent send(String caseId, Fact f, boolean rekey) {
    String messageId = caseId + "-" + (messages++);
    String json = ("{\"line_id\":\"%s\",\"order_id\":\"o-%s\",\"sku_id\":\"s-%d\",\"warehouse_id\":\"w-%d\",\"batch_no\":1,"
        + "\"event\":\"create\",\"occurred_at\":\"%s\",\"message_id\":\"%s\",\"sent_at\":\"%s\"}")
        .formatted(f.line, f.line, f.sku, f.warehouse, f.occurredAt, messageId, now.plusMillis(messages));
    return new Sent(f.line, messageId, rekey ? messageId : f.line, json);
  }

  /** The case a message id names ({@code <case>-<n>}). */
  static String caseOf(String messageId) {
    return messageId.substring(0, messageId.lastIndexOf('-'));
  }
}
