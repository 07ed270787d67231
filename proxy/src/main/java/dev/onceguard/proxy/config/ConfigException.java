package dev.onceguard.proxy.config;

/** A configuration problem; the message names the setting by its path, e.g. {@code routes[0].lease}. */
public final class ConfigException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public ConfigException(String message) {
    super(message);
  }

  public ConfigException(String message, Throwable cause) {
    super(message, cause);
  }
}
