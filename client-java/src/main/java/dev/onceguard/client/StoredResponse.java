package dev.onceguard.client;

import java.util.Arrays;
import java.util.Objects;

/**
 * A response kept by the sidecar with a confirmed claim: {@link GuardClient#complete(String,
 * StoredResponse)} stores it, and every later {@link GuardClient#submit} of the same fact gets it
 * back ({@link SubmitResult#storedResponse()}), so a service can answer a retried request exactly
 * as the first time. Immutable: the bytes are copied in and out.
 */
public final class StoredResponse {
  private final byte[] body;
  private final String contentType;

  /**
   * Creates a response.
   *
   * @param body the response bytes, at most the route's {@code response-max-bytes} (64 KiB by default)
   * @param contentType media type of {@code body}, e.g. {@code application/json}; at most 255 characters
   */
  public StoredResponse(byte[] body, String contentType) {
    if (body == null) {
      throw new IllegalArgumentException("body must not be null");
    }
    this.body = body.clone();
    this.contentType = contentType == null ? "" : contentType;
  }

  /** {@return a copy of the response bytes} */
  public byte[] body() {
    return body.clone();
  }

  /** {@return the media type of the body; empty if none was given} */
  public String contentType() {
    return contentType;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof StoredResponse r && Arrays.equals(body, r.body) && contentType.equals(r.contentType);
  }

  @Override
  public int hashCode() {
    return Objects.hash(Arrays.hashCode(body), contentType);
  }

  @Override
  public String toString() {
    return "StoredResponse{" + body.length + " bytes, contentType=" + contentType + "}";
  }
}
