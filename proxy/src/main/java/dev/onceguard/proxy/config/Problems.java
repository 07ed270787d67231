package dev.onceguard.proxy.config;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The problems of one read, in the order found. Reading goes on after a problem with a fallback
 * value, so that one run reports them all; the fallback never reaches a caller. Not thread-safe:
 * one read, one thread.
 */
final class Problems {
  private final List<String> found = new ArrayList<>();
  /** Values read from secret files: masked in every problem, whatever setting echoes a value. */
  private final Set<String> secrets = new HashSet<>();

  void add(String problem) {
    String shown = problem;
    for (String secret : secrets) {
      if (!secret.isBlank()) {
        shown = shown.replace(secret, "***");
      }
    }
    found.add(shown);
  }

  /** {@code value} came from a secret file: it is masked in every problem reported after this. */
  void secret(String value) {
    secrets.add(value);
  }

  /** Runs one part of the read; a problem it throws is recorded and the read goes on without it. */
  <T> T attempt(Supplier<T> part) {
    try {
      return part.get();
    } catch (ConfigException e) {
      e.problems().forEach(this::add);
      return null;
    }
  }

  void throwIfAny() {
    if (!found.isEmpty()) {
      throw new ConfigException(found);
    }
  }
}
