package dev.onceguard.demo;

/** Something the demo needed did not happen; the message says what and where to look. Exit code 1. */
final class DemoFailure extends RuntimeException {
  private static final long serialVersionUID = 1L;

  DemoFailure(String message) {
    super(message);
  }

  DemoFailure(String message, Throwable cause) {
    super(message, cause);
  }
}
