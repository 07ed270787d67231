package dev.onceguard.bench;

import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A business container that applies every record at once (answers OK): the benchmark measures the
 * sidecar, not the business. For the unguarded baseline it also marks each record's end.
 */
final class Business implements AutoCloseable {
  private static final HandleResult OK = HandleResult.newBuilder().setOutcome(HandleResult.Outcome.OK).build();
  private final Server server;
  private final Map<String, Completions> byTopic = new ConcurrentHashMap<>();

  private Business(Server server) {
    this.server = server;
  }

  static Business start() throws IOException {
    Business[] self = new Business[1];
    Server s = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(new MessageHandlerGrpc.MessageHandlerImplBase() {
          @Override
          public void handle(Delivery d, StreamObserver<HandleResult> out) {
            Completions c = self[0].byTopic.get(d.getRecord().getTopic());
            if (c != null) {
              c.add(d.getRecord().getTimestampMs());
            }
            out.onNext(OK);
            out.onCompleted();
          }
        })
        .build()
        .start();
    self[0] = new Business(s);
    return self[0];
  }

  String target() {
    return "127.0.0.1:" + server.getPort();
  }

  /** Marks the end of each record of {@code topic} in {@code c} when it arrives; null stops it. */
  void onReceive(String topic, Completions c) {
    if (c == null) {
      byTopic.remove(topic);
    } else {
      byTopic.put(topic, c);
    }
  }

  @Override
  public void close() throws InterruptedException {
    server.shutdown();
    if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
      server.shutdownNow();
    }
  }
}
