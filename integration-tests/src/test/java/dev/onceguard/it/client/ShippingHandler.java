package dev.onceguard.it.client;

import dev.onceguard.client.OnceGuardConsumer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Business code written against Kafka's {@link Consumer} interface, as a shipping service would
 * have it before OnceGuard: subscribe, poll, handle each record, {@code commitSync}. It neither
 * knows nor cares which {@code Consumer} it is given — {@link DropInConsumerIT} runs this very
 * class on a {@code KafkaConsumer} and on an {@link OnceGuardConsumer}.
 *
 * <p>The one OnceGuard-aware line is the handling of a record that can never be applied: with a
 * plain Kafka consumer the service parks it in its own dead-letter list; with OnceGuard it calls
 * {@link OnceGuardConsumer#reject}, so the sidecar rolls the entity back and escalates it.
 */
final class ShippingHandler {
  private static final Duration SAFETY_LIMIT = Duration.ofSeconds(40);

  /** Every record poll returned, in order. */
  final List<ConsumerRecord<String, String>> seen = new CopyOnWriteArrayList<>();
  /** Records shipped (handled and then committed). */
  final List<ConsumerRecord<String, String>> shipped = new CopyOnWriteArrayList<>();
  /** Records refused as discontinued. */
  final List<ConsumerRecord<String, String>> refused = new CopyOnWriteArrayList<>();

  /**
   * The service's consumer loop; returns once {@code done} says so (checked after every commit)
   * or after a safety limit, so a broken run fails the test's assertions instead of hanging.
   */
  void run(Consumer<String, String> consumer, String topic, BooleanSupplier done) {
    long limit = System.nanoTime() + SAFETY_LIMIT.toNanos();
    consumer.subscribe(List.of(topic));
    while (!done.getAsBoolean() && System.nanoTime() < limit) {
      for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
        seen.add(record);
        if (record.value().contains("\"discontinued\":true")) {
          refuse(consumer, record);
          continue;
        }
        shipped.add(record); // ship(record.key(), record.value())
      }
      consumer.commitSync();
    }
  }

  private void refuse(Consumer<String, String> consumer, ConsumerRecord<String, String> record) {
    refused.add(record);
    if (consumer instanceof OnceGuardConsumer<String, String> guarded) {
      guarded.reject(record, "sku discontinued");
    }
  }
}
