package dev.onceguard.client.internal;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.record.TimestampType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What differs between the kafka-clients lines this client supports, found once per consumer.
 * The client is compiled against the newest line but runs on whichever one the application's
 * build resolved (Maven keeps the version a service declares, Spring Boot 3 manages 3.x).
 *
 * <p>Differences handled here: {@code ConsumerRecords(Map, Map nextOffsets)} exists from 4.0,
 * {@code ConsumerRecords(Map)} on every supported line (deprecated in 4.x). Everything else
 * the client constructs or calls exists from 3.0 on, which the {@code client-compat-it} module
 * checks against each line.
 */
public final class KafkaClientsCompat {
  private static final Logger log = LoggerFactory.getLogger(KafkaClientsCompat.class);

  /** The kafka-clients versions this client runs on, for messages and documentation. */
  public static final String SUPPORTED_RANGE = "3.0.0 to 4.x (at least 3.0.0, below 5.0.0)";

  private static final int LOWEST_MAJOR = 3;
  private static final int HIGHEST_MAJOR = 4;
  /** Apache version plus a suffix, e.g. "3.9.1", "4.1.0-SNAPSHOT", "7.6.1-ccs" (Confluent). */
  private static final Pattern VERSION = Pattern.compile("(\\d+)\\.(\\d+)(?:\\.\\d+)?(-.*)?");
  /** Confluent Platform numbers its kafka-clients builds 7.x for Apache 3.x, 8.x for 4.x. */
  private static final int CONFLUENT_OFFSET = 4;
  private static final List<String> APP_INFO_PARSERS = List.of(
      "org.apache.kafka.common.utils.AppInfoParser", "org.apache.kafka.common.utils.internals.AppInfoParser");

  private KafkaClientsCompat() {}

  /**
   * Checks the kafka-clients on the classpath and returns the records factory for it.
   *
   * @throws IllegalStateException if that version is outside {@link #SUPPORTED_RANGE}
   */
  public static RecordsFactory forRunningVersion() {
    requireSupported(runningVersion());
    return recordsFactory();
  }

  /**
   * The version of the kafka-clients on the classpath, as its {@code AppInfoParser} reports it,
   * or "unknown". Read by reflection: that class moved to {@code common.utils.internals} in 4.x.
   */
  public static String runningVersion() {
    for (String name : APP_INFO_PARSERS) {
      try {
        Object version = Class.forName(name, true, ConsumerRecords.class.getClassLoader())
            .getMethod("getVersion")
            .invoke(null);
        return String.valueOf(version);
      } catch (ReflectiveOperationException | LinkageError e) {
        // not this line's name: try the next
      }
    }
    return "unknown";
  }

  /**
   * Fails if a kafka-clients version is known to be outside {@link #SUPPORTED_RANGE}. A version
   * that cannot be read ("unknown" when a repackaged jar lost its properties file) is accepted
   * if the one constructor older lines lack is there.
   *
   * @param version as {@code AppInfoParser.getVersion()} reports it
   * @throws IllegalStateException naming the version and the supported range
   */
  static void requireSupported(String version) {
    Integer major = apacheMajor(version);
    if (major == null) {
      if (!hasRecordConstructor()) {
        throw unsupported(version);
      }
      log.warn(
          "Cannot read the kafka-clients version ('{}'); OnceGuardConsumer supports {} and goes on because the"
              + " classes it needs are there",
          version, SUPPORTED_RANGE);
      return;
    }
    if (major < LOWEST_MAJOR || major > HIGHEST_MAJOR) {
      throw unsupported(version);
    }
  }

  private static Integer apacheMajor(String version) {
    if (version == null) {
      return null;
    }
    Matcher m = VERSION.matcher(version.strip());
    if (!m.matches()) {
      return null;
    }
    int major = Integer.parseInt(m.group(1));
    String suffix = m.group(3);
    boolean confluent = suffix != null && (suffix.startsWith("-ccs") || suffix.startsWith("-ce"));
    return confluent ? major - CONFLUENT_OFFSET : major;
  }

  private static IllegalStateException unsupported(String version) {
    return new IllegalStateException(String.format(
        "OnceGuardConsumer supports kafka-clients %s, but the classpath has kafka-clients %s. Declare"
            + " org.apache.kafka:kafka-clients in a supported version in your build (with Spring Boot, the"
            + " kafka.version property).",
        SUPPORTED_RANGE, version));
  }

  /** The ConsumerRecord constructor RecordConverter uses; public from kafka-clients 3.0. */
  private static boolean hasRecordConstructor() {
    try {
      ConsumerRecord.class.getConstructor(
          String.class, int.class, long.class, long.class, TimestampType.class, int.class, int.class,
          Object.class, Object.class, Headers.class, Optional.class);
      return true;
    } catch (NoSuchMethodException e) {
      return false;
    }
  }

  /**
   * The factory for the running line: with {@code nextOffsets} where the constructor takes them
   * (4.0 and later), without on 3.x, whose {@code ConsumerRecords} has no such notion.
   */
  static RecordsFactory recordsFactory() {
    try {
      MethodHandle withNextOffsets = MethodHandles.publicLookup().findConstructor(
          ConsumerRecords.class, MethodType.methodType(void.class, Map.class, Map.class));
      return new WithNextOffsets(withNextOffsets);
    } catch (NoSuchMethodException e) {
      return new WithoutNextOffsets();
    } catch (IllegalAccessException e) {
      throw new IllegalStateException("ConsumerRecords(Map, Map) is not public in this kafka-clients", e);
    }
  }

  /** kafka-clients 4.0 and later. */
  private static final class WithNextOffsets implements RecordsFactory {
    private final MethodHandle constructor;

    WithNextOffsets(MethodHandle constructor) {
      this.constructor = constructor;
    }

    @Override
    @SuppressWarnings("unchecked")
    public <K, V> ConsumerRecords<K, V> create(
        Map<TopicPartition, List<ConsumerRecord<K, V>>> records, Map<TopicPartition, OffsetAndMetadata> nextOffsets) {
      try {
        return (ConsumerRecords<K, V>) constructor.invoke(records, nextOffsets);
      } catch (RuntimeException | Error e) {
        throw e;
      } catch (Throwable e) { // the constructor declares no checked exception
        throw new IllegalStateException(e);
      }
    }
  }

  /** kafka-clients 3.x. */
  private static final class WithoutNextOffsets implements RecordsFactory {
    @Override
    @SuppressWarnings("deprecation") // deprecated from 4.0, where WithNextOffsets is used instead
    public <K, V> ConsumerRecords<K, V> create(
        Map<TopicPartition, List<ConsumerRecord<K, V>>> records, Map<TopicPartition, OffsetAndMetadata> nextOffsets) {
      return new ConsumerRecords<>(records);
    }
  }
}
