package dev.onceguard.proxy.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.onceguard.proxy.config.MachineConfig.EventConfig;
import dev.onceguard.proxy.config.RouteConfig.Mode;
import dev.onceguard.proxy.config.RouteConfig.RetryConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import org.assertj.core.api.AbstractThrowableAssert;
import org.junit.jupiter.api.Test;

class ConfigReaderTest {

  /** The reference order pipeline: five forward states plus cancelled, a four-field business key. */
  private static final String REFERENCE = """
      sidecar:
        instance-id: og-test-1
      kafka:
        bootstrap-servers: kafka-1:9092,kafka-2:9092
        properties:
          security.protocol: PLAINTEXT
      mysql:
        host: mysql.internal
        database: onceguard
        user: og
        password: ${DB_PASSWORD}
      redis:
        uri: redis://redis:6379/0
      machines:
        order:
          states: [created, paid, to_ship, shipped, delivered, cancelled]
          terminal: [delivered, cancelled]
          events:
            create:  { to: created }
            pay:     { from: [created], to: paid }
            prepare: { from: [paid], to: to_ship }
            ship:    { from: [to_ship], to: shipped }
            deliver: { from: [shipped], to: delivered }
            cancel:  { from: [created, paid, to_ship], to: cancelled }
      routes:
        - name: fulfilment
          topics: [orders]
          machine: order
          entity-id: /order_id
          event: header:event-type
          business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]
          fingerprint-exclude: [/message_id, /sent_at]
          target: 127.0.0.1:7000
      """;

  private static final Map<String, String> ENV = Map.of("DB_PASSWORD", "s3cret");

  private static SidecarConfig parse(String yaml) {
    return new ConfigReader(ENV).parse(yaml, "test.yaml");
  }

  /** The reference config with one exact piece of text replaced; fails if the piece is absent. */
  private static String variant(String from, String to) {
    assertThat(REFERENCE).as("test setup: reference config contains the text to replace").contains(from);
    return REFERENCE.replace(from, to);
  }

  private static AbstractThrowableAssert<?, ? extends Throwable> assertRejected(String yaml) {
    return assertThatThrownBy(() -> parse(yaml)).isInstanceOf(ConfigException.class);
  }

  private static ConfigException rejected(String yaml) {
    try {
      parse(yaml);
    } catch (ConfigException e) {
      return e;
    }
    throw new AssertionError("accepted:\n" + yaml);
  }

  // ------------------------------------------------------------------------- valid configuration

  @Test
  void referenceConfig_parsesSidecarKafkaMysqlRedisWithDefaults() {
    SidecarConfig c = parse(REFERENCE);

    assertThat(c.instanceId()).isEqualTo("og-test-1");
    assertThat(c.grpcListen()).isEqualTo(SidecarSettings.GRPC_LISTEN.defaultValue());
    assertThat(c.shutdownTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(c.commitInterval()).isEqualTo(Duration.ofSeconds(1));
    assertThat(c.kafka().bootstrapServers()).isEqualTo("kafka-1:9092,kafka-2:9092");
    assertThat(c.kafka().properties()).containsExactly(Map.entry("security.protocol", "PLAINTEXT"));
    assertThat(c.mysql()).isEqualTo(new MysqlConfig(
        "mysql.internal", 3306, "onceguard", "og", "s3cret", "og_", 8, true, Duration.ofDays(14)));
    assertThat(c.redis().uri()).isEqualTo("redis://redis:6379/0");
    assertThat(c.redis().enabled()).isTrue();
    assertThat(c.redis().timeout()).isEqualTo(Duration.ofMillis(200));
    assertThat(c.redis().keyPrefix()).isEqualTo("og:");
    assertThat(c.redis().breakerOpenFor()).isEqualTo(Duration.ofSeconds(5));
  }

  @Test
  void referenceConfig_parsesTheOrderMachine() {
    MachineConfig m = parse(REFERENCE).machines().get("order");

    assertThat(m.name()).isEqualTo("order");
    assertThat(m.states()).containsExactly("created", "paid", "to_ship", "shipped", "delivered", "cancelled");
    assertThat(m.terminal()).containsExactly("delivered", "cancelled");
    assertThat(m.events().keySet()).containsExactly("create", "pay", "prepare", "ship", "deliver", "cancel");
    assertThat(m.events().get("create")).isEqualTo(new EventConfig("create", Set.of(), "created"));
    assertThat(m.events().get("create").creating()).isTrue();
    assertThat(m.events().get("pay")).isEqualTo(new EventConfig("pay", Set.of("created"), "paid"));
    assertThat(m.events().get("pay").creating()).isFalse();
    assertThat(m.events().get("cancel").from()).containsExactly("created", "paid", "to_ship");
    assertThat(m.events().get("cancel").to()).isEqualTo("cancelled");
    assertThat(m.cycles()).isEmpty();
  }

  @Test
  void referenceConfig_parsesTheRouteWithDefaults() {
    RouteConfig r = parse(REFERENCE).routes().get(0);

    assertThat(r.name()).isEqualTo("fulfilment");
    assertThat(r.intake().topics()).containsExactly("orders");
    assertThat(r.intake().group()).isEqualTo("onceguard-fulfilment");
    assertThat(r.machine()).isEqualTo("order");
    assertThat(r.hasMachine()).isTrue();
    assertThat(r.extraction().entityId()).containsExactly(new FieldSource.ValuePointer("entity-id", "/order_id"));
    assertThat(r.extraction().event()).isEqualTo(new FieldSource.Header("event", "event-type"));
    assertThat(r.extraction().businessKey()).containsExactly(
        new FieldSource.ValuePointer("order_id", "/order_id"),
        new FieldSource.ValuePointer("sku_id", "/sku_id"),
        new FieldSource.ValuePointer("warehouse_id", "/warehouse_id"),
        new FieldSource.ValuePointer("batch_no", "/batch_no"));
    assertThat(r.extraction().fingerprint()).isEmpty();
    assertThat(r.extraction().fingerprintExclude()).containsExactly("/message_id", "/sent_at");
    assertThat(r.delivery().mode()).isEqualTo(Mode.PUSH);
    assertThat(r.delivery().target()).isEqualTo("127.0.0.1:7000");
    assertThat(r.timings().redisTtl()).isEqualTo(Duration.ofDays(30));
    assertThat(r.delivery().handlerTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(r.timings().lease()).isEqualTo(Duration.ofSeconds(30));
    assertThat(r.timings().earlyArrivalTimeout()).isEqualTo(Duration.ofSeconds(60));
    assertThat(r.timings().earlyArrivalRetry()).isEqualTo(Duration.ofMillis(200));
    assertThat(r.outputs().escalationTopic()).isEqualTo("orders.escalate");
    assertThat(r.outputs().verdictTopic()).isNull();
    assertThat(r.intake().maxInFlightPerPartition()).isEqualTo(64);
    assertThat(r.intake().maxInFlight()).isEqualTo(512);
    assertThat(r.intake().maxUncommittedPerPartition()).isEqualTo(640);
    assertThat(r.delivery().retry()).isEqualTo(new RetryConfig(Duration.ofMillis(100), Duration.ofSeconds(10), 20));
  }

  @Test
  void explicitRouteSettings_overrideDefaults() {
    SidecarConfig c = parse(variant("    target: 127.0.0.1:7000\n", """
            target: 127.0.0.1:7000
            group: og-orders
            redis-ttl: 45d
            lease: 2m
            handler-timeout: 1500ms
            early-arrival-timeout: 2h
            early-arrival-retry: 1s
            escalation-topic: orders.dlq
            verdict-topic: orders.verdicts
            max-in-flight-per-partition: 8
            max-in-flight: 100
            max-uncommitted-per-partition: 50
            reorder-window: 2
            retry: { initial-backoff: 50ms, max-backoff: 5s, max-attempts: 3 }
        """));
    RouteConfig r = c.routes().get(0);

    assertThat(r.intake().group()).isEqualTo("og-orders");
    assertThat(r.timings().redisTtl()).isEqualTo(Duration.ofDays(45));
    assertThat(r.timings().lease()).isEqualTo(Duration.ofMinutes(2));
    assertThat(r.delivery().handlerTimeout()).isEqualTo(Duration.ofMillis(1500));
    assertThat(r.timings().earlyArrivalTimeout()).isEqualTo(Duration.ofHours(2));
    assertThat(r.timings().earlyArrivalRetry()).isEqualTo(Duration.ofSeconds(1));
    assertThat(r.outputs().escalationTopic()).isEqualTo("orders.dlq");
    assertThat(r.outputs().verdictTopic()).isEqualTo("orders.verdicts");
    assertThat(r.intake().maxInFlightPerPartition()).isEqualTo(8);
    assertThat(r.intake().maxInFlight()).isEqualTo(100);
    assertThat(r.intake().maxUncommittedPerPartition()).isEqualTo(50);
    assertThat(r.intake().reorderWindow()).isEqualTo(2);
    assertThat(r.delivery().retry()).isEqualTo(new RetryConfig(Duration.ofMillis(50), Duration.ofSeconds(5), 3));
  }

  @Test
  void reorderWindow_defaultsToFour_orThePerPartitionBoundIfSmaller() {
    assertThat(parse(REFERENCE).routes().get(0).intake().reorderWindow()).isEqualTo(RouteSettings.REORDER_WINDOW.defaultValue());
    RouteConfig small = parse(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    max-in-flight-per-partition: 2\n"))
        .routes().get(0);
    assertThat(small.intake().reorderWindow()).isEqualTo(2);
  }

  @Test
  void reorderWindow_largerThanThePerPartitionBound_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n",
        "    target: 127.0.0.1:7000\n    max-in-flight-per-partition: 2\n    reorder-window: 3\n"))
        .hasMessage("routes[0].reorder-window: 3 exceeds max-in-flight-per-partition (2)");
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    reorder-window: 0\n"))
        .hasMessageStartingWith("routes[0].reorder-window:");
  }

  @Test
  void businessKeyEntry_nameAndFromForm_usesTheGivenName() {
    RouteConfig r = parse(variant("business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]",
        "business-key: [/order_id, {name: wh, from: /warehouse/id}, header:batch, key, 'key:/sku', 'const:v2']"))
        .routes().get(0);

    assertThat(r.extraction().businessKey()).containsExactly(
        new FieldSource.ValuePointer("order_id", "/order_id"),
        new FieldSource.ValuePointer("wh", "/warehouse/id"),
        new FieldSource.Header("batch", "batch"),
        new FieldSource.Key("key", ""),
        new FieldSource.Key("sku", "/sku"),
        new FieldSource.Constant("const", "v2"));
  }

  @Test
  void constantEvent_ofTheMachine_isAccepted() {
    RouteConfig r = parse(variant("event: header:event-type", "event: const:ship")).routes().get(0);

    assertThat(r.extraction().event()).isEqualTo(new FieldSource.Constant("event", "ship"));
  }

  @Test
  void pullRoute_withoutTarget_isAccepted() {
    RouteConfig r = parse(variant("    target: 127.0.0.1:7000\n", "    mode: pull\n")).routes().get(0);

    assertThat(r.delivery().mode()).isEqualTo(Mode.PULL);
    assertThat(r.delivery().target()).isNull();
  }

  @Test
  void routeWithoutMachine_hasNoEntityOrEvent() {
    SidecarConfig c = parse(variant("routes:\n", """
        routes:
          - name: audit
            topics: [audit-log]
            business-key: [/audit_id]
            target: 127.0.0.1:7001
        """));

    RouteConfig audit = c.routes().get(0);
    assertThat(audit.hasMachine()).isFalse();
    assertThat(audit.machine()).isNull();
    assertThat(audit.extraction().entityId()).isEmpty();
    assertThat(audit.extraction().event()).isNull();
    assertThat(c.routes()).extracting(RouteConfig::name).containsExactly("audit", "fulfilment");
  }

  @Test
  void redisSection_absent_disablesL1() {
    SidecarConfig c = parse(variant("redis:\n  uri: redis://redis:6379/0\n", ""));

    assertThat(c.redis().enabled()).isFalse();
    assertThat(c.redis().uri()).isNull();
  }

  @Test
  void redisClusterMode_takesSeveralSeedUris() {
    SidecarConfig c = parse(variant("  uri: redis://redis:6379/0\n",
        "  mode: cluster\n  uri: redis://r1:7000, redis://r2:7001\n"));

    assertThat(c.redis().cluster()).isTrue();
    assertThat(c.redis().uris()).containsExactly("redis://r1:7000", "redis://r2:7001");
    assertThat(parse(REFERENCE).redis().cluster()).as("standalone by default").isFalse();
  }

  @Test
  void redisSeveralUris_withoutClusterMode_errorNamesPath() {
    assertRejected(variant("  uri: redis://redis:6379/0\n", "  uri: redis://r1:7000,redis://r2:7001\n"))
        .hasMessageStartingWith("redis.uri: several URIs are only allowed with mode: cluster");
    assertRejected(variant("  uri: redis://redis:6379/0\n", "  mode: sentinel\n  uri: redis://r1:7000\n"))
        .hasMessageStartingWith("redis.mode: 'sentinel' is not one of standalone, cluster");
    assertRejected(variant("  uri: redis://redis:6379/0\n", "  mode: cluster\n  uri: redis://r1:7000, r2:7001\n"))
        .hasMessageStartingWith("redis.uri: 'r2:7001' is not a redis:// or rediss:// URI");
  }

  @Test
  void mysqlToString_neverShowsThePassword() {
    assertThat(parse(REFERENCE).mysql().toString()).doesNotContain("s3cret").contains("og@mysql.internal:3306/onceguard");
  }

  @Test
  void machineWithCycle_isAllowedAndReportsTheStatesOnIt() {
    SidecarConfig c = parse(variant("machines:\n", """
        machines:
          ticket:
            states: [open, review, closed]
            events:
              open:    { to: open }
              submit:  { from: [open], to: review }
              reject:  { from: [review], to: open }
              approve: { from: [review], to: closed }
        """));

    assertThat(c.machines().get("ticket").cycles()).containsExactly("states on a cycle: [open, review]");
    assertThat(c.machines().get("order").cycles()).isEmpty();
  }

  @Test
  void eventFrom_singleStateWithoutList_isAccepted() {
    MachineConfig m = parse(variant("pay:     { from: [created], to: paid }", "pay:     { from: created, to: paid }"))
        .machines().get("order");

    assertThat(m.events().get("pay").from()).containsExactly("created");
  }

  // ------------------------------------------------------------------------- unknown keys (typos)

  @Test
  void unknownTopLevelKey_errorNamesTheKey() {
    assertRejected(REFERENCE + "rotues: []\n").hasMessage("rotues: unknown setting (did you mean 'routes'?)");
  }

  @Test
  void unknownNestedKey_mysqlTypo_errorNamesPath() {
    assertRejected(variant("  user: og\n", "  user: og\n  pool_size: 4\n")).hasMessage("mysql.pool_size: unknown setting (did you mean 'pool-size'?)");
  }

  @Test
  void unknownNestedKey_routeTypo_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    early-arival-timeout: 5m\n"))
        .hasMessage("routes[0].early-arival-timeout: unknown setting (did you mean 'early-arrival-timeout'?)");
  }

  @Test
  void unknownNestedKey_eventTypo_errorNamesPath() {
    assertRejected(variant("pay:     { from: [created], to: paid }", "pay:     { form: [created], to: paid }"))
        .hasMessage("machines.order.events.pay.form: unknown setting (did you mean 'from'?)");
  }

  @Test
  void unknownNestedKey_retryTypo_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    retry: { max-atempts: 3 }\n"))
        .hasMessage("routes[0].retry.max-atempts: unknown setting (did you mean 'max-attempts'?)");
  }

  @Test
  void typoOfRequiredKey_reportedAsUnknownWithSuggestion_notAsMissing() {
    ConfigException e = rejected(variant("    business-key: [", "    busines-key: ["));

    assertThat(e.problems()).containsExactly("routes[0].busines-key: unknown setting (did you mean 'business-key'?)");
  }

  @Test
  void unknownKeyFarFromEveryKnownOne_hasNoSuggestion() {
    assertRejected(variant("  user: og\n", "  user: og\n  flavour: maria\n")).hasMessage("mysql.flavour: unknown setting");
  }

  // ------------------------------------------------------------------------- every problem at once

  @Test
  void severalProblemsInOneFile_allReportedTogether_inFileOrder_eachWithItsPath() {
    String yaml = variant("  instance-id: og-test-1\n", "  instance-id: og-test-1\n  grpc-listen: 0.0.0.0:99999\n")
        .replace("    security.protocol: PLAINTEXT\n", "    security.protocol: SASL_SSLX\n")
        .replace("  user: og\n", "  user: og\n  pool_size: 4\n")
        .replace("/warehouse_id, /batch_no]", "warehouse_id, /batch_no]")
        .replace("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    lease: 500ms\n");

    ConfigException e = rejected(yaml);

    assertThat(e.problems()).satisfiesExactly(
        p -> assertThat(p).isEqualTo("sidecar.grpc-listen: '0.0.0.0:99999' is not host:port (port 0 to 65535), e.g. 127.0.0.1:7700"),
        // the rest of the text is Kafka's own (the allowed values)
        p -> assertThat(p).startsWith("kafka.properties.security.protocol: Invalid value SASL_SSLX for configuration security.protocol"),
        p -> assertThat(p).isEqualTo("mysql.pool_size: unknown setting (did you mean 'pool-size'?)"),
        p -> assertThat(p).startsWith("routes[0].business-key[2]: 'warehouse_id' is not a field source"),
        p -> assertThat(p).isEqualTo("routes[0].lease: must be at least 1s"));
    assertThat(e.getMessage()).isEqualTo(String.join("\n", e.problems()));
  }

  @Test
  void problemsInAMachineAndASecondRoute_allReported() {
    String yaml = variant("      deliver: { from: [shipped], to: delivered }\n", "      deliver: { from: [shiped], to: delivered }\n")
        + """
          - name: audit
            topics: [audit]
            business-key: [/id]
            mode: poll
        """;

    assertThat(rejected(yaml).problems()).containsExactly(
        "machines.order.events.deliver.from: unknown state 'shiped' (declared states: [created, paid, to_ship, shipped, delivered, cancelled])",
        "routes[1].mode: 'poll' is not one of push, pull (did you mean 'pull'?)");
  }

  // ------------------------------------------------------------------------- kafka.properties

  @Test
  void kafkaProperty_badEnumValue_blamedOnThatProperty() {
    assertRejected(variant("security.protocol: PLAINTEXT", "security.protocol: SASL_SSLX"))
        .hasMessageStartingWith("kafka.properties.security.protocol: Invalid value SASL_SSLX for configuration security.protocol");
  }

  @Test
  void kafkaProperty_notANumber_blamedOnThatProperty() {
    assertRejected(variant("security.protocol: PLAINTEXT", "session.timeout.ms: soon"))
        .hasMessageStartingWith("kafka.properties.session.timeout.ms: Invalid value soon for configuration session.timeout.ms");
  }

  @Test
  void kafkaProperty_unknownName_withSuggestion() {
    assertRejected(variant("security.protocol: PLAINTEXT", "securty.protocol: SSL"))
        .hasMessage("kafka.properties.securty.protocol: not a property of the Kafka consumer, producer or admin client "
            + "(did you mean 'security.protocol'?)");
  }

  @Test
  void kafkaProperty_unknownNameNotCloseToAnyClientProperty_isPassedOnForPlugins() {
    // an interceptor's or a SASL callback handler's own setting: the clients hand it to the plugin
    SidecarConfig c = parse(variant("security.protocol: PLAINTEXT", "security.protocol: PLAINTEXT\n    acme.audit.interceptor.endpoint: http://audit:8080"));

    assertThat(c.kafka().properties()).containsEntry("acme.audit.interceptor.endpoint", "http://audit:8080");
  }

  @Test
  void kafkaProperties_validValuesOfConsumerProducerAndAdminClient_accepted() {
    SidecarConfig c = parse(variant("security.protocol: PLAINTEXT",
        "security.protocol: sasl_ssl\n    sasl.mechanism: PLAIN\n    acks: all\n    session.timeout.ms: \"6000\""));

    assertThat(c.kafka().properties()).containsEntry("security.protocol", "sasl_ssl").containsEntry("acks", "all");
  }

  @Test
  void bootstrapServers_asTheKafkaClientsReadThem_ipv6AndProtocolPrefix_accepted() {
    SidecarConfig c = parse(variant("bootstrap-servers: kafka-1:9092,kafka-2:9092", "bootstrap-servers: '[::1]:9092,SASL_SSL://kafka-2:9093'"));

    assertThat(c.kafka().bootstrapServers()).isEqualTo("[::1]:9092,SASL_SSL://kafka-2:9093");
  }

  @Test
  void bootstrapServer_portOutOfRange_errorNamesPath() {
    assertRejected(variant("kafka-1:9092,kafka-2:9092", "kafka-1:9092,kafka-2:99999"))
        .hasMessageStartingWith("kafka.bootstrap-servers: 'kafka-2:99999' is not host:port (port 1 to 65535)");
  }

  @Test
  void createTopics_offByDefault_trueIsKept() {
    assertThat(parse(REFERENCE).kafka().createTopics()).isFalse();
    assertThat(parse(variant("  properties:\n", "  create-topics: true\n  properties:\n")).kafka().createTopics()).isTrue();
  }

  @Test
  void listenTargetAndRedisPorts_outOfRange_errorNamesPath() {
    assertThat(rejected(variant("target: 127.0.0.1:7000", "target: 127.0.0.1:0")).problems())
        .containsExactly("routes[0].target: '127.0.0.1:0' is not host:port (port 1 to 65535), e.g. 127.0.0.1:7000");
    assertThat(rejected(variant("  instance-id: og-test-1\n", "  instance-id: og-test-1\n  metrics-listen: 0.0.0.0:65536\n")).problems())
        .containsExactly("sidecar.metrics-listen: '0.0.0.0:65536' is not host:port (port 0 to 65535), e.g. 0.0.0.0:9400");
    assertRejected(variant("uri: redis://redis:6379/0", "uri: redis://redis:99999/0"))
        .hasMessageStartingWith("redis.uri: 'redis://redis:99999/0' has no host, or a port outside 1 to 65535");
  }

  @Test
  void closest_suggestsOnlyLikelyTypos() {
    assertThat(Typos.closest("busines-key", Set.of("business-key", "entity-id"))).isEqualTo("business-key");
    assertThat(Typos.closest("grpc_listen", Set.of("grpc-listen"))).isEqualTo("grpc-listen");
    assertThat(Typos.closest("lease", Set.of("mode", "name"))).isNull();
  }

  @Test
  void duplicateYamlKey_isRejectedNotSilentlyOverwritten() {
    // a second 'cancel' must not silently replace the first one
    String yaml = variant("      cancel:  { from: [created, paid, to_ship], to: cancelled }\n",
        "      cancel:  { from: [created, paid], to: cancelled }\n      cancel:  { from: [to_ship], to: cancelled }\n");

    assertRejected(yaml).hasMessageStartingWith("test.yaml: not valid YAML: Duplicate field 'cancel' (line ");
  }

  // ------------------------------------------------------------------------- required settings

  @Test
  void missingBootstrapServers_errorNamesPath() {
    assertRejected(variant("  bootstrap-servers: kafka-1:9092,kafka-2:9092\n", ""))
        .hasMessageStartingWith("kafka.bootstrap-servers: required");
  }

  @Test
  void missingKafkaSection_errorNamesPath() {
    assertRejected(variant("""
        kafka:
          bootstrap-servers: kafka-1:9092,kafka-2:9092
          properties:
            security.protocol: PLAINTEXT
        """, "")).hasMessageStartingWith("kafka: required section is missing");
  }

  @Test
  void missingMysqlDatabase_errorNamesPath() {
    assertRejected(variant("  database: onceguard\n", "")).hasMessageStartingWith("mysql.database: required");
  }

  @Test
  void mysqlDatabase_notAnIdentifier_errorNamesPath() {
    assertRejected(variant("database: onceguard", "database: 'og; DROP TABLE x'"))
        .hasMessageStartingWith("mysql.database: 'og; DROP TABLE x' is not a plain identifier");
  }

  @Test
  void noRoutes_isRejected() {
    assertRejected(REFERENCE.substring(0, REFERENCE.indexOf("routes:"))).hasMessageStartingWith("routes: at least one route");
  }

  // ------------------------------------------------------------------------- admin listener

  @Test
  void adminListen_unsetByDefault_setIsKept() {
    assertThat(parse(REFERENCE).adminListen()).isNull();
    assertThat(parse(variant("  instance-id: og-test-1\n", "  instance-id: og-test-1\n  admin-listen: 0.0.0.0:9401\n")).adminListen())
        .isEqualTo("0.0.0.0:9401");
  }

  @Test
  void adminListen_notHostPort_errorNamesSetting() {
    assertRejected(variant("  instance-id: og-test-1\n", "  instance-id: og-test-1\n  admin-listen: 9401\n"))
        .hasMessageStartingWith("sidecar.admin-listen: '9401' is not host:port");
    assertRejected(variant("  instance-id: og-test-1\n", "  instance-id: og-test-1\n  admin-listen: 0.0.0.0:99999\n"))
        .hasMessageStartingWith("sidecar.admin-listen: '0.0.0.0:99999' is not host:port (port 0 to 65535)");
  }

  @Test
  void adminListen_sameAsMetricsListen_errorNamesBothSettings() {
    assertRejected(variant("  instance-id: og-test-1\n",
        "  instance-id: og-test-1\n  metrics-listen: 0.0.0.0:9400\n  admin-listen: 0.0.0.0:9400\n"))
        .hasMessageStartingWith("sidecar.admin-listen: '0.0.0.0:9400' is also sidecar.metrics-listen");
  }

  // ------------------------------------------------------------------------- value formats

  @Test
  void badDuration_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    lease: 30 seconds\n"))
        .hasMessageStartingWith("routes[0].lease: '30 seconds' is not a duration");
  }

  @Test
  void durationWithoutUnit_errorNamesPath() {
    assertRejected(variant("  uri: redis://redis:6379/0\n", "  uri: redis://redis:6379/0\n  timeout: 50\n"))
        .hasMessageStartingWith("redis.timeout: '50' is not a duration");
  }

  @Test
  void durationTooLarge_errorNamesPathInsteadOfCrashing() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    redis-ttl: 99999999999999999999d\n"))
        .hasMessageStartingWith("routes[0].redis-ttl: '99999999999999999999d' is not a duration");
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    redis-ttl: 9999999999999999d\n"))
        .hasMessageStartingWith("routes[0].redis-ttl: '9999999999999999d'");
  }

  @Test
  void parseDuration_allUnits() {
    assertThat(SettingType.parseDuration("250ms")).isEqualTo(Duration.ofMillis(250));
    assertThat(SettingType.parseDuration("30s")).isEqualTo(Duration.ofSeconds(30));
    assertThat(SettingType.parseDuration("5m")).isEqualTo(Duration.ofMinutes(5));
    assertThat(SettingType.parseDuration("2h")).isEqualTo(Duration.ofHours(2));
    assertThat(SettingType.parseDuration(" 30d ")).isEqualTo(Duration.ofDays(30));
  }

  @Test
  void leaseBelowOneSecond_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    lease: 500ms\n"))
        .hasMessage("routes[0].lease: must be at least 1s");
  }

  @Test
  void portOutOfRange_errorNamesPath() {
    assertRejected(variant("  host: mysql.internal\n", "  host: mysql.internal\n  port: 70000\n"))
        .hasMessageStartingWith("mysql.port: 70000 is out of range");
  }

  @Test
  void redisUri_notRedisScheme_errorNamesPath() {
    assertRejected(variant("uri: redis://redis:6379/0", "uri: http://redis:6379")).hasMessageStartingWith("redis.uri: ");
  }

  @Test
  void unknownMode_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    mode: poll\n"))
        .hasMessageStartingWith("routes[0].mode: 'poll' is not one of push, pull");
  }

  @Test
  void maxBackoffBelowInitial_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n",
        "    target: 127.0.0.1:7000\n    retry: { initial-backoff: 5s, max-backoff: 1s }\n"))
        .hasMessage("routes[0].retry.max-backoff: must not be smaller than initial-backoff");
  }

  // ------------------------------------------------------------------------- field sources

  @Test
  void businessKeyEntry_notAJsonPointer_errorNamesPath() {
    assertRejected(variant("/warehouse_id, /batch_no]", "warehouse_id, /batch_no]"))
        .hasMessageStartingWith("routes[0].business-key[2]: 'warehouse_id' is not a field source");
  }

  @Test
  void businessKeyEntry_keyWithBadPointer_errorNamesPath() {
    assertRejected(variant("/warehouse_id, /batch_no]", "'key:warehouse_id', /batch_no]"))
        .hasMessageStartingWith("routes[0].business-key[2]: 'warehouse_id' is not a JSON pointer");
  }

  @Test
  void businessKeyEntry_badTildeEscape_errorNamesPath() {
    assertRejected(variant("/warehouse_id, /batch_no]", "/warehouse~2id, /batch_no]"))
        .hasMessageStartingWith("routes[0].business-key[2]: '/warehouse~2id' is not a JSON pointer");
  }

  @Test
  void businessKeyEntry_duplicateName_errorNamesPath() {
    assertRejected(variant("/warehouse_id, /batch_no]", "/warehouse_id, /dest/warehouse_id]"))
        .hasMessageStartingWith("routes[0].business-key[3]: duplicate field name 'warehouse_id'");
  }

  @Test
  void businessKey_missing_errorNamesPath() {
    assertRejected(variant("    business-key: [/order_id, /sku_id, /warehouse_id, /batch_no]\n", ""))
        .hasMessageStartingWith("routes[0].business-key: required");
  }

  @Test
  void entityId_missingOnMachineRoute_errorNamesPath() {
    assertRejected(variant("    entity-id: /order_id\n", "")).hasMessageStartingWith("routes[0].entity-id: required with a machine");
  }

  @Test
  void entityId_list_isACompositeIdInOrder() {
    RouteConfig r = parse(variant("entity-id: /order_id", "entity-id: [/order_id, /sku_id, {name: wh, from: /warehouse/id}]"))
        .routes().get(0);

    assertThat(r.extraction().entityId()).containsExactly(
        new FieldSource.ValuePointer("order_id", "/order_id"),
        new FieldSource.ValuePointer("sku_id", "/sku_id"),
        new FieldSource.ValuePointer("wh", "/warehouse/id"));
  }

  @Test
  void entityIdEntry_notAFieldSource_errorNamesPathWithIndex() {
    assertRejected(variant("entity-id: /order_id", "entity-id: [/order_id, sku_id]"))
        .hasMessageStartingWith("routes[0].entity-id[1]: 'sku_id' is not a field source");
  }

  @Test
  void entityIdEntry_duplicateName_errorNamesPathWithIndex() {
    assertRejected(variant("entity-id: /order_id", "entity-id: [/order_id, /line/order_id]"))
        .hasMessageStartingWith("routes[0].entity-id[1]: duplicate field name 'order_id'");
  }

  @Test
  void entityId_emptyList_errorNamesPath() {
    assertRejected(variant("entity-id: /order_id", "entity-id: []"))
        .hasMessageStartingWith("routes[0].entity-id: must not be empty");
  }

  @Test
  void entityId_mapping_errorNamesPath() {
    assertRejected(variant("entity-id: /order_id", "entity-id: {from: /order_id}"))
        .hasMessageStartingWith("routes[0].entity-id: must be a list");
  }

  @Test
  void entityIdEntry_emptyConstant_errorNamesPathWithIndex() {
    assertRejected(variant("entity-id: /order_id", "entity-id: [/order_id, 'const:']"))
        .hasMessageStartingWith("routes[0].entity-id[1]: an empty constant cannot identify anything");
  }

  @Test
  void businessKeyEntry_blankConstant_errorNamesPathWithIndex() {
    assertRejected(variant("/warehouse_id, /batch_no]", "/warehouse_id, 'const: ']"))
        .hasMessageStartingWith("routes[0].business-key[3]: an empty constant cannot identify anything");
  }

  @Test
  void exampleOrderFulfilmentFile_isValidAndKeysTheMachineByLine() {
    // the reference configuration shipped in examples/ must not rot
    SidecarConfig c = new ConfigReader(Map.of()).read(java.nio.file.Path.of("..", "examples", "order-fulfilment.yaml"));

    assertThat(c.routes()).hasSize(5).allSatisfy(r -> assertThat(r.extraction().entityId()).extracting(FieldSource::name)
        .containsExactly("order_id", "sku_id", "warehouse_id"));
  }

  @Test
  void exampleQuickstartFile_isValidWithTheStacksDefaults() {
    SidecarConfig c = new ConfigReader(Map.of()).read(java.nio.file.Path.of("..", "examples", "quickstart.yaml"));

    assertThat(c.kafka().createTopics()).isTrue();
    assertThat(c.routes()).singleElement().satisfies(r -> {
      assertThat(r.outputs().escalationTopic()).isEqualTo("quickstart.orders.escalate");
      assertThat(r.timings().earlyArrivalTimeout()).isEqualTo(Duration.ofSeconds(5));
      assertThat(r.timings().lease()).isEqualTo(RouteSettings.LEASE.defaultValue());
    });
  }

  @Test
  void routesOfOneMachine_differentNumberOfEntityIdFields_errorNamesPathAndOtherRoute() {
    assertRejected(REFERENCE + """
          - name: lines
            topics: [lines]
            machine: order
            entity-id: [/order_id, /sku_id, /warehouse_id]
            event: /event
            business-key: [/order_id, /sku_id, /warehouse_id]
            target: 127.0.0.1:7001
        """).hasMessageStartingWith("routes[1].entity-id: 3 field(s) [order_id, sku_id, warehouse_id], but route 'fulfilment'"
        + " of machine 'order' has 1 [entity-id]");
  }

  @Test
  void routesOfOneMachine_sameNumberOfEntityIdFieldsFromDifferentSources_areAccepted() {
    SidecarConfig c = parse(variant("entity-id: /order_id", "entity-id: [/order_id, /sku_id]") + """
          - name: lines
            topics: [lines]
            machine: order
            entity-id: [header:order, header:sku]
            event: /event
            business-key: [/order_id, /sku_id]
            target: 127.0.0.1:7001
        """);

    assertThat(c.routes()).extracting(rc -> rc.extraction().entityId().size()).containsExactly(2, 2);
  }

  @Test
  void entityId_onRouteWithoutMachine_errorNamesPath() {
    assertRejected(variant("    machine: order\n", "")).hasMessageStartingWith("routes[0].entity-id: only meaningful with a 'machine'");
  }

  @Test
  void fingerprintExclude_notAValuePointer_errorNamesPath() {
    assertRejected(variant("fingerprint-exclude: [/message_id, /sent_at]", "fingerprint-exclude: [/message_id, 'header:sent-at']"))
        .hasMessage("routes[0].fingerprint-exclude[1]: must be a JSON pointer into the value");
  }

  @Test
  void fingerprintAndFingerprintExclude_bothGiven_errorNamesPath() {
    assertRejected(variant("    fingerprint-exclude: [/message_id, /sent_at]\n",
        "    fingerprint-exclude: [/message_id, /sent_at]\n    fingerprint: [/amount]\n"))
        .hasMessageStartingWith("routes[0].fingerprint-exclude: give either 'fingerprint'");
  }

  // ------------------------------------------------------------------------- machines

  @Test
  void eventFrom_unknownState_errorNamesPath() {
    assertRejected(variant("pay:     { from: [created], to: paid }", "pay:     { from: [craeted], to: paid }"))
        .hasMessageStartingWith("machines.order.events.pay.from: unknown state 'craeted'");
  }

  @Test
  void eventTo_unknownState_errorNamesPath() {
    assertRejected(variant("ship:    { from: [to_ship], to: shipped }", "ship:    { from: [to_ship], to: shiped }"))
        .hasMessageStartingWith("machines.order.events.ship.to: unknown state 'shiped'");
  }

  @Test
  void eventFrom_terminalState_errorNamesPath() {
    assertRejected(variant("cancel:  { from: [created, paid, to_ship], to: cancelled }",
        "cancel:  { from: [created, paid, to_ship, delivered], to: cancelled }"))
        .hasMessageStartingWith("machines.order.events.cancel.from: state 'delivered' is terminal");
  }

  @Test
  void terminal_unknownState_errorNamesPath() {
    assertRejected(variant("terminal: [delivered, cancelled]", "terminal: [delivered, canceled]"))
        .hasMessageStartingWith("machines.order.terminal: unknown state 'canceled'");
  }

  @Test
  void state_unreachableFromAnyCreatingEvent_errorNamesPathAndState() {
    assertRejected(variant("delivered, cancelled]\n    terminal", "delivered, cancelled, refunded]\n    terminal"))
        .hasMessage("machines.order.states: state 'refunded' is unreachable from any creating event");
  }

  @Test
  void machine_withoutCreatingEvent_errorNamesPath() {
    assertRejected(variant("create:  { to: created }", "create:  { from: [paid], to: created }"))
        .hasMessageStartingWith("machines.order.events: no creating event");
  }

  @Test
  void machine_withoutEvents_errorNamesPath() {
    assertRejected(variant("machines:\n", """
        machines:
          empty:
            states: [a]
            events: {}
        """)).hasMessage("machines.empty.events: a machine needs at least one event");
  }

  @Test
  void duplicateState_errorNamesPathWithIndex() {
    assertRejected(variant("[created, paid, to_ship, shipped", "[created, paid, to_ship, paid, shipped"))
        .hasMessage("machines.order.states[3]: duplicate state 'paid'");
  }

  // ------------------------------------------------------------------------- routes

  @Test
  void duplicateRouteName_errorNamesPath() {
    assertRejected(REFERENCE + """
          - name: fulfilment
            topics: [orders-2]
            business-key: [/id]
            target: 127.0.0.1:7001
        """).hasMessage("routes[1].name: duplicate route name 'fulfilment'");
  }

  @Test
  void routeReferencingUnknownMachine_errorNamesPath() {
    assertRejected(variant("machine: order", "machine: orders")).hasMessageStartingWith("routes[0].machine: unknown machine 'orders'");
  }

  @Test
  void pushRouteWithoutTarget_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "")).hasMessageStartingWith("routes[0].target: required in push mode");
  }

  @Test
  void target_notHostPort_errorNamesPath() {
    assertRejected(variant("target: 127.0.0.1:7000", "target: business")).hasMessage("routes[0].target: 'business' is not host:port (port 1 to 65535), e.g. 127.0.0.1:7000");
  }

  @Test
  void escalationTopicEqualToSourceTopic_errorNamesPath() {
    assertRejected(variant("    target: 127.0.0.1:7000\n", "    target: 127.0.0.1:7000\n    escalation-topic: orders\n"))
        .hasMessage("routes[0].escalation-topic: 'orders' is also a source topic of this route");
  }

  @Test
  void topic_invalidName_errorNamesPathWithIndex() {
    assertRejected(variant("topics: [orders]", "topics: [orders, 'bad topic']"))
        .hasMessageStartingWith("routes[0].topics[1]: 'bad topic' is not a valid Kafka topic name");
  }

  @Test
  void constantEvent_notAnEventOfTheMachine_errorNamesPath() {
    assertRejected(variant("event: header:event-type", "event: const:refund"))
        .hasMessageStartingWith("routes[0].event: constant event 'refund' is not an event of machine 'order'");
  }

  // ------------------------------------------------------------------------- ${ENV} expansion

  @Test
  void envReference_isExpanded() {
    assertThat(parse(REFERENCE).mysql().password()).isEqualTo("s3cret");
  }

  @Test
  void envReferenceWithDefault_unsetVariable_usesDefault() {
    SidecarConfig c = parse(variant("host: mysql.internal", "host: ${MYSQL_HOST:-db.local}"));

    assertThat(c.mysql().host()).isEqualTo("db.local");
  }

  @Test
  void envReferenceWithDefault_setVariable_usesVariable() {
    SidecarConfig c = new ConfigReader(Map.of("DB_PASSWORD", "p", "MYSQL_HOST", "db-7.prod"))
        .parse(variant("host: mysql.internal", "host: ${MYSQL_HOST:-db.local}"), "test.yaml");

    assertThat(c.mysql().host()).isEqualTo("db-7.prod");
  }

  @Test
  void envReference_insideLongerTextAndLists_isExpanded() {
    SidecarConfig c = new ConfigReader(Map.of("DB_PASSWORD", "p", "KAFKA", "k1", "ENV", "prod"))
        .parse(variant("bootstrap-servers: kafka-1:9092,kafka-2:9092", "bootstrap-servers: ${KAFKA}:9092,${KAFKA2:-k2}:9092")
            .replace("topics: [orders]", "topics: ['orders-${ENV}']"), "test.yaml");

    assertThat(c.kafka().bootstrapServers()).isEqualTo("k1:9092,k2:9092");
    assertThat(c.routes().get(0).intake().topics()).containsExactly("orders-prod");
    assertThat(c.routes().get(0).outputs().escalationTopic()).isEqualTo("orders-prod.escalate");
  }

  @Test
  void envReferenceWithEmptyDefault_expandsToEmpty() {
    SidecarConfig c = new ConfigReader(Map.of()).parse(variant("${DB_PASSWORD}", "${DB_PASSWORD:-}"), "test.yaml");

    assertThat(c.mysql().password()).isEmpty();
  }

  @Test
  void envReference_unsetWithoutDefault_errorNamesPathAndVariable() {
    assertThatThrownBy(() -> new ConfigReader(Map.of()).parse(REFERENCE, "test.yaml"))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("mysql.password: environment variable DB_PASSWORD is not set");
  }

  @Test
  void envReference_unsetInBusinessKey_errorNamesPath() {
    assertRejected(variant("/warehouse_id, /batch_no]", "'${WH_FIELD}', /batch_no]"))
        .hasMessageStartingWith("routes[0].business-key[2]: environment variable WH_FIELD is not set");
  }

  @Test
  void envReference_unsetInTopicList_errorNamesPathWithIndex() {
    assertRejected(variant("topics: [orders]", "topics: [orders, 'orders-${REGION}']"))
        .hasMessageStartingWith("routes[0].topics[1]: environment variable REGION is not set");
  }

  // ------------------------------------------------------------------------- document level

  @Test
  void notYaml_errorNamesTheSource() {
    assertThatThrownBy(() -> parse("kafka: [unclosed"))
        .isInstanceOf(ConfigException.class)
        .hasMessageStartingWith("test.yaml: not valid YAML");
  }

  @Test
  void notAMapping_errorNamesTheSource() {
    assertThatThrownBy(() -> parse("- just\n- a list\n"))
        .isInstanceOf(ConfigException.class)
        .hasMessage("test.yaml: the configuration must be a YAML mapping");
  }

  @Test
  void parsedConfig_isImmutable() {
    SidecarConfig c = parse(REFERENCE);

    assertThatThrownBy(() -> c.routes().add(c.routes().get(0))).isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> c.machines().clear()).isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> c.machines().get("order").events().clear()).isInstanceOf(UnsupportedOperationException.class);
  }
  // ------------------------------------------------------------------------- tracing and log format

  @Test
  void tracingAndLogFormat_absent_offAndText() {
    SidecarConfig c = parse(REFERENCE);
    assertThat(c.tracing().enabled()).isFalse();
    assertThat(c.tracing().sampleRatio()).isEqualTo(1.0);
    assertThat(c.logFormat()).isEqualTo("text");
  }

  @Test
  void tracingSection_endpointAndRatio_kept() {
    SidecarConfig c = parse(variant("sidecar:\n  instance-id: og-test-1\n",
        "sidecar:\n  instance-id: og-test-1\n  log-format: json\ntracing:\n  otlp-endpoint: http://collector:4318\n  sample-ratio: 0.25\n"));
    assertThat(c.tracing()).isEqualTo(new TracingConfig("http://collector:4318", 0.25));
    assertThat(c.logFormat()).isEqualTo("json");
  }

  @Test
  void environment_otelEndpointAndLogFormat_areTheDefaults_theFileWins() {
    Map<String, String> env = Map.of("DB_PASSWORD", "x", TracingSettings.OTLP_ENDPOINT_ENV, "https://otel.example:4318",
        SidecarSettings.LOG_FORMAT_ENV, "json");
    SidecarConfig c = new ConfigReader(env).parse(REFERENCE, "test.yaml");
    assertThat(c.tracing().otlpEndpoint()).isEqualTo("https://otel.example:4318");
    assertThat(c.logFormat()).isEqualTo("json");

    SidecarConfig file = new ConfigReader(env).parse(variant("sidecar:\n  instance-id: og-test-1\n",
        "sidecar:\n  instance-id: og-test-1\n  log-format: text\n"), "test.yaml");
    assertThat(file.logFormat()).isEqualTo("text");
  }

  @Test
  void tracingAndLogFormat_badValues_allReportedWithTheirPaths() {
    ConfigException e = rejected(variant("sidecar:\n  instance-id: og-test-1\n",
        "sidecar:\n  instance-id: og-test-1\n  log-format: jsn\ntracing:\n  otlp-endpoint: collector:4317\n  sample-ratio: 1.5\n"
            + "  sampel-ratio: 1\n"));
    assertThat(e.problems()).containsExactly(
        "sidecar.log-format: 'jsn' is not one of text, json (did you mean 'json'?)",
        "tracing.otlp-endpoint: 'collector:4317' is not an http:// or https:// URL (OTLP over HTTP, http/protobuf), e.g. http://otel-collector:4318",
        "tracing.sample-ratio: 1.5 is out of range [0, 1]",
        "tracing.sampel-ratio: unknown setting (did you mean 'sample-ratio'?)");
  }

  @Test
  void logFormatFromTheEnvironment_badValue_errorNamesTheVariable() {
    assertThatThrownBy(() -> new ConfigReader(Map.of("DB_PASSWORD", "x", SidecarSettings.LOG_FORMAT_ENV, "xml")).parse(REFERENCE, "test.yaml"))
        .isInstanceOfSatisfying(ConfigException.class, e -> assertThat(e.problems()).containsExactly(
            "sidecar.log-format: 'xml' (from ONCEGUARD_LOG_FORMAT) is not one of text, json"));
  }
}
