package dev.onceguard.proxy.ops;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.Appender;
import ch.qos.logback.core.ConsoleAppender;
import dev.onceguard.proxy.config.SidecarSettings;
import net.logstash.logback.encoder.LogstashEncoder;
import org.slf4j.LoggerFactory;

/**
 * Switches the sidecar's stdout log between {@code text} (logback.xml's {@code STDOUT} appender) and
 * {@code json}: one JSON object per line, written by logstash-logback-encoder's
 * {@link LogstashEncoder} ({@code @timestamp}, {@code level}, {@code logger_name},
 * {@code thread_name}, {@code message}, {@code stack_trace}, and the key-value pairs of the line,
 * such as a record's {@code route}, {@code topic}, {@code partition}, {@code offset} — see
 * {@link dev.onceguard.proxy.trace.RecordLog}).
 *
 * <p>{@link #applyEnvironment()} runs first thing, so that {@value ConfigReader#LOG_FORMAT_ENV}
 * applies before the configuration is read; {@link #apply} then applies {@code sidecar.log-format}.
 * Called on the main thread during start-up; a no-op when logback is not the SLF4J backend.
 */
public final class LogFormat {
  static final String TEXT_APPENDER = "STDOUT";
  static final String JSON_APPENDER = "STDOUT_JSON";

  /** logback.xml's text appender while JSON is on, to switch back to. */
  private static Appender<ILoggingEvent> detachedText;

  private LogFormat() {}

  /** Applies {@value ConfigReader#LOG_FORMAT_ENV} when it names a format (a bad value is reported by the config read). */
  static void applyEnvironment() {
    String f = System.getenv(SidecarSettings.LOG_FORMAT_ENV);
    if (f != null && SidecarSettings.LOG_FORMATS.contains(f.trim())) {
      apply(f.trim());
    }
  }

  /** Makes {@code format} ({@code text} or {@code json}) the root logger's stdout format. */
  static synchronized void apply(String format) {
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext ctx)) {
      return;
    }
    Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    if (format.equals("json")) {
      if (root.getAppender(JSON_APPENDER) != null) {
        return;
      }
      root.addAppender(jsonAppender(ctx));
      Appender<ILoggingEvent> text = root.getAppender(TEXT_APPENDER);
      if (text != null) {
        // kept (not stopped), in case the configuration switches back to text
        detachedText = text;
        root.detachAppender(text);
      }
    } else if (root.getAppender(JSON_APPENDER) != null && detachedText != null) {
      root.addAppender(detachedText);
      detachedText = null;
      Appender<ILoggingEvent> json = root.getAppender(JSON_APPENDER);
      root.detachAppender(json);
      json.stop();
    }
  }

  /** A console appender writing one JSON object per line. */
  static ConsoleAppender<ILoggingEvent> jsonAppender(LoggerContext ctx) {
    ConsoleAppender<ILoggingEvent> a = new ConsoleAppender<>();
    a.setContext(ctx);
    a.setName(JSON_APPENDER);
    a.setEncoder(jsonEncoder(ctx));
    a.start();
    return a;
  }

  /** The JSON format's encoder, started (public for tests that capture the JSON lines). */
  public static LogstashEncoder jsonEncoder(LoggerContext ctx) {
    LogstashEncoder encoder = new LogstashEncoder();
    encoder.setContext(ctx);
    encoder.start();
    return encoder;
  }
}
