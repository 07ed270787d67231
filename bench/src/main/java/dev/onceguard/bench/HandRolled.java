package dev.onceguard.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import dev.onceguard.v1.Delivery;
import dev.onceguard.v1.KafkaRecord;
import dev.onceguard.v1.MessageHandlerGrpc;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.lettuce.core.RedisClient;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * What an application does without the sidecar: one plain {@link KafkaConsumer} on one thread, the
 * business key read from the JSON (the same four fields as the sidecar's route), a dedup check,
 * the business call (the same in-process business container, over the same gRPC), and a
 * synchronous offset commit after each poll. Two variants:
 *
 * <ul>
 *   <li>{@link #redisSetNx} ({@code hand_a}): per record {@code SET key 1 NX EX 3600} through
 *       lettuce's synchronous API; the business is called when the key was new;
 *   <li>{@link #insertIgnore} ({@code hand_b}): per poll one JDBC transaction, per record
 *       {@code INSERT IGNORE} into a table whose primary key is the business key; the business is
 *       called when a row was inserted; then COMMIT (a Spring Kafka batch listener in a
 *       transaction does the same).
 * </ul>
 *
 * A record ends when its step ends: after its business call ({@code hand_a}), after its poll's
 * COMMIT ({@code hand_b}). Owns its consumer, channel and store connection; {@link #close()} stops
 * the loop and closes them.
 */
final class HandRolled implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String[] KEY_FIELDS = {"id", "sku_id", "warehouse_id", "batch_no"};

  /** The dedup step of one poll: marks each record's end in {@code done}. */
  private interface Step extends AutoCloseable {
    void handle(List<ConsumerRecord<byte[], byte[]>> records, HandRolled loop) throws Exception;

    @Override
    void close();
  }

  private final KafkaConsumer<byte[], byte[]> consumer;
  private final ManagedChannel channel;
  private final MessageHandlerGrpc.MessageHandlerBlockingStub business;
  private final Completions done;
  private final Step step;
  private final Thread thread;
  private volatile boolean stop;
  private volatile Throwable failure;

  private HandRolled(String bootstrap, String topic, String businessTarget, Completions done, Step step) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    this.consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    this.channel = Grpc.newChannelBuilder(businessTarget, InsecureChannelCredentials.create()).build();
    this.business = MessageHandlerGrpc.newBlockingStub(channel);
    this.done = done;
    this.step = step;
    consumer.subscribe(List.of(topic));
    this.thread = new Thread(this::loop, "hand-rolled-" + topic);
    thread.start();
  }

  /** {@code hand_a}: Redis {@code SET NX EX} per record. */
  static HandRolled redisSetNx(Env env, String topic, String businessTarget, Completions done, String keyPrefix) {
    RedisClient client = RedisClient.create(env.redisUri());
    StatefulRedisConnection<String, String> conn = client.connect();
    RedisCommands<String, String> redis = conn.sync();
    SetArgs nxEx = SetArgs.Builder.nx().ex(3600);
    Step step = new Step() {
      @Override
      public void handle(List<ConsumerRecord<byte[], byte[]>> records, HandRolled loop) {
        for (ConsumerRecord<byte[], byte[]> r : records) {
          String key = businessKey(r.value());
          if ("OK".equals(redis.set(keyPrefix + key, "1", nxEx))) {
            loop.callBusiness(r, key);
          }
          loop.done.add(r.timestamp());
        }
      }

      @Override
      public void close() {
        conn.close();
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    };
    return new HandRolled(env.kafkaBootstrap(), topic, businessTarget, done, step);
  }

  /**
   * {@code hand_b}: {@code INSERT IGNORE} per record, one transaction per poll, in {@code database}
   * (created here with its table; the caller drops it).
   */
  static HandRolled insertIgnore(Env env, String topic, String businessTarget, Completions done, String database)
      throws SQLException {
    Connection c = DriverManager.getConnection(env.jdbcUrl(env.mysqlDatabase()), env.mysqlUser(), env.mysqlPassword());
    try (Statement s = c.createStatement()) {
      s.execute("CREATE DATABASE IF NOT EXISTS " + database);
      s.execute("USE " + database);
      s.execute("CREATE TABLE IF NOT EXISTS processed (business_key VARCHAR(255) NOT NULL PRIMARY KEY,"
          + " processed_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)) ENGINE=InnoDB");
    }
    c.setAutoCommit(false);
    PreparedStatement insert = c.prepareStatement("INSERT IGNORE INTO processed (business_key) VALUES (?)");
    Step step = new Step() {
      @Override
      public void handle(List<ConsumerRecord<byte[], byte[]>> records, HandRolled loop) throws SQLException {
        for (ConsumerRecord<byte[], byte[]> r : records) {
          String key = businessKey(r.value());
          insert.setString(1, key);
          if (insert.executeUpdate() == 1) {
            loop.callBusiness(r, key);
          }
        }
        c.commit();
        for (ConsumerRecord<byte[], byte[]> r : records) {
          loop.done.add(r.timestamp());
        }
      }

      @Override
      public void close() {
        try {
          insert.close();
          c.close();
        } catch (SQLException e) {
          System.err.println("hand_b: closing the connection failed: " + e);
        }
      }
    };
    return new HandRolled(env.kafkaBootstrap(), topic, businessTarget, done, step);
  }

  private void loop() {
    try {
      while (!stop) {
        ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(100));
        if (polled.isEmpty()) {
          continue;
        }
        done.begin();
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>(polled.count());
        polled.forEach(records::add);
        step.handle(records, this);
        consumer.commitSync();
      }
    } catch (WakeupException stopping) {
      // close() asked
    } catch (Throwable t) {
      failure = t;
      done.failed("hand-rolled loop failed: " + t);
    }
  }

  private void callBusiness(ConsumerRecord<byte[], byte[]> r, String key) {
    KafkaRecord.Builder kr = KafkaRecord.newBuilder().setTopic(r.topic()).setPartition(r.partition()).setOffset(r.offset())
        .setTimestampMs(r.timestamp()).setValue(ByteString.copyFrom(r.value()));
    if (r.key() != null) {
      kr.setKey(ByteString.copyFrom(r.key()));
    }
    business.withDeadlineAfter(10, TimeUnit.SECONDS)
        .handle(Delivery.newBuilder().setRecord(kr).setRoute("hand").setBusinessKey(key).setAttempt(1).build());
  }

  /** "field=value" pairs of the record's business key, as the sidecar's route defines it. */
  static String businessKey(byte[] json) {
    try {
      JsonNode n = JSON.readTree(json);
      StringBuilder b = new StringBuilder(96);
      for (String f : KEY_FIELDS) {
        JsonNode v = n.get(f);
        if (v == null || v.isNull()) {
          throw new IllegalArgumentException("record without " + f);
        }
        if (b.length() > 0) {
          b.append(", ");
        }
        b.append(f).append('=').append(v.asText());
      }
      return b.toString();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void close() throws InterruptedException {
    stop = true;
    consumer.wakeup();
    thread.join(30_000);
    try {
      consumer.close(Duration.ofSeconds(5));
    } finally {
      step.close();
      channel.shutdown();
      if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
        channel.shutdownNow();
      }
    }
    if (failure != null) {
      System.err.println("hand-rolled loop failed: " + failure);
    }
  }
}
