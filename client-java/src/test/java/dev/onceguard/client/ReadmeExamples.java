package dev.onceguard.client;

import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The code of client-java/README.md. Each {@code tag::name[]} region appears verbatim in the
 * README; {@link ReadmeExamplesTest} checks that, and runs the examples that need no network.
 */
class ReadmeExamples {
  final List<String> shipped = new ArrayList<>();
  volatile boolean running = true;

  Consumer<String, String> dropIn() {
    // tag::consumer[]
    Properties props = new Properties();
    props.put("bootstrap.servers", "kafka:9092");        // ignored by OnceGuardConsumer
    props.put("group.id", "shipping");                    // ignored: the sidecar's route owns the group
    props.put("enable.auto.commit", "false");
    props.put("onceguard.target", "127.0.0.1:7700");      // the sidecar, in the same pod
    props.put("onceguard.route", "orders-shipping");      // a route in pull mode

    // was: Consumer<String, String> consumer = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    Consumer<String, String> consumer = new OnceGuardConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    // end::consumer[]
    return consumer;
  }

  void loop(Consumer<String, String> consumer) {
    // tag::loop[]
    consumer.subscribe(List.of("orders"));
    while (running) {
      for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
        ship(record.key(), record.value());
      }
      consumer.commitSync(); // acknowledges OK every record the polls returned
    }
    // end::loop[]
  }

  void reject(OnceGuardConsumer<String, String> consumer) {
    // tag::reject[]
    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
      if (isDiscontinued(record.value())) {
        consumer.reject(record, "sku discontinued"); // escalated as BUSINESS_REJECTED
        continue;
      }
      ship(record.key(), record.value());
    }
    consumer.commitSync(); // acknowledges OK the records not rejected
    // end::reject[]
  }

  Server adapter() throws IOException {
    // tag::adapter[]
    MessageHandlerAdapter<String, String> adapter = MessageHandlerAdapter
        .builder(new StringDeserializer(), new StringDeserializer(), (ConsumerRecord<String, String> record, DeliveryInfo info) -> {
          if (isDiscontinued(record.value())) {
            throw new RejectException("sku discontinued"); // REJECT: escalated
          }
          ship(record.key(), record.value()); // IOException etc.: RETRY; return: OK
        })
        .build();

    Server server = Grpc.newServerBuilderForPort(50052, InsecureServerCredentials.create())
        .addService(adapter)
        .build()
        .start();
    // end::adapter[]
    return server;
  }

  void guard(byte[] orderJson) {
    // tag::guard[]
    try (GuardClient guard = GuardClient.forTarget("127.0.0.1:7700")) {
      Submission submission = Submission.builder("orders-shipping").value(orderJson).build();
      SubmitResult result = guard.submit(submission); // retry with the same Submission object
      switch (result.verdict().disposition()) {
        case ACCEPTED:
          String claim = result.claimToken().orElseThrow();
          try {
            ship("o-1", new String(orderJson, StandardCharsets.UTF_8));
          } catch (RuntimeException e) {
            guard.complete(claim, Completion.REJECT, "shipping failed: " + e.getMessage());
            throw e;
          }
          guard.complete(claim, Completion.OK, "shipped");
          break;
        case DUPLICATE_IGNORE:
          break; // applied before: nothing to do
        default:
          alert(result.verdict()); // ILLEGAL_TRANSITION_ESCALATE: needs a human or an upstream fix
      }
    } catch (EntityBusyException | SidecarUnavailableException e) {
      // transient (entity busy, store down): try again later
    }
    // end::guard[]
  }

  void ship(String key, String value) {
    shipped.add(key + "=" + value);
    if (shipped.size() >= 2) {
      running = false;
    }
  }

  boolean isDiscontinued(String value) {
    return value != null && value.contains("discontinued");
  }

  void alert(Verdict verdict) {
    shipped.add("alert:" + verdict.reason());
  }
}
