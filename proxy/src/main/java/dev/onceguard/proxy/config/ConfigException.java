package dev.onceguard.proxy.config;

import java.util.List;

/**
 * One or more configuration problems; each names the setting by its path, e.g.
 * {@code routes[0].lease: must be at least 1s}. The message is the problems, one per line.
 */
public final class ConfigException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final List<String> problems;

  public ConfigException(String message) {
    super(message);
    this.problems = List.of(message);
  }

  public ConfigException(String message, Throwable cause) {
    super(message, cause);
    this.problems = List.of(message);
  }

  /** Every problem of one configuration at once, in the order they were found; not empty. */
  public ConfigException(List<String> problems) {
    super(String.join("\n", problems));
    if (problems.isEmpty()) {
      throw new IllegalArgumentException("no problems");
    }
    this.problems = List.copyOf(problems);
  }

  /** The problems, each naming its setting; one for an exception built from a single message. */
  public List<String> problems() {
    return problems;
  }
}
