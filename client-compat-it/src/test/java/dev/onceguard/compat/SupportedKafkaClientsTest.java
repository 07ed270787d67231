package dev.onceguard.compat;

import static dev.onceguard.compat.LoopbackSidecar.ROUTE;
import static dev.onceguard.compat.LoopbackSidecar.TOPIC;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.onceguard.client.OnceGuardConsumer;
import dev.onceguard.client.OnceGuardConsumerConfig;
import dev.onceguard.client.internal.KafkaClientsCompat;
import dev.onceguard.v1.Ack;
import dev.onceguard.v1.HandleResult;
import dev.onceguard.wire.Headers;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Runs once per supported kafka-clients line (one Surefire execution each, see the pom): the
 * client as compiled against the newest line, on the kafka-clients jar the execution put on the
 * classpath.
 */
class SupportedKafkaClientsTest {
  private static final String EXPECTED = System.getProperty("kafka.clients.expected");
  private static final TopicPartition P0 = new TopicPartition(TOPIC, 0);
  private static final TopicPartition P1 = new TopicPartition(TOPIC, 1);
  /**
   * kafka-clients classes the client may refer to although older lines lack them, with the
   * reason no code path reaches them there.
   */
  private static final Map<String, String> ABSENT_ON_OLDER_LINES = Map.of(
      "org/apache/kafka/clients/consumer/CloseOptions",
      "a 4.1 type, used only by close(CloseOptions), which only the 4.1+ Consumer declares");

  private LoopbackSidecar sidecar;
  private final List<Consumer<?, ?>> consumers = new ArrayList<>();

  @BeforeEach
  void start() throws Exception {
    sidecar = new LoopbackSidecar();
  }

  @AfterEach
  void stop() throws Exception {
    consumers.forEach(Consumer::close);
    sidecar.close();
  }

  @Test
  void theRunningKafkaClients_isTheLineThisExecutionSelected() {
    assertThat(EXPECTED).as("system property kafka.clients.expected").isNotBlank();
    assertThat(KafkaClientsCompat.runningVersion()).isEqualTo(EXPECTED);
    assertThat(jarOf(ConsumerRecords.class)).endsWith("kafka-clients-" + EXPECTED + ".jar");
  }

  @Test
  void consumerLoop_receivesEveryRecordAndCommitAcknowledgesThemOk() {
    sidecar.queue("d0", 0, 0, "o-1", "packed");
    sidecar.queue("d1", 0, 1, "o-2", "packed");
    sidecar.queue("d2", 1, 0, "o-3", "packed");
    sidecar.queue("d3", 1, 1, "o-4", "packed");
    Set<TopicPartition> assigned = new LinkedHashSet<>();
    Set<TopicPartition> revoked = new LinkedHashSet<>();
    Consumer<String, String> consumer = consumer(false);
    consumer.subscribe(List.of(TOPIC), new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        assigned.addAll(partitions);
      }

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        revoked.addAll(partitions);
      }
    });

    // the loop a service runs, partition by partition, committing each partition's progress
    List<ConsumerRecord<String, String>> processed = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (processed.size() < 4 && System.nanoTime() < deadline) {
      ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
      for (TopicPartition partition : records.partitions()) {
        List<ConsumerRecord<String, String>> batch = records.records(partition);
        processed.addAll(batch);
        long next = batch.get(batch.size() - 1).offset() + 1;
        consumer.commitSync(Map.of(partition, new OffsetAndMetadata(next)));
      }
    }

    assertThat(processed).extracting(r -> r.partition() + "@" + r.offset() + ":" + r.key())
        .containsExactlyInAnyOrder("0@0:o-1", "0@1:o-2", "1@0:o-3", "1@1:o-4");
    ConsumerRecord<String, String> first = processed.get(0);
    assertThat(first.topic()).isEqualTo(TOPIC);
    assertThat(first.value()).isEqualTo("packed");
    assertThat(first.timestampType()).isEqualTo(TimestampType.CREATE_TIME);
    assertThat(first.timestamp()).isEqualTo(1_700_000_000_000L + first.offset());
    assertThat(first.serializedValueSize()).isEqualTo(6);
    assertThat(first.leaderEpoch()).isEmpty();
    assertThat(new String(first.headers().lastHeader(Headers.ROUTE).value(), StandardCharsets.UTF_8)).isEqualTo(ROUTE);
    assertThat(sidecar.acks()).extracting(Ack::getDeliveryId).containsExactlyInAnyOrder("d0", "d1", "d2", "d3");
    assertThat(sidecar.acks()).allSatisfy(a -> assertThat(a.getResult().getOutcome()).isEqualTo(HandleResult.Outcome.OK));
    assertThat(consumer.assignment()).containsExactlyInAnyOrder(P0, P1);

    consumer.close();
    assertThat(assigned).containsExactlyInAnyOrder(P0, P1);
    assertThat(revoked).containsExactlyInAnyOrder(P0, P1);
  }

  @Test
  void consumerLoop_withAutoCommitAndAReject_acknowledgesEachRecordOnce() {
    sidecar.queue("d0", 0, 0, "o-1", "packed");
    sidecar.queue("d1", 0, 1, "o-2", "damaged");
    OnceGuardConsumer<String, String> consumer = consumer(true);
    consumer.subscribe(List.of(TOPIC));

    ConsumerRecords<String, String> records = pollUntil(consumer, 2);
    for (ConsumerRecord<String, String> record : records) {
      if (record.value().equals("damaged")) {
        consumer.reject(record, "damaged in transit");
      }
    }
    consumer.poll(Duration.ZERO); // auto-commits what the previous poll returned

    assertThat(sidecar.acks()).extracting(a -> a.getDeliveryId() + "=" + a.getResult().getOutcome())
        .containsExactlyInAnyOrder("d1=REJECT", "d0=OK");
  }

  /**
   * Every method the running {@code Consumer} interface declares, called through that
   * interface: it may return or throw what the client documents (UnsupportedOperationException,
   * IllegalArgumentException for the placeholder arguments, ...), but never a LinkageError such
   * as AbstractMethodError (a 3.x method not implemented) or NoSuchMethodError / NoClassDefFoundError
   * (a 4.x member used on an older line).
   */
  @Test
  void everyMethodOfTheRunningConsumerInterface_isLinkedAndAnswers() throws Exception {
    sidecar.queue("d0", 0, 0, "o-1", "packed");
    Consumer<String, String> consumer = consumer(false);
    consumer.subscribe(List.of(TOPIC));
    Deque<Method> methods = new ArrayDeque<>();
    Arrays.stream(Consumer.class.getMethods())
        .sorted(Comparator.comparing((Method m) -> m.getName().equals("close")).thenComparing(Method::toString))
        .forEach(methods::add);
    assertThat(methods).hasSizeGreaterThan(40);

    List<String> linkageErrors = new ArrayList<>();
    for (Method m : methods) {
      Object[] args = Arrays.stream(m.getParameterTypes()).map(SupportedKafkaClientsTest::placeholder).toArray();
      try {
        m.invoke(consumer, args);
      } catch (InvocationTargetException e) {
        if (e.getCause() instanceof LinkageError) {
          linkageErrors.add(m + ": " + e.getCause());
        }
      }
    }

    assertThat(linkageErrors).isEmpty();
  }

  /** The methods only the 3.x Consumer declares, through that interface: they must work, not be abstract. */
  @Test
  void methodsOnlyThe3xInterfaceDeclares_workThroughIt() throws Exception {
    Method pollLong;
    try {
      pollLong = Consumer.class.getMethod("poll", long.class);
    } catch (NoSuchMethodException e) {
      assumeTrue(false, "this kafka-clients line's Consumer has no poll(long)");
      return;
    }
    sidecar.queue("d0", 0, 0, "o-1", "packed");
    Consumer<String, String> consumer = consumer(false);
    consumer.subscribe(List.of(TOPIC));

    @SuppressWarnings("unchecked")
    ConsumerRecords<String, String> records = (ConsumerRecords<String, String>) pollLong.invoke(consumer, 2_000L);
    Method committed = Consumer.class.getMethod("committed", TopicPartition.class);

    assertThat(records.count()).isEqualTo(1);
    // committed() answers from what this consumer acknowledged (it used to throw)
    assertThat(committed.invoke(consumer, P0)).as("nothing acknowledged yet").isNull();
    consumer.commitSync();
    assertThat(((org.apache.kafka.clients.consumer.OffsetAndMetadata) committed.invoke(consumer, P0)).offset()).isEqualTo(1L);
  }

  /**
   * Everything the client's bytecode links against in kafka-clients (classes, constructors,
   * methods, fields) exists in the running line, so no code path can end in a
   * NoSuchMethodError like the ConsumerRecords(Map, Map) of issue 13.
   */
  @Test
  void everyKafkaClassAndMemberTheClientReferences_existsInTheRunningLine() throws Exception {
    ClassReferences refs = ClassReferences.ofAll(Path.of(jarOf(OnceGuardConsumer.class)));
    List<String> missing = new ArrayList<>();
    int checked = 0;
    for (String name : refs.classes) {
      if (isKafka(name)) {
        checked++;
        if (load(name) == null && !ABSENT_ON_OLDER_LINES.containsKey(name)) {
          missing.add("class " + name);
        }
      }
    }
    for (ClassReferences.Member member : refs.members) {
      if (isKafka(member.owner()) && !ABSENT_ON_OLDER_LINES.containsKey(member.owner())) {
        checked++;
        if (!exists(member)) {
          missing.add(member.toString());
        }
      }
    }

    assertThat(checked).as("kafka-clients references found").isGreaterThan(50);
    assertThat(missing).isEmpty();
  }

  // -------------------------------------------------------------------------------------------

  private OnceGuardConsumer<String, String> consumer(boolean autoCommit) {
    Map<String, Object> config = new HashMap<>();
    config.put(OnceGuardConsumerConfig.ROUTE_CONFIG, ROUTE);
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, autoCommit);
    OnceGuardConsumer<String, String> c =
        new OnceGuardConsumer<>(sidecar.channel, config, new StringDeserializer(), new StringDeserializer());
    consumers.add(c);
    return c;
  }

  private static ConsumerRecords<String, String> pollUntil(Consumer<String, String> consumer, int count) {
    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (System.nanoTime() < deadline) {
      ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
      if (records.count() >= count) {
        return records;
      }
    }
    throw new AssertionError("no poll returned " + count + " records within 5 s");
  }

  private static Object placeholder(Class<?> type) {
    if (type == Duration.class) {
      return Duration.ofMillis(10);
    } else if (type == long.class) {
      return 10L;
    } else if (type == int.class) {
      return 0;
    } else if (type == boolean.class) {
      return false;
    } else if (type == Collection.class || type == List.class) {
      return List.of();
    } else if (type == Set.class) {
      return Set.of();
    } else if (type == Map.class) {
      return Map.of();
    } else if (type == Pattern.class) {
      return Pattern.compile(TOPIC);
    } else if (type == String.class) {
      return TOPIC;
    } else if (type == TopicPartition.class) {
      return P0;
    } else if (type == OffsetAndMetadata.class) {
      return new OffsetAndMetadata(0);
    }
    return null; // listeners, callbacks, and types only some lines have
  }

  private static String jarOf(Class<?> type) {
    try {
      return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    } catch (java.net.URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  private static boolean isKafka(String internalName) {
    return internalName.startsWith("org/apache/kafka/");
  }

  private static Class<?> load(String internalName) {
    try {
      return Class.forName(internalName.replace('/', '.'), false, SupportedKafkaClientsTest.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError e) {
      return null;
    }
  }

  private static boolean exists(ClassReferences.Member member) {
    Class<?> owner = load(member.owner());
    if (owner == null) {
      return false;
    }
    if (member.name().equals("<init>")) {
      for (Constructor<?> c : owner.getDeclaredConstructors()) {
        if (descriptor(c.getParameterTypes(), void.class).equals(member.descriptor())) {
          return true;
        }
      }
      return false;
    }
    Deque<Class<?>> types = new ArrayDeque<>(List.of(owner, Object.class));
    Set<Class<?>> seen = new LinkedHashSet<>();
    while (!types.isEmpty()) {
      Class<?> type = types.poll();
      if (!seen.add(type)) {
        continue;
      }
      if (member.field()) {
        for (Field f : type.getDeclaredFields()) {
          if (f.getName().equals(member.name()) && descriptor(f.getType()).equals(member.descriptor())) {
            return true;
          }
        }
      } else {
        for (Method m : type.getDeclaredMethods()) {
          if (m.getName().equals(member.name())
              && descriptor(m.getParameterTypes(), m.getReturnType()).equals(member.descriptor())) {
            return true;
          }
        }
      }
      if (type.getSuperclass() != null) {
        types.add(type.getSuperclass());
      }
      types.addAll(List.of(type.getInterfaces()));
    }
    return false;
  }

  private static String descriptor(Class<?>[] parameters, Class<?> result) {
    StringBuilder d = new StringBuilder("(");
    for (Class<?> p : parameters) {
      d.append(descriptor(p));
    }
    return d.append(')').append(descriptor(result)).toString();
  }

  private static String descriptor(Class<?> type) {
    if (type.isArray()) {
      return type.getName().replace('.', '/');
    } else if (type.isPrimitive()) {
      return switch (type.getName()) {
        case "void" -> "V";
        case "boolean" -> "Z";
        case "byte" -> "B";
        case "char" -> "C";
        case "short" -> "S";
        case "int" -> "I";
        case "long" -> "J";
        case "float" -> "F";
        case "double" -> "D";
        default -> throw new IllegalArgumentException(type.getName());
      };
    }
    return "L" + type.getName().replace('.', '/') + ";";
  }
}
