package dev.onceguard.it.scenario;

import dev.onceguard.it.KafkaSupport;
import dev.onceguard.it.scenario.FactStream.Sent;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * An upstream service's producer: sends a list of records at a steady rate from a thread of its
 * own, while the test injects a fault. Idempotent with {@code acks=all}, so that its own retries
 * (across a broker restart) add no record: every duplicate the consumers see is either in the list
 * or made by them. Its settings are {@link KafkaSupport#producer}'s (one request in flight, for the reason given there).
 * {@link #finish} waits for every acknowledgement and closes it; the test thread calls everything.
 */
final class PacedProducer implements AutoCloseable {
  private final KafkaProducer<byte[], byte[]> producer;
  private final AtomicInteger handedOver = new AtomicInteger();
  private final AtomicInteger acked = new AtomicInteger();
  private final AtomicReference<Exception> failure = new AtomicReference<>();
  /** System.nanoTime() of each record's acknowledgement, 0 until then; read after {@link #finish}. */
  private final long[] ackedAt;
  private final Thread thread;

  /** Starts sending {@code records} to {@code topic}, {@code perSecond} of them per second; returns at once. */
  PacedProducer(String bootstrap, String topic, List<Sent> records, int perSecond) {
    this.producer = KafkaSupport.producer(bootstrap);
    long nanosPerRecord = TimeUnit.SECONDS.toNanos(1) / perSecond;
    this.ackedAt = new long[records.size()];
    this.thread = new Thread(() -> {
      long t0 = System.nanoTime();
      for (int i = 0; i < records.size(); i++) {
        long due = t0 + i * nanosPerRecord;
        long wait = due - System.nanoTime();
        if (wait > 0) {
          try {
            TimeUnit.NANOSECONDS.sleep(wait);
          } catch (InterruptedException e) {
            return;
          }
        }
        int index = i;
        producer.send(records.get(i).toRecord(topic), (md, e) -> {
          if (e != null) {
            failure.compareAndSet(null, e);
          }
          ackedAt[index] = System.nanoTime();
          acked.incrementAndGet();
        });
        handedOver.incrementAndGet();
      }
    }, "paced-producer");
    thread.setDaemon(true);
    thread.start();
  }

  /** Records handed to the producer so far. */
  int handedOver() {
    return handedOver.get();
  }

  /** When the brokers acknowledged the {@code i}-th record ({@link System#nanoTime()}); valid after {@link #finish}. */
  long ackedAtNanos(int i) {
    return ackedAt[i];
  }

  /** Until {@code n} records were handed to the producer. */
  void awaitHandedOver(int n, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (handedOver.get() < n) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError(handedOver.get() + " records produced, not " + n + ", within " + timeout);
      }
      TimeUnit.MILLISECONDS.sleep(10);
    }
  }

  /** Until every record was handed over and acknowledged, then closes the producer; fails on the first send that failed. */
  void finish(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    thread.join(timeout.toMillis());
    while (thread.isAlive() || acked.get() < handedOver.get()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError((handedOver.get() - acked.get()) + " records not acknowledged within " + timeout);
      }
      TimeUnit.MILLISECONDS.sleep(20);
    }
    if (failure.get() != null) {
      throw new AssertionError("a send failed", failure.get());
    }
    close();
  }

  @Override
  public void close() {
    thread.interrupt();
    producer.close(Duration.ofSeconds(10));
  }
}
