package dev.onceguard.client;

import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.concurrent.TimeUnit;

/** A real gRPC server and channel, in process, on direct executors: fake services, no mocks. */
final class InProcess implements AutoCloseable {
  final Server server;
  final ManagedChannel channel;

  InProcess(BindableService... services) {
    String name = InProcessServerBuilder.generateName();
    InProcessServerBuilder builder = InProcessServerBuilder.forName(name).directExecutor();
    for (BindableService s : services) {
      builder.addService(s);
    }
    try {
      server = builder.build().start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @Override
  public void close() {
    channel.shutdownNow();
    server.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
      server.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
