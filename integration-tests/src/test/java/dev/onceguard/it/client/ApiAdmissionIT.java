package dev.onceguard.it.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import com.google.rpc.RetryInfo;
import dev.onceguard.it.ItEnv;
import dev.onceguard.it.KafkaSupport;
import dev.onceguard.proxy.api.GuardService;
import dev.onceguard.v1.CompleteRequest;
import dev.onceguard.v1.CompleteResponse;
import dev.onceguard.v1.Disposition;
import dev.onceguard.v1.GuardGrpc;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.SubmitRequest;
import dev.onceguard.v1.SubmitResponse;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A flood of Guard API Submits while MySQL is slow (a {@link TcpGate} that holds every chunk 50 ms
 * each way between the sidecar and MariaDB): the sidecar admits a bounded number of calls, answers
 * the rest {@code RESOURCE_EXHAUSTED} with a retry-after at once and without a verdict, and its
 * queued store work stays within the bound ({@code /metrics}). Every {@code ACCEPTED} answer has
 * exactly one ledger row and every refused call none; once MySQL is fast again, the refused calls
 * are accepted when submitted again, and every claim completes.
 */
class ApiAdmissionIT {
  private static final String ROUTE = "api-flood";
  private static final int FLOOD = 1000;

  private final Map<String, Answer> answers = new ConcurrentHashMap<>();

  /** One Submit's answer: a response, or a status with its trailers. */
  private record Answer(SubmitResponse response, Status status, Metadata trailers, Throwable error) {}

  @Test
  void apiFloodWhileMysqlIsSlow_admitsABoundedNumber_refusesTheRestWithARetryAfter_andLosesNothing() throws Exception {
    try (KafkaSupport kafka = new KafkaSupport();
        TcpGate gate = new TcpGate(ItEnv.mysqlHost(), ItEnv.mysqlPort())) {
      String topic = kafka.createTopic("api-flood", 1);
      String escalations = kafka.createTopic("api-flood-escalate", 1);
      try (ClientSidecar sidecar = ClientSidecar.start("api-admission-it", """
            - name: %s
              topics: [%s]
              machine: order
              entity-id: /order_id
              event: /event
              business-key: [/order_id]
              mode: pull
              escalation-topic: %s
              lease: 60s
          """.formatted(ROUTE, topic, escalations), gate.port())) {
        ManagedChannel channel = ManagedChannelBuilder.forTarget(sidecar.target()).usePlaintext().build();
        try {
          flood(sidecar, gate, GuardGrpc.newStub(channel));
        } finally {
          channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
      }
    }
  }

  private void flood(ClientSidecar sidecar, TcpGate gate, GuardGrpc.GuardStub stub) throws Exception {
    int bound = GuardService.callBound(sidecar.config());
    AtomicLong maxInFlight = new AtomicLong(-1);
    AtomicLong maxQueued = new AtomicLong(-1);
    ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor();
    sampler.scheduleWithFixedDelay(() -> {
      String m = sidecar.scrape();
      maxInFlight.accumulateAndGet(metric(m, "onceguard_api_in_flight"), Math::max);
      maxQueued.accumulateAndGet(metric(m, "onceguard_mysql_queued_steps"), Math::max);
    }, 0, 20, TimeUnit.MILLISECONDS);

    gate.delay(Duration.ofMillis(50));
    CountDownLatch answered = new CountDownLatch(FLOOD);
    for (int i = 0; i < FLOOD; i++) {
      submit(stub, "o-" + i, answered);
    }
    assertThat(answered.await(40, TimeUnit.SECONDS)).as("every call of the flood answered").isTrue();
    sampler.shutdownNow();
    sampler.awaitTermination(5, TimeUnit.SECONDS);

    Set<String> accepted = new TreeSet<>();
    Set<String> refused = new TreeSet<>();
    Map<String, String> tokens = new HashMap<>();
    Map<Status.Code, Integer> others = new HashMap<>();
    answers.forEach((order, a) -> {
      if (a.response() != null && a.response().getVerdict().getDisposition() == Disposition.ACCEPTED) {
        accepted.add(order);
        tokens.put(order, a.response().getClaimToken());
      } else if (a.status() != null && a.status().getCode() == Status.Code.RESOURCE_EXHAUSTED) {
        refused.add(order);
        assertThat(a.status().getDescription()).as(order).startsWith("Submit refused: " + bound + " calls are in flight already")
            .containsPattern("retry after \\d+ ms$");
        long pushback = Long.parseLong(a.trailers().get(Metadata.Key.of("grpc-retry-pushback-ms", Metadata.ASCII_STRING_MARSHALLER)));
        assertThat(pushback).as("retry-after of %s, ms", order).isBetween(100L, 10_000L);
        assertThat(StatusProto.fromThrowable(a.error()).getDetails(0).is(RetryInfo.class)).as("RetryInfo in the status details").isTrue();
      } else {
        others.merge(a.response() != null ? Status.Code.OK : a.status().getCode(), 1, Integer::sum);
      }
    });
    System.out.printf("ApiAdmissionIT: %d accepted, %d refused; at most %d calls in flight and %d store steps queued (bound %d)%n",
        accepted.size(), refused.size(), maxInFlight.get(), maxQueued.get(), bound);
    assertThat(refused).as("calls beyond the bound answered RESOURCE_EXHAUSTED").isNotEmpty();
    assertThat(others).as("no other answer: every call accepted or refused").isEmpty();
    assertThat(accepted).as("calls within the bound accepted").hasSizeGreaterThanOrEqualTo(bound);
    assertThat(maxInFlight.get()).as("Guard API calls in flight (onceguard_api_in_flight), at most").isBetween(1L, (long) bound);
    assertThat(maxQueued.get()).as("queued store steps (onceguard_mysql_queued_steps), at most: the store really was behind")
        .isBetween(1L, (long) bound);
    String m = sidecar.scrape();
    assertThat(metric(m, "onceguard_api_refused_calls_total{method=\"Submit\"}")).isEqualTo(refused.size());
    assertThat(metric(m, "onceguard_mysql_refused_steps_total")).as("the store's own bound was never reached").isZero();

    // each ACCEPTED answer has exactly one ledger row, and nothing else was written for the flood
    assertThat(ledger(sidecar)).as("ledger rows after the flood").isEqualTo(statuses(accepted, "PENDING"));
    assertThat(sidecar.rows("SELECT COUNT(*) FROM " + sidecar.database + ".og_decision").get(0).get(0))
        .as("no decision logged: a refused call has no verdict").isEqualTo(0L);

    // MySQL fast again: the refused calls are accepted when submitted again, and every claim completes
    gate.delay(Duration.ZERO);
    answers.clear();
    List<String> again = new ArrayList<>(refused);
    for (int from = 0; from < again.size(); from += 64) {
      List<String> batch = again.subList(from, Math.min(again.size(), from + 64));
      CountDownLatch done = new CountDownLatch(batch.size());
      batch.forEach(order -> submit(stub, order, done));
      assertThat(done.await(20, TimeUnit.SECONDS)).isTrue();
    }
    answers.forEach((order, a) -> {
      assertThat(a.response()).as("%s submitted again: %s", order, a.status()).isNotNull();
      assertThat(a.response().getVerdict().getDisposition()).as(order).isEqualTo(Disposition.ACCEPTED);
      tokens.put(order, a.response().getClaimToken());
    });
    assertThat(tokens).hasSize(FLOOD);
    completeAll(stub, tokens);
    assertThat(ledger(sidecar)).as("every order claimed once and confirmed").isEqualTo(statuses(tokens.keySet(), "DONE"));
  }

  private void submit(GuardGrpc.GuardStub stub, String order, CountDownLatch answered) {
    String json = "{\"order_id\":\"" + order + "\",\"event\":\"create\"}";
    SubmitRequest req = SubmitRequest.newBuilder().setRoute(ROUTE).setRequestId("req-" + order)
        .setKey(ByteString.copyFromUtf8(order)).setValue(ByteString.copyFrom(json, StandardCharsets.UTF_8)).build();
    stub.submit(req, new StreamObserver<>() {
      @Override
      public void onNext(SubmitResponse r) {
        answers.put(order, new Answer(r, null, null, null));
      }

      @Override
      public void onError(Throwable t) {
        answers.put(order, new Answer(null, Status.fromThrowable(t), Status.trailersFromThrowable(t), t));
        answered.countDown();
      }

      @Override
      public void onCompleted() {
        answered.countDown();
      }
    });
  }

  private static void completeAll(GuardGrpc.GuardStub stub, Map<String, String> tokens) throws InterruptedException {
    List<String> all = new ArrayList<>(tokens.values());
    Map<String, Status> failed = new ConcurrentHashMap<>();
    for (int from = 0; from < all.size(); from += 64) {
      List<String> batch = all.subList(from, Math.min(all.size(), from + 64));
      CountDownLatch done = new CountDownLatch(batch.size());
      for (String token : batch) {
        stub.complete(CompleteRequest.newBuilder().setClaimToken(token).setOutcome(HandleResult.Outcome.OK).build(),
            new StreamObserver<>() {
              @Override
              public void onNext(CompleteResponse r) {}

              @Override
              public void onError(Throwable t) {
                failed.put(token, Status.fromThrowable(t));
                done.countDown();
              }

              @Override
              public void onCompleted() {
                done.countDown();
              }
            });
      }
      assertThat(done.await(20, TimeUnit.SECONDS)).isTrue();
    }
    assertThat(failed).as("failed completes").isEmpty();
  }

  /** entity id -> ledger status of the route's rows; an entity with several rows fails the comparison. */
  private static Map<String, String> ledger(ClientSidecar sidecar) {
    Map<String, String> out = new HashMap<>();
    for (List<Object> r : sidecar.rows("SELECT entity_id, status FROM " + sidecar.database + ".og_ledger WHERE route = ?", ROUTE)) {
      String previous = out.put((String) r.get(0), (String) r.get(1));
      assertThat(previous).as("a second ledger row for %s", r.get(0)).isNull();
    }
    return out;
  }

  private static Map<String, String> statuses(Set<String> orders, String status) {
    Map<String, String> out = new HashMap<>();
    orders.forEach(o -> out.put(o, status));
    return out;
  }

  /** The value of one series of a Prometheus scrape; fails when the series is not there. */
  private static long metric(String scrape, String series) {
    for (String line : scrape.split("\n")) {
      if (line.startsWith(series + " ")) {
        return (long) Double.parseDouble(line.substring(series.length() + 1).trim());
      }
    }
    throw new AssertionError("no series " + series + " in /metrics");
  }
}
