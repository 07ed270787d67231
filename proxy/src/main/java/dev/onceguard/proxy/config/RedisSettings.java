package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.SidecarConfig.RedisConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/** The {@code redis} mapping (L1, the idempotency cache), declared and read. Without a URI, L1 is off. */
public final class RedisSettings {
  private RedisSettings() {}

  static final Section SECTION = Section.of("redis",
      "The L1 idempotency cache. Optional: it changes speed, never correctness; without `uri` L1 is off.");
  public static final Setting<String> URI = SECTION.add(Setting.of("uri", SettingType.text("URI list"), null,
      "`redis://host:port[/db]` (`rediss://` for TLS); with `mode: cluster` one or more seed nodes, comma-separated")
      .shownAs("none (L1 off)"));
  public static final Setting<String> MODE = SECTION.add(Setting.of("mode", SettingType.oneOf(List.of("standalone", "cluster"), m -> m),
      "standalone", "`cluster` for a Redis Cluster: lettuce's cluster client, keys go to their slot's node, topology "
          + "refreshed on changes"));
  public static final Setting<Path> SSL_CA = SECTION.add(Setting.of("ssl-ca", SettingType.CA_FILE, null,
      "the CA of the servers' certificates for `rediss://` URIs (certificate and host name checked)")
      .shownAs("the JVM's trust store"));
  public static final Setting<Duration> TIMEOUT = SECTION.add(Setting.of("timeout", SettingType.DURATION, Duration.ofMillis(200),
      "L1 is skipped, never waited for, past this (a reconnect runs in the background)"));
  public static final Setting<String> KEY_PREFIX = SECTION.add(Setting.of("key-prefix", SettingType.STRING, "og:",
      "prepended to every key this sidecar writes ([L1 keys](operations.md#l1-keys-and-the-ledger-id))"));
  public static final Setting<Duration> BREAKER_OPEN_FOR = SECTION.add(Setting.of("breaker-open-for", SettingType.DURATION,
      Duration.ofSeconds(5), "after a Redis failure, L1 is skipped this long"));

  static RedisConfig read(NodeReader root) {
    NodeReader r = root.section(SECTION, false);
    String uri = r.string(URI);
    boolean cluster = r.get(MODE).equals("cluster");
    if (uri != null) {
      String[] parts = uri.split(",");
      if (parts.length > 1 && !cluster) {
        r.fail(URI, "several URIs are only allowed with mode: cluster (they are its seed nodes)");
      }
      for (String part : parts) {
        String problem = uriProblem(part.trim());
        if (problem != null) {
          r.fail(URI, problem);
        }
      }
    }
    Path ca = r.get(SSL_CA);
    if (ca != null && (uri == null || !uri.trim().startsWith("rediss://"))) {
      r.fail(SSL_CA, "only used with rediss:// URIs (TLS); redis.uri is " + (uri == null ? "not set" : "not rediss://"));
    }
    RedisConfig redis = new RedisConfig(uri, r.get(TIMEOUT), r.get(KEY_PREFIX), r.get(BREAKER_OPEN_FOR), cluster, ca);
    r.done();
    return redis;
  }

  private static String uriProblem(String uri) {
    if (!uri.startsWith("redis://") && !uri.startsWith("rediss://")) {
      return "'" + Secrets.withoutUserInfo(uri) + "' is not a redis:// or rediss:// URI";
    }
    try {
      java.net.URI u = new java.net.URI(uri);
      if (u.getHost() == null || u.getPort() > 65535 || u.getPort() == 0) {
        return "'" + Secrets.withoutUserInfo(uri) + "' has no host, or a port outside 1 to 65535";
      }
      return null;
    } catch (java.net.URISyntaxException e) {
      // the reason quotes the input (with its password): position only
      return "not a valid URI (" + e.getReason().replaceAll(":.*", "") + " at index " + e.getIndex() + ")";
    }
  }
}
