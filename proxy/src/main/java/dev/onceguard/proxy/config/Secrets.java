package dev.onceguard.proxy.config;

import java.io.IOException;
import java.net.URI;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * Secrets in the configuration: reading {@code ${file:/path}} references, and showing values that
 * may hold one (a Redis URI's {@code user:password@}) without it. A secret's value never appears
 * in a message made here; a file is named by its path only.
 */
public final class Secrets {
  private Secrets() {}

  /** Why a secret file could not be read, without its content. */
  public static final class Unreadable extends Exception {
    private static final long serialVersionUID = 1L;

    Unreadable(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * The content of a secret file, without one trailing newline ({@code echo secret > file} and
   * Kubernetes secrets written from a text editor end with one; the secret does not).
   */
  public static String readFile(String path) throws Unreadable {
    String text;
    try {
      text = Files.readString(Path.of(path));
    } catch (NoSuchFileException e) {
      throw new Unreadable("secret file " + path + " does not exist");
    } catch (AccessDeniedException e) {
      throw new Unreadable("secret file " + path + " is not readable by this process (permission denied)");
    } catch (IOException | RuntimeException e) {
      // the exception's message names the file, never its content; its class says what went wrong
      throw new Unreadable("cannot read secret file " + path + " (" + e.getClass().getSimpleName() + ")");
    }
    if (text.endsWith("\r\n")) {
      return text.substring(0, text.length() - 2);
    }
    return text.endsWith("\n") ? text.substring(0, text.length() - 1) : text;
  }

  /**
   * {@code uri} with its user info ({@code user:password@} or {@code password@}) replaced by
   * {@code ***@}; a URI that does not parse is not shown at all (its password could be anywhere).
   */
  public static String withoutUserInfo(String uri) {
    try {
      URI u = new URI(uri);
      return u.getRawUserInfo() == null ? uri : uri.replace(u.getRawUserInfo() + "@", "***@");
    } catch (java.net.URISyntaxException | IllegalArgumentException e) {
      return "(unparseable URI)";
    }
  }
}
