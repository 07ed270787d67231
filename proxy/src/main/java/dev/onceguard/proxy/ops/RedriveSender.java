package dev.onceguard.proxy.ops;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * Produces redriven records at a bounded rate, so that a large redrive does not flood the source
 * topic and the business behind it, printing progress every few seconds. Waits for every
 * acknowledgement; the first failure ends the send (the records before it are written).
 */
final class RedriveSender {
  private final KafkaProducer<byte[], byte[]> producer;
  private final double perSecond;
  private final PrintWriter progress;

  /** {@code perSecond} &lt;= 0: no bound. The producer is the caller's. */
  RedriveSender(KafkaProducer<byte[], byte[]> producer, double perSecond, PrintWriter progress) {
    this.producer = producer;
    this.perSecond = perSecond;
    this.progress = progress;
  }

  /**
   * {@code --rate}: {@code N/s} or {@code N} records a second; {@code null} for no bound.
   *
   * @throws IllegalArgumentException naming the option
   */
  static double parseRate(String rate) {
    if (rate == null) {
      return 0;
    }
    String n = rate.strip().endsWith("/s") ? rate.strip().substring(0, rate.strip().length() - 2) : rate.strip();
    try {
      double v = Double.parseDouble(n);
      if (v > 0 && Double.isFinite(v)) {
        return v;
      }
    } catch (NumberFormatException e) {
      // named below
    }
    throw new IllegalArgumentException("--rate: '" + rate + "' is not a rate; give records a second, e.g. 50/s");
  }

  /** Sends {@code records} in order; returns where each landed ({@code topic/partition@offset}). */
  List<String> send(List<ProducerRecord<byte[], byte[]>> records) throws Exception {
    long start = System.nanoTime();
    long lastProgress = start;
    List<Future<RecordMetadata>> sent = new ArrayList<>(records.size());
    for (int i = 0; i < records.size(); i++) {
      if (perSecond > 0) {
        long due = start + (long) (i * 1e9 / perSecond);
        long wait = due - System.nanoTime();
        if (wait > 0) {
          TimeUnit.NANOSECONDS.sleep(wait);
        }
      }
      sent.add(producer.send(records.get(i)));
      if (System.nanoTime() - lastProgress > TopicScan.PROGRESS_EVERY.toNanos()) {
        lastProgress = System.nanoTime();
        progress.printf(Locale.ROOT, "sent %d of %d record(s)%n", i + 1, records.size());
        progress.flush();
      }
    }
    List<String> out = new ArrayList<>(sent.size());
    for (Future<RecordMetadata> f : sent) {
      RecordMetadata m = f.get(Duration.ofSeconds(30).toMillis(), TimeUnit.MILLISECONDS);
      out.add(m.topic() + "/" + m.partition() + "@" + m.offset());
    }
    return out;
  }
}
