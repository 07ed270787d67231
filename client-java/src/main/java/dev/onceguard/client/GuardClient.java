package dev.onceguard.client;

import dev.onceguard.client.internal.Channels;
import dev.onceguard.client.internal.GuardMapping;
import dev.onceguard.v1.CompleteRequest;
import dev.onceguard.v1.ExplainRequest;
import dev.onceguard.v1.GuardGrpc;
import dev.onceguard.v1.HandleResult;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Client of the sidecar's synchronous {@code Guard} API, for events that do not come from Kafka:
 * {@link #submit} claims an event and returns a verdict (with a claim token when accepted),
 * {@link #complete} confirms or aborts the claim, {@code explain*} tells what the sidecar knows
 * about a key or entity.
 *
 * <pre>{@code
 * try (GuardClient guard = GuardClient.forTarget("127.0.0.1:7700")) {
 *   Submission submission = Submission.builder("orders-shipping").value(json).build();
 *   SubmitResult result = guard.submit(submission);
 *   if (result.isAccepted()) {
 *     ship(order);
 *     guard.complete(result.claimToken().orElseThrow(), Completion.OK, "shipped");
 *   }
 * }
 * }</pre>
 *
 * <p>Verdicts are data: a duplicate or an illegal transition is a normal result. Transient
 * trouble is an exception: {@link EntityBusyException} ({@code ABORTED}: another transition of
 * the entity is in flight), {@link SidecarUnavailableException} ({@code UNAVAILABLE}) and
 * {@link SidecarBusyException} ({@code RESOURCE_EXHAUSTED}, with the sidecar's retry-after) mean
 * "try again later"; retry a submit with the same {@link Submission} object, so the sidecar
 * recognises it. {@link ClaimExpiredException} means a completion came too late. Every other
 * status is an {@link OnceGuardException}, with {@link OnceGuardException#isRetriable()}.
 *
 * <p>Thread-safe; calls block up to the call timeout (10 s by default), after which they fail
 * with a retriable {@code DEADLINE_EXCEEDED} {@link OnceGuardException}. Reuse one client: a
 * client from {@link #forTarget} owns a gRPC channel (connections, threads) and releases it in
 * {@link #close()}; a client built on a {@link Channel} leaves the channel to its owner and
 * {@code close()} does nothing.
 */
public final class GuardClient implements AutoCloseable {
  /** Default deadline of each call. */
  public static final Duration DEFAULT_CALL_TIMEOUT = Duration.ofSeconds(10);
  private static final Duration SHUTDOWN_TIMEOUT = Duration.ofSeconds(5);

  private final GuardGrpc.GuardBlockingStub stub;
  private final ManagedChannel ownedChannel;
  private final long callTimeoutNanos;

  /**
   * Creates a client on a channel the caller owns and closes. Taking a {@code Channel} rather
   * than a {@code ManagedChannel} makes that explicit and lets the caller share the channel or
   * add interceptors (grpc-java's HelloWorldClient reasoning).
   *
   * @param channel channel to the sidecar, not owned
   */
  public GuardClient(Channel channel) {
    this(channel, DEFAULT_CALL_TIMEOUT);
  }

  /**
   * Creates a client on a channel the caller owns and closes.
   *
   * @param channel channel to the sidecar, not owned
   * @param callTimeout deadline of each call
   */
  public GuardClient(Channel channel, Duration callTimeout) {
    this(channel, null, callTimeout);
  }

  private GuardClient(Channel channel, ManagedChannel ownedChannel, Duration callTimeout) {
    if (channel == null) {
      throw new IllegalArgumentException("channel must not be null");
    }
    if (callTimeout == null || callTimeout.isNegative() || callTimeout.isZero()) {
      throw new IllegalArgumentException("callTimeout must be positive: " + callTimeout);
    }
    this.stub = GuardGrpc.newBlockingStub(channel);
    this.ownedChannel = ownedChannel;
    this.callTimeoutNanos = callTimeout.toNanos();
  }

  /**
   * Creates a client with its own plaintext channel to the sidecar (which runs in the same
   * pod); {@link #close()} releases it.
   *
   * @param target gRPC target, e.g. {@code 127.0.0.1:7700}
   * @return a client that owns its channel
   */
  public static GuardClient forTarget(String target) {
    return forTarget(target, DEFAULT_CALL_TIMEOUT);
  }

  /**
   * Creates a client with its own plaintext channel to the sidecar; {@link #close()} releases
   * it.
   *
   * @param target gRPC target, e.g. {@code 127.0.0.1:7700}
   * @param callTimeout deadline of each call
   * @return a client that owns its channel
   */
  public static GuardClient forTarget(String target, Duration callTimeout) {
    return forTarget(target, callTimeout, SidecarSecurity.plaintext());
  }

  /**
   * Creates a client with its own channel to the sidecar, secured as {@code security} says (TLS,
   * a client certificate, the bearer token); {@link #close()} releases it.
   *
   * @param target gRPC target, e.g. {@code localhost:7700}
   * @param callTimeout deadline of each call
   * @param security TLS and token settings, e.g. {@code SidecarSecurity.plaintext().withTls(ca).withTokenFile(token)}
   * @return a client that owns its channel
   * @throws IllegalArgumentException when a certificate, key or token file cannot be read (naming it)
   */
  public static GuardClient forTarget(String target, Duration callTimeout, SidecarSecurity security) {
    if (target == null || target.isBlank()) {
      throw new IllegalArgumentException("target must not be empty");
    }
    ManagedChannel channel = Channels.open(target, security);
    try {
      return new GuardClient(channel, channel, callTimeout);
    } catch (RuntimeException e) {
      channel.shutdownNow();
      throw e;
    }
  }

  /**
   * Claims an event. Blocks up to the call timeout.
   *
   * @param submission the event; retry with the same object after a retriable failure
   * @return the verdict, with a claim token when accepted
   * @throws EntityBusyException if another transition of the entity is in flight
   * @throws SidecarUnavailableException if the sidecar or its store is down
   * @throws OnceGuardException for any other status, e.g. {@code INVALID_ARGUMENT} for an
   *     unknown route
   */
  public SubmitResult submit(Submission submission) {
    if (submission == null) {
      throw new IllegalArgumentException("submission must not be null");
    }
    try {
      return GuardMapping.toResult(stub().submit(GuardMapping.toRequest(submission)));
    } catch (StatusRuntimeException e) {
      throw GuardMapping.toException(e, false);
    }
  }

  /**
   * Confirms ({@link Completion#OK}) or aborts ({@link Completion#REJECT}) an accepted claim.
   * Blocks up to the call timeout.
   *
   * @param claimToken from {@link SubmitResult#claimToken()}
   * @param completion OK to confirm, REJECT to abort
   * @param message why (for REJECT it is kept with the decision); no payload or secrets
   * @return the final verdict
   * @throws ClaimExpiredException if the claim's lease expired before this call
   * @throws SidecarUnavailableException if the sidecar or its store is down; retry
   * @throws OnceGuardException for any other status
   */
  public Verdict complete(String claimToken, Completion completion, String message) {
    if (completion == null) {
      throw new IllegalArgumentException("completion must not be null");
    }
    return complete(completeRequest(claimToken, message)
        .setOutcome(completion == Completion.OK ? HandleResult.Outcome.OK : HandleResult.Outcome.REJECT).build());
  }

  /**
   * Confirms an accepted claim and stores {@code response} with it: every later {@link #submit} of
   * the same fact answers {@link SubmitOutcome#DUPLICATE} with this response
   * ({@link SubmitResult#storedResponse()}), so a retried request can be answered as the first one
   * was. Blocks up to the call timeout.
   *
   * @param claimToken from {@link SubmitResult#claimToken()}
   * @param response what to answer later submissions with
   * @return the final verdict
   * @throws OnceGuardException with {@code INVALID_ARGUMENT} if the response is larger than the
   *     route's {@code response-max-bytes}; the claim stays open, so a smaller response can follow
   * @throws ClaimExpiredException if the claim's lease expired before this call
   * @throws SidecarUnavailableException if the sidecar or its store is down; retry
   */
  public Verdict complete(String claimToken, StoredResponse response) {
    if (response == null) {
      throw new IllegalArgumentException("response must not be null");
    }
    return complete(completeRequest(claimToken, "").setOutcome(HandleResult.Outcome.OK)
        .setResponse(dev.onceguard.v1.StoredResponse.newBuilder()
            .setBody(com.google.protobuf.ByteString.copyFrom(response.body())).setContentType(response.contentType()))
        .build());
  }

  private static CompleteRequest.Builder completeRequest(String claimToken, String message) {
    if (claimToken == null || claimToken.isEmpty()) {
      throw new IllegalArgumentException("claimToken must not be empty");
    }
    return CompleteRequest.newBuilder().setClaimToken(claimToken).setMessage(message == null ? "" : message);
  }

  private Verdict complete(CompleteRequest request) {
    try {
      return GuardMapping.toVerdict(stub().complete(request).getVerdict());
    } catch (StatusRuntimeException e) {
      throw GuardMapping.toException(e, true);
    }
  }

  /**
   * Explains a dedup key: its ledger rows, its entity, and up to 50 recent decisions.
   *
   * @param route route
   * @param dedupKey lower-case hex dedup key, e.g. from the {@code onceguard-dedup-key} header
   * @return what the sidecar knows
   * @throws OnceGuardException if the call fails
   */
  public Explanation explainDedupKey(String route, String dedupKey) {
    return explainDedupKey(route, dedupKey, 0);
  }

  /**
   * Explains a dedup key.
   *
   * @param route route
   * @param dedupKey lower-case hex dedup key
   * @param limit maximum decisions, newest first; 0 means 50
   * @return what the sidecar knows
   * @throws OnceGuardException if the call fails
   */
  public Explanation explainDedupKey(String route, String dedupKey, int limit) {
    requireText(dedupKey, "dedupKey");
    return explain(explainRequest(route, limit).setDedupKey(dedupKey).build());
  }

  /**
   * Explains an entity: its state, its ledger rows, and up to 50 recent decisions.
   *
   * @param route route whose state machine the entity belongs to
   * @param entityId entity id
   * @return what the sidecar knows
   * @throws OnceGuardException if the call fails
   */
  public Explanation explainEntity(String route, String entityId) {
    return explainEntity(route, entityId, 0);
  }

  /**
   * Explains an entity.
   *
   * @param route route whose state machine the entity belongs to
   * @param entityId entity id
   * @param limit maximum decisions, newest first; 0 means 50
   * @return what the sidecar knows
   * @throws OnceGuardException if the call fails
   */
  public Explanation explainEntity(String route, String entityId, int limit) {
    requireText(entityId, "entityId");
    return explain(explainRequest(route, limit).setEntityId(entityId).build());
  }

  /**
   * Releases the channel if this client owns it ({@link #forTarget}): shutdown, wait up to 5 s
   * for calls in flight, then shutdownNow. Does nothing for a client built on a
   * {@link Channel}.
   */
  @Override
  public void close() {
    if (ownedChannel != null) {
      Channels.shutdown(ownedChannel, SHUTDOWN_TIMEOUT);
    }
  }

  private Explanation explain(ExplainRequest request) {
    try {
      return GuardMapping.toExplanation(stub().explain(request));
    } catch (StatusRuntimeException e) {
      throw GuardMapping.toException(e, false);
    }
  }

  private static ExplainRequest.Builder explainRequest(String route, int limit) {
    requireText(route, "route");
    if (limit < 0) {
      throw new IllegalArgumentException("limit must not be negative: " + limit);
    }
    return ExplainRequest.newBuilder().setRoute(route).setLimit(limit);
  }

  private GuardGrpc.GuardBlockingStub stub() {
    // A deadline is absolute, so each call needs a fresh one.
    return stub.withDeadlineAfter(callTimeoutNanos, TimeUnit.NANOSECONDS);
  }

  private static void requireText(String value, String name) {
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException(name + " must not be empty");
    }
  }
}
