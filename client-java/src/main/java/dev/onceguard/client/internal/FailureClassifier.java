package dev.onceguard.client.internal;

import dev.onceguard.client.FailureOutcome;
import dev.onceguard.client.OnceGuardException;
import dev.onceguard.client.RejectException;
import dev.onceguard.client.RetryableException;
import dev.onceguard.v1.HandleResult;
import java.io.IOException;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.SerializationException;

/**
 * Maps a failure of record handling (or of deserializing a record) to the {@link HandleResult}
 * the sidecar is told. The rule, first match wins:
 *
 * <ol>
 *   <li>a {@link RejectException} thrown directly: REJECT — the handler said so;
 *   <li>a {@link RetryableException} thrown directly: RETRY, with its {@code retryAfter};
 *   <li>anywhere in the cause chain a {@link RetryableException}, a Kafka
 *       {@link RetriableException}, an {@link IOException}, a {@link TimeoutException}, an
 *       {@link InterruptedException}, or a retriable {@link OnceGuardException}: RETRY — the
 *       trouble is in the environment, not in the record. This comes before the next rule
 *       because deserializers wrap transient trouble (a schema registry that is down) in a
 *       {@code SerializationException};
 *   <li>anywhere in the cause chain a {@link SerializationException} or a
 *       {@link RejectException}: REJECT — the bytes cannot be turned into a record, and
 *       retrying will not change them;
 *   <li>anything else: the configured default, RETRY unless told otherwise. RETRY is the safe
 *       default because the sidecar bounds retries and then escalates: a bug that fails every
 *       record stalls only until the bound, and a transient failure we failed to recognise
 *       heals instead of rolling an entity back.
 * </ol>
 *
 * <p>Immutable and thread-safe.
 */
public final class FailureClassifier {
  /** Longest message sent; it ends up in Kafka headers of escalated records. */
  static final int MAX_MESSAGE_LENGTH = 1024;

  private final FailureOutcome unclassified;

  /**
   * Creates a classifier.
   *
   * @param unclassified the outcome for failures that no rule recognises
   */
  public FailureClassifier(FailureOutcome unclassified) {
    if (unclassified == null) {
      throw new IllegalArgumentException("unclassified outcome must not be null");
    }
    this.unclassified = unclassified;
  }

  /** The outcome for failures that no rule recognises. */
  public FailureOutcome unclassified() {
    return unclassified;
  }

  /**
   * Classifies a failure.
   *
   * @param failure what the handler or deserializer threw
   * @return a RETRY or REJECT result with a message naming the failure
   */
  public HandleResult classify(Throwable failure) {
    if (failure instanceof RejectException) {
      return result(HandleResult.Outcome.REJECT, failure, 0);
    }
    if (failure instanceof RetryableException) {
      return result(HandleResult.Outcome.RETRY, failure, retryAfterMs((RetryableException) failure));
    }
    if (inChain(failure, FailureClassifier::isTransient)) {
      return result(HandleResult.Outcome.RETRY, failure, 0);
    }
    if (inChain(failure, t -> t instanceof SerializationException || t instanceof RejectException)) {
      return result(HandleResult.Outcome.REJECT, failure, 0);
    }
    HandleResult.Outcome outcome =
        unclassified == FailureOutcome.REJECT ? HandleResult.Outcome.REJECT : HandleResult.Outcome.RETRY;
    return result(outcome, failure, 0);
  }

  /**
   * Builds a result from an explicit decision, e.g. {@code OnceGuardConsumer.reject}.
   *
   * @param outcome RETRY or REJECT
   * @param message why; truncated to a header-friendly length
   * @param retryAfterMs with RETRY, minimum wait in milliseconds; 0 lets the sidecar choose
   * @return the result
   */
  public static HandleResult decision(HandleResult.Outcome outcome, String message, long retryAfterMs) {
    return HandleResult.newBuilder()
        .setOutcome(outcome)
        .setMessage(truncate(message == null ? "" : message))
        .setRetryAfterMs((int) Math.min(Math.max(retryAfterMs, 0), 0xFFFF_FFFFL))
        .build();
  }

  private static boolean isTransient(Throwable t) {
    return t instanceof RetryableException
        || t instanceof RetriableException
        || t instanceof IOException
        || t instanceof TimeoutException
        || t instanceof InterruptedException
        || (t instanceof OnceGuardException && ((OnceGuardException) t).isRetriable());
  }

  private static boolean inChain(Throwable failure, java.util.function.Predicate<Throwable> test) {
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    for (Throwable t = failure; t != null && seen.add(t); t = t.getCause()) {
      if (test.test(t)) {
        return true;
      }
    }
    return false;
  }

  private static long retryAfterMs(RetryableException e) {
    return e.retryAfter().toMillis();
  }

  private static HandleResult result(HandleResult.Outcome outcome, Throwable failure, long retryAfterMs) {
    return decision(outcome, describe(failure), retryAfterMs);
  }

  private static String describe(Throwable failure) {
    // The handler's own signals carry a message meant for the escalation headers; anything
    // else gets its type too, since "null" or "For input string: x" alone says little.
    if (failure instanceof RejectException || failure instanceof RetryableException) {
      return String.valueOf(failure.getMessage());
    }
    String message = failure.getMessage();
    return message == null ? failure.getClass().getName() : failure.getClass().getName() + ": " + message;
  }

  private static String truncate(String message) {
    return message.length() <= MAX_MESSAGE_LENGTH ? message : message.substring(0, MAX_MESSAGE_LENGTH);
  }
}
