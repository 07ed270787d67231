package dev.onceguard.proxy.config;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * How a setting is written and checked: its name on the reference page, and for a single value
 * the parser from the (expanded) YAML text. A structure (a list, a mapping, field sources) has no
 * parser: {@link NodeReader} reads it with a method of its own. Immutable.
 */
public final class SettingType<T> {

  /** A value that does not parse; the message says why without the setting's path (the reader adds it). */
  static final class Invalid extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Invalid(String message) {
      super(message);
    }
  }

  private static final Pattern IDENT = Pattern.compile("[A-Za-z][A-Za-z0-9_]{0,31}");
  private static final Pattern TABLE_PREFIX_PATTERN = Pattern.compile("[A-Za-z][A-Za-z0-9_]{0,15}");
  private static final Pattern TOPIC_NAME = Pattern.compile("[A-Za-z0-9._-]{1,249}");
  private static final Pattern HOST_PORT = Pattern.compile("([^:\\s]+):(\\d{1,5})");
  private static final Pattern DURATION_TEXT = Pattern.compile("(\\d+)(ms|s|m|h|d)");

  public static final SettingType<String> STRING = new SettingType<>("string", s -> s, s -> s);
  public static final SettingType<Boolean> BOOLEAN = new SettingType<>("`true` / `false`", SettingType::parseBoolean, String::valueOf);
  public static final SettingType<Duration> DURATION = new SettingType<>("duration", SettingType::parseDuration, SettingType::showDuration);
  public static final SettingType<String> IDENTIFIER = pattern("identifier", IDENT,
      s -> "'" + s + "' is not a plain identifier (" + IDENT.pattern() + ")");
  public static final SettingType<String> TABLE_PREFIX = new SettingType<>("letters, digits, `_`; at most 16", s -> {
    if (!s.isEmpty() && !TABLE_PREFIX_PATTERN.matcher(s).matches()) {
      throw new Invalid("'" + s + "' is not a valid table prefix (letters, digits, '_', at most 16)");
    }
    return s;
  }, s -> s);
  public static final SettingType<String> TOPIC = pattern("Kafka topic name", TOPIC_NAME, s -> "'" + s + "' is not a valid Kafka topic name");
  public static final SettingType<Double> RATIO = new SettingType<>("number, 0 to 1", SettingType::parseRatio,
      d -> d == Math.rint(d) ? String.valueOf(d.intValue()) : String.valueOf(d));
  /** A PEM file of one or more CA certificates, checked when read. */
  public static final SettingType<Path> CA_FILE = new SettingType<>("path of a PEM CA file", SettingType::caFile, Path::toString);
  public static final SettingType<String> PEM_CERTIFICATES = checkedBySection("path of a PEM certificate file");
  public static final SettingType<String> PEM_KEY = checkedBySection("path of a PEM PKCS#8 key file");
  public static final SettingType<List<String>> STRINGS = checkedBySection("list of strings");
  public static final SettingType<List<FieldSource>> FIELD_SOURCES = checkedBySection("list of field sources");
  public static final SettingType<FieldSource> FIELD_SOURCE = checkedBySection("field source");
  public static final SettingType<Object> MAPPING = checkedBySection("mapping");

  private final String name;
  private final Function<String, T> parser;
  private final Function<T, String> shower;

  private SettingType(String name, Function<String, T> parser, Function<T, String> shower) {
    this.name = name;
    this.parser = parser;
    this.shower = shower;
  }

  /**
   * A type without a parser of its own: a structure (a list, a mapping) that {@link NodeReader}
   * reads with a method of its own, or a value its section checks against other settings (a key
   * against its certificate).
   */
  static <T> SettingType<T> checkedBySection(String name) {
    return new SettingType<>(name, null, String::valueOf);
  }

  /** A string, {@code what} on the reference page. */
  public static SettingType<String> text(String what) {
    return new SettingType<>(what, s -> s, s -> s);
  }

  public static SettingType<Integer> whole(int min, int max) {
    return new SettingType<>(String.format(java.util.Locale.ROOT, "integer, %,d to %,d", min, max), s -> {
      int v;
      try {
        v = Integer.parseInt(s.trim());
      } catch (NumberFormatException e) {
        throw new Invalid("'" + s + "' is not a whole number");
      }
      if (v < min || v > max) {
        throw new Invalid(v + " is out of range [" + min + ", " + max + "]");
      }
      return v;
    }, String::valueOf);
  }

  /** A duration no shorter than {@code min}. */
  public static SettingType<Duration> durationAtLeast(Duration min) {
    return new SettingType<>("duration, at least " + showDuration(min), s -> {
      Duration d = parseDuration(s);
      if (d.compareTo(min) < 0) {
        throw new Invalid("must be at least " + showDuration(min));
      }
      return d;
    }, SettingType::showDuration);
  }

  /** One of {@code values}, each written as {@code written} gives it (case and surrounding spaces ignored). */
  public static <T> SettingType<T> oneOf(List<T> values, Function<T, String> written) {
    List<String> names = values.stream().map(written).toList();
    return new SettingType<>("one of " + String.join(", ", names.stream().map(n -> "`" + n + "`").toList()), s -> {
      for (T v : values) {
        if (written.apply(v).equalsIgnoreCase(s.trim())) {
          return v;
        }
      }
      String near = Typos.closest(s, names);
      throw new Invalid("'" + s + "' is not one of " + String.join(", ", names) + (near == null ? "" : " (did you mean '" + near + "'?)"));
    }, written);
  }

  /** {@code host:port}, the port from {@code minPort} (0: any free port, for a listener) to 65535. */
  public static SettingType<String> hostPort(int minPort, String example) {
    return new SettingType<>("`host:port`", s -> {
      String problem = hostPortProblem(s, minPort);
      if (problem != null) {
        throw new Invalid(problem + ", e.g. " + example);
      }
      return s;
    }, s -> s);
  }

  /** {@link #hostPort}, or a Unix socket address {@code unix:///absolute/path}. */
  public static SettingType<String> address(int minPort, String example) {
    return new SettingType<>("`host:port` or `unix:///path`", s -> {
      String problem = UnixSocket.is(s) ? UnixSocket.problem(s) : hostPortProblem(s, minPort);
      if (problem != null) {
        throw new Invalid(problem + ", e.g. " + (UnixSocket.is(s) ? "unix:///run/onceguard/grpc.sock" : example));
      }
      return s;
    }, s -> s);
  }

  private static SettingType<String> pattern(String name, Pattern p, Function<String, String> problem) {
    return new SettingType<>(name, s -> {
      if (!p.matcher(s).matches()) {
        throw new Invalid(problem.apply(s));
      }
      return s;
    }, s -> s);
  }

  /** The type as the reference page names it. */
  public String name() {
    return name;
  }

  /** A single value that {@link #parse} reads; {@code false} for a structure. */
  boolean scalar() {
    return parser != null;
  }

  /** The value of {@code text}; throws {@link Invalid} saying why it is not one. */
  T parse(String text) {
    if (parser == null) {
      throw new IllegalStateException("a " + name + " is not a single value");
    }
    return parser.apply(text);
  }

  /** {@code value} as it is written in the YAML. */
  public String show(T value) {
    return shower.apply(value);
  }

  private static boolean parseBoolean(String s) {
    if (s.equals("true") || s.equals("false")) {
      return Boolean.parseBoolean(s);
    }
    throw new Invalid("'" + s + "' is not true or false");
  }

  private static double parseRatio(String r) {
    double ratio;
    try {
      ratio = Double.parseDouble(r.trim());
    } catch (NumberFormatException e) {
      throw new Invalid("'" + r + "' is not a number from 0 to 1, e.g. 0.1");
    }
    if (!(ratio >= 0 && ratio <= 1)) {
      throw new Invalid(r + " is out of range [0, 1]");
    }
    return ratio;
  }

  /** Parses {@code 250ms}, {@code 30s}, {@code 5m}, {@code 2h}, {@code 30d}. */
  static Duration parseDuration(String text) {
    Matcher mt = DURATION_TEXT.matcher(text.trim());
    if (!mt.matches()) {
      throw new Invalid("'" + text + "' is not a duration (e.g. 250ms, 30s, 5m, 2h, 30d)");
    }
    try {
      long v = Long.parseLong(mt.group(1));
      return switch (mt.group(2)) {
        case "ms" -> Duration.ofMillis(v);
        case "s" -> Duration.ofSeconds(v);
        case "m" -> Duration.ofMinutes(v);
        case "h" -> Duration.ofHours(v);
        default -> Duration.ofDays(v);
      };
    } catch (NumberFormatException | ArithmeticException e) {
      throw new Invalid("'" + text + "' is not a duration (too large)");
    }
  }

  /** {@code d} in the largest unit that writes it whole: {@code 14d}, {@code 30s}, {@code 200ms}. */
  static String showDuration(Duration d) {
    long ms = d.toMillis();
    long[] units = {86_400_000L, 3_600_000L, 60_000L, 1000L};
    String[] names = {"d", "h", "m", "s"};
    for (int i = 0; i < units.length; i++) {
      if (ms != 0 && ms % units[i] == 0) {
        return ms / units[i] + names[i];
      }
    }
    return ms + "ms";
  }

  /** Why {@code hostPort} is not {@code host:port} with a port from {@code minPort} to 65535; {@code null} when it is. */
  private static String hostPortProblem(String hostPort, int minPort) {
    Matcher mt = HOST_PORT.matcher(hostPort);
    if (!mt.matches() || Integer.parseInt(mt.group(2)) < minPort || Integer.parseInt(mt.group(2)) > 65535) {
      return "'" + hostPort + "' is not host:port (port " + minPort + " to 65535)";
    }
    return null;
  }

  /**
   * A PEM file of one or more CA certificates ({@code null} when blank: none), checked now so that a wrong path or a key given
   * for a certificate fails start-up naming the setting.
   */
  private static Path caFile(String s) {
    if (s.isBlank()) {
      return null;
    }
    Path file = Path.of(s.trim());
    try (InputStream in = Files.newInputStream(file)) {
      if (CertificateFactory.getInstance("X.509").generateCertificates(in).isEmpty()) {
        throw new Invalid("CA file " + file + " holds no PEM certificate");
      }
      return file;
    } catch (NoSuchFileException e) {
      throw new Invalid("CA file " + file + " does not exist");
    } catch (IOException e) {
      throw new Invalid("cannot read CA file " + file + ": " + e.getMessage());
    } catch (CertificateException e) {
      throw new Invalid("CA file " + file + " is not a PEM certificate: " + e.getMessage());
    }
  }
}
