package dev.onceguard.proxy.pipeline;

import dev.onceguard.proxy.config.RouteConfig;
import dev.onceguard.proxy.config.SidecarConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Kafka consumer configuration of one route, in three layers:
 * <ol>
 *   <li>OnceGuard's defaults, which {@code kafka.properties} may change: {@code auto.offset.reset=earliest}
 *       (a new route starts at the beginning: nothing is skipped), {@code client.id};
 *   <li>{@code kafka.properties} from the configuration;
 *   <li>settings OnceGuard must own, which win over {@code kafka.properties}: bootstrap servers, the
 *       route's group, byte-array deserializers, {@code enable.auto.commit=false} (only the finished
 *       prefix may be committed), {@code partition.assignment.strategy=CooperativeStickyAssignor}
 *       (a rebalance only stops the partitions that move; omitted with {@code group.protocol=consumer},
 *       where the broker assigns incrementally and the setting is illegal), and
 *       {@code max.poll.records} (bounds what one poll adds beyond the in-flight bound).
 * </ol>
 *
 * @param values the properties for {@code new KafkaConsumer<>(values)}
 * @param ignored one message per owned setting that {@code kafka.properties} tried to change
 */
public record ConsumerProperties(Map<String, Object> values, List<String> ignored) {

  /** Upper bound of {@code max.poll.records} (Kafka's own default). */
  static final int MAX_POLL_RECORDS_CAP = 500;

  public static ConsumerProperties of(SidecarConfig sidecar, RouteConfig route) {
    Map<String, Object> p = new LinkedHashMap<>();
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, "onceguard-" + sidecar.instanceId() + "-" + route.name());
    Map<String, String> user = sidecar.kafka().properties();
    p.putAll(user);

    Map<String, Object> owned = new LinkedHashMap<>();
    owned.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, sidecar.kafka().bootstrapServers());
    owned.put(ConsumerConfig.GROUP_ID_CONFIG, route.intake().group());
    owned.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    owned.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    owned.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    owned.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPollRecords(route)));
    String protocol = user.getOrDefault(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic").toLowerCase(Locale.ROOT);
    if (!protocol.equals("consumer")) {
      owned.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
    }

    List<String> ignored = new ArrayList<>();
    for (Map.Entry<String, Object> e : owned.entrySet()) {
      String given = user.get(e.getKey());
      if (given != null && !Objects.equals(given, String.valueOf(e.getValue()))) {
        ignored.add("kafka.properties." + e.getKey() + "=" + given + " is ignored for route '" + route.name()
            + "': OnceGuard sets it to " + e.getValue());
      }
    }
    p.putAll(owned);
    return new ConsumerProperties(Map.copyOf(p), List.copyOf(ignored));
  }

  /**
   * One poll may add this many records on top of a partition that is just below its bound, so it
   * is the bound itself (capped): at most twice the bound is ever held in memory per partition.
   */
  static int maxPollRecords(RouteConfig route) {
    return Math.max(1, Math.min(route.intake().maxInFlightPerPartition(), MAX_POLL_RECORDS_CAP));
  }
}
