package dev.onceguard.client;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * One event for {@link GuardClient#submit}, shaped like the Kafka record the route would have
 * consumed (key, value, headers), so the route's extraction rules apply unchanged. Immutable.
 *
 * <p>Every submission has a request id (a random UUID unless set). Retrying a failed
 * {@code submit} with the <em>same</em> {@code Submission} object makes the sidecar treat it as
 * the same source, which takes its own claim back instead of seeing a duplicate in flight.
 */
public final class Submission {
  private final String route;
  private final byte[] key;
  private final byte[] value;
  private final List<Header> headers;
  private final String requestId;

  private Submission(Builder b) {
    this.route = b.route;
    this.key = b.key;
    this.value = b.value;
    this.headers = List.copyOf(b.headers);
    this.requestId = b.requestId != null ? b.requestId : UUID.randomUUID().toString();
  }

  /**
   * Starts a submission.
   *
   * @param route route whose extraction rules and state machine apply
   * @return a builder
   */
  public static Builder builder(String route) {
    return new Builder(route);
  }

  /** {@return the route} */
  public String route() {
    return route;
  }

  /** {@return a copy of the record key, or {@code null}} */
  public byte[] key() {
    return key == null ? null : key.clone();
  }

  /** {@return a copy of the record value, or {@code null}} */
  public byte[] value() {
    return value == null ? null : value.clone();
  }

  /** {@return the record headers, in order} */
  public List<Header> headers() {
    return headers;
  }

  /** {@return the caller's id for this submission; the same for every retry of this object} */
  public String requestId() {
    return requestId;
  }

  @Override
  public String toString() {
    // no payload in logs
    return "Submission{route=" + route + ", requestId=" + requestId + ", headers=" + headers.size() + "}";
  }

  /** Builds a {@link Submission}. Not thread-safe. */
  public static final class Builder {
    private final String route;
    private byte[] key;
    private byte[] value;
    private final List<Header> headers = new ArrayList<>();
    private String requestId;

    private Builder(String route) {
      if (route == null || route.isBlank()) {
        throw new IllegalArgumentException("route must not be empty");
      }
      this.route = route;
    }

    /**
     * Sets the record key, as the route would read it from Kafka.
     *
     * @param key key bytes, or {@code null}
     * @return this builder
     */
    public Builder key(byte[] key) {
      this.key = key == null ? null : key.clone();
      return this;
    }

    /**
     * Sets the record value, usually the JSON the route extracts fields from.
     *
     * @param value value bytes, or {@code null}
     * @return this builder
     */
    public Builder value(byte[] value) {
      this.value = value == null ? null : value.clone();
      return this;
    }

    /**
     * Adds a header; repeated keys are kept, in order, as in Kafka.
     *
     * @param key header key
     * @param value header value, or {@code null}
     * @return this builder
     */
    public Builder header(String key, byte[] value) {
      if (key == null) {
        throw new IllegalArgumentException("header key must not be null");
      }
      headers.add(new RecordHeader(key, value == null ? null : Arrays.copyOf(value, value.length)));
      return this;
    }

    /**
     * Adds headers, e.g. those of a Kafka record.
     *
     * @param kafkaHeaders headers to add, in order
     * @return this builder
     */
    public Builder headers(Iterable<Header> kafkaHeaders) {
      for (Header h : kafkaHeaders) {
        header(h.key(), h.value());
      }
      return this;
    }

    /**
     * Sets the request id, e.g. an id the caller already has for this event. Default: a random
     * UUID chosen by {@link #build()}.
     *
     * @param requestId non-empty id
     * @return this builder
     */
    public Builder requestId(String requestId) {
      if (requestId == null || requestId.isEmpty()) {
        throw new IllegalArgumentException("requestId must not be empty");
      }
      this.requestId = requestId;
      return this;
    }

    /** {@return a new submission; without a request id set, one with a random UUID} */
    public Submission build() {
      return new Submission(this);
    }
  }
}
