package dev.onceguard.it;

import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.v1.HandleResult.Outcome;
import dev.onceguard.v1.KafkaRecord;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.Context;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * A fake business container: a real gRPC server (netty, plaintext, 127.0.0.1) serving
 * {@code MessageHandler}, so the sidecar's real channel, deadlines and status mapping are
 * exercised. Records every call; answers according to a {@link Behaviour} the test can change at
 * any time. Thread-safe.
 */
public final class RecordingBusiness implements AutoCloseable {

  /** How to answer one call. */
  @FunctionalInterface
  public interface Behaviour {
    Reply reply(Delivery delivery);
  }

  /** One answer: a result, a gRPC error, nothing at all, possibly after a delay. */
  public static final class Reply {
    final HandleResult result;
    final Status status;
    final Duration delay;
    final boolean hang;

    private Reply(HandleResult result, Status status, Duration delay, boolean hang) {
      this.result = result;
      this.status = status;
      this.delay = delay;
      this.hang = hang;
    }

    public static Reply ok() {
      return new Reply(HandleResult.newBuilder().setOutcome(Outcome.OK).build(), null, Duration.ZERO, false);
    }

    public static Reply retry(String message, int retryAfterMs) {
      return new Reply(HandleResult.newBuilder().setOutcome(Outcome.RETRY).setMessage(message).setRetryAfterMs(retryAfterMs).build(),
          null, Duration.ZERO, false);
    }

    public static Reply reject(String message) {
      return new Reply(HandleResult.newBuilder().setOutcome(Outcome.REJECT).setMessage(message).build(), null, Duration.ZERO, false);
    }

    public static Reply status(Status status) {
      return new Reply(null, status, Duration.ZERO, false);
    }

    /** Never answers; the call ends by the caller's deadline or cancellation. */
    public static Reply hang() {
      return new Reply(null, null, Duration.ZERO, true);
    }

    public Reply after(Duration d) {
      return new Reply(result, status, d, hang);
    }

    boolean isOk() {
      return result != null && result.getOutcome() == Outcome.OK;
    }
  }

  /**
   * One call as received, with what it was answered; {@code answeredOk} only if the caller still
   * waited for the answer (an OK after its deadline is a failed attempt to the sidecar).
   */
  public record Call(Delivery delivery, boolean answeredOk, long receivedAtNanos) {
    public String coordinates() {
      return coordinatesOf(delivery.getRecord());
    }
  }

  public static String coordinatesOf(KafkaRecord r) {
    return r.getTopic() + "-" + r.getPartition() + "@" + r.getOffset();
  }

  private final int port;
  private final Server server;
  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "business-timer");
    t.setDaemon(true);
    return t;
  });
  private final ConcurrentLinkedQueue<Call> calls = new ConcurrentLinkedQueue<>();
  private final Map<String, Delivery> firstOk = new ConcurrentHashMap<>();
  private final AtomicInteger inFlight = new AtomicInteger();
  private final AtomicInteger cancelledByCaller = new AtomicInteger();
  private volatile Behaviour behaviour = d -> Reply.ok();

  private RecordingBusiness(int port) {
    this(NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port), InsecureServerCredentials.create()));
  }

  private RecordingBusiness(NettyServerBuilder builder) {
    try {
      this.server = builder.addService(new Handler()).build().start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start the fake business on " + builder, e);
    }
    this.port = server.getPort();
  }

  /** On a server builder given its address and credentials (TLS, a Unix socket); {@link #target()} is for a TCP port only. */
  public static RecordingBusiness startOn(NettyServerBuilder builder) {
    return new RecordingBusiness(builder);
  }

  /** On a free port. */
  public static RecordingBusiness start() {
    return new RecordingBusiness(0);
  }

  /** On a given port (a business that comes up late, at the address the sidecar already uses). */
  public static RecordingBusiness startOn(int port) {
    return new RecordingBusiness(port);
  }

  /** A port nothing listens on right now (for a business that is not up yet). */
  public static int freePort() {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public RecordingBusiness behave(Behaviour b) {
    this.behaviour = b;
    return this;
  }

  public int port() {
    return port;
  }

  /** {@code 127.0.0.1:<port>}, for a route's {@code target}. */
  public String target() {
    return "127.0.0.1:" + port;
  }

  /** Every call, in arrival order. */
  public List<Call> calls() {
    return new ArrayList<>(calls);
  }

  /** Calls answered OK, in arrival order (a record may appear twice if it was delivered twice). */
  public List<Delivery> okDeliveries() {
    return calls.stream().filter(Call::answeredOk).map(Call::delivery).collect(Collectors.toList());
  }

  /** Coordinates ({@code topic-partition@offset}) of the records answered OK at least once. */
  public Set<String> okCoordinates() {
    return Set.copyOf(firstOk.keySet());
  }

  /** Calls received and not answered yet. */
  public int inFlight() {
    return inFlight.get();
  }

  /** Calls that the sidecar cancelled before they were answered. */
  public int cancelledByCaller() {
    return cancelledByCaller.get();
  }

  @Override
  public void close() {
    server.shutdown();
    try {
      if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
        server.shutdownNow();
        server.awaitTermination(5, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      server.shutdownNow();
      Thread.currentThread().interrupt();
    } finally {
      timer.shutdownNow();
    }
  }

  private final class Handler extends MessageHandlerGrpc.MessageHandlerImplBase {
    @Override
    public void handle(Delivery d, StreamObserver<HandleResult> out) {
      long received = System.nanoTime();
      inFlight.incrementAndGet();
      Context.current().addListener(ctx -> {
        if (ctx.cancellationCause() != null) {
          cancelledByCaller.incrementAndGet();
        }
      }, Runnable::run);
      Reply r = behaviour.reply(d);
      if (r.hang) {
        // never answered; counted in flight until the caller gives up
        Context.current().addListener(ctx -> inFlight.decrementAndGet(), Runnable::run);
        calls.add(new Call(d, false, received));
        return;
      }
      Context call = Context.current();
      Runnable answer = () -> {
        // An OK the caller no longer waits for (its handler-timeout passed, it was cancelled) never
        // reaches the sidecar: it saw a failed attempt and will retry, flagged. Recorded as what
        // the sidecar saw, not as a delivery.
        boolean heard = !call.isCancelled();
        calls.add(new Call(d, r.isOk() && heard, received));
        if (r.isOk() && heard) {
          firstOk.putIfAbsent(coordinatesOf(d.getRecord()), d);
        }
        inFlight.decrementAndGet();
        try {
          if (r.status != null) {
            out.onError(r.status.asRuntimeException());
          } else {
            out.onNext(r.result);
            out.onCompleted();
          }
        } catch (RuntimeException e) {
          // the call was cancelled meanwhile: the answer has nowhere to go
        }
      };
      if (r.delay.isZero()) {
        answer.run();
      } else {
        timer.schedule(answer, r.delay.toNanos(), TimeUnit.NANOSECONDS);
      }
    }
  }
}
