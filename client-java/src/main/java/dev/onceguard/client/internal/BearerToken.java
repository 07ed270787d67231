package dev.onceguard.client.internal;

import io.grpc.CallCredentials;
import io.grpc.Metadata;
import io.grpc.Status;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.concurrent.Executor;

/**
 * Call credentials sending {@code authorization: Bearer <token>}: a fixed token, or one read from
 * a file, again whenever the file's modification time or size changed (checked at each call, on
 * gRPC's executor, so a rotated token is sent from the next call on). A call whose token file
 * cannot be read fails with {@code UNAUTHENTICATED} naming the file, never the token.
 */
final class BearerToken extends CallCredentials {
  private static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final Path file;
  private String token;
  private FileTime readModified;
  private long readSize = -1;

  private BearerToken(Path file, String token) {
    this.file = file;
    this.token = token;
  }

  static BearerToken of(String token) {
    if (token == null || token.isBlank()) {
      throw new IllegalArgumentException("the bearer token must not be empty");
    }
    return new BearerToken(null, token.strip());
  }

  /** @throws IllegalArgumentException when the file cannot be read or is empty (naming it) */
  static BearerToken fromFile(Path file) {
    BearerToken t = new BearerToken(file, null);
    try {
      t.current();
    } catch (IOException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
    return t;
  }

  @Override
  public void applyRequestMetadata(RequestInfo info, Executor executor, MetadataApplier applier) {
    executor.execute(() -> {
      try {
        Metadata headers = new Metadata();
        headers.put(AUTHORIZATION, "Bearer " + current());
        applier.apply(headers);
      } catch (IOException | RuntimeException e) {
        applier.fail(Status.UNAUTHENTICATED.withDescription(e.getMessage()));
      }
    });
  }

  private synchronized String current() throws IOException {
    if (file == null) {
      return token;
    }
    try {
      FileTime modified = Files.getLastModifiedTime(file);
      long size = Files.size(file);
      if (!modified.equals(readModified) || size != readSize) {
        String read = Files.readString(file, StandardCharsets.UTF_8).strip();
        if (read.isEmpty()) {
          throw new IOException("bearer token file " + file + " is empty");
        }
        token = read;
        readModified = modified;
        readSize = size;
      }
      return token;
    } catch (java.nio.file.NoSuchFileException e) {
      throw new IOException("bearer token file " + file + " does not exist", e);
    }
  }
}
