package dev.onceguard.proxy.config;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlTls;
import dev.onceguard.proxy.config.SidecarConfig.SslMode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collections;

/** The {@code mysql} mapping (the ledger, the entities, the verdicts: L2 and L3), declared and read. */
public final class MysqlSettings {
  private MysqlSettings() {}

  static final Section SECTION = Section.of("mysql",
      "MySQL or MariaDB (InnoDB) holding the ledger (L2), the entities (L3) and the verdicts. Required.");
  public static final Setting<String> HOST = SECTION.add(Setting.of("host", SettingType.text("host name"), "127.0.0.1",
      "the server's host"));
  public static final Setting<Integer> PORT = SECTION.add(Setting.of("port", SettingType.whole(1, 65535), 3306, "the server's port"));
  public static final Setting<String> DATABASE = SECTION.add(Setting.required("database", SettingType.IDENTIFIER, "",
      "the database (schema) of OnceGuard's tables"));
  public static final Setting<String> USER = SECTION.add(Setting.of("user", SettingType.STRING, "root", "the user; CREATE and "
      + "ALTER are needed only with `migrate-on-start`"));
  public static final Setting<String> PASSWORD = SECTION.add(Setting.of("password", SettingType.STRING, "",
      "the user's password; write `${NAME}` or `${file:/path}` to keep it out of the file"));
  public static final Setting<String> TABLE_PREFIX = SECTION.add(Setting.of("table-prefix", SettingType.TABLE_PREFIX, "og_",
      "prefix of the tables (`og_entity`, `og_ledger`, `og_decision`, `og_owner`, `og_ledger_id`, `og_schema_version`)"));
  public static final Setting<Integer> POOL_SIZE = SECTION.add(Setting.of("pool-size", SettingType.whole(1, 256), 8,
      "connections, each owned by one worker thread (plus one for the heartbeat); it also sizes the Guard API's admission "
          + "([admission bounds](operations.md#admission-bounds))"));
  public static final Setting<Boolean> MIGRATE_ON_START = SECTION.add(Setting.of("migrate-on-start", SettingType.BOOLEAN, true,
      "apply the versioned schema migration at start (else `onceguard migrate`); without it, a database at an older schema "
          + "version stops the start"));
  public static final Setting<Duration> DECISION_RETENTION = SECTION.add(Setting.of("decision-retention", SettingType.DURATION,
      Duration.ofDays(14), "how long verdicts other than `ACCEPTED` stay in `og_decision` (for `Explain`)"));
  public static final Setting<SslMode> SSL_MODE = SECTION.add(Setting.of("ssl-mode",
      SettingType.oneOf(Arrays.asList(SslMode.values()), SslMode::setting), SslMode.DISABLE,
      "`require`: encrypted, the server not checked; `verify-ca`: its certificate signed by the CA; `verify-full`: and it names "
          + "`mysql.host`. A TLS failure ends start-up naming these settings"));
  public static final Setting<Path> SSL_CA = SECTION.add(Setting.of("ssl-ca", SettingType.CA_FILE, null,
      "the CA that signs the server's certificate, then the only CA trusted; only with `verify-ca` or `verify-full`")
      .shownAs("the JVM's trust store"));
  public static final Setting<String> SSL_KEYSTORE = SECTION.add(Setting.of("ssl-keystore", SettingType.text("path of a PKCS12 file"),
      null, "the client's key and certificate, for users that `REQUIRE X509`"));
  public static final Setting<String> SSL_KEYSTORE_PASSWORD = SECTION.add(Setting.of("ssl-keystore-password", SettingType.STRING,
      null, "the password of `ssl-keystore`"));

  static MysqlConfig read(NodeReader root) {
    NodeReader m = root.section(SECTION, true);
    MysqlConfig mysql = new MysqlConfig(
        m.get(HOST),
        m.get(PORT),
        m.get(DATABASE),
        m.get(USER),
        m.get(PASSWORD),
        m.get(TABLE_PREFIX),
        m.get(POOL_SIZE),
        m.get(MIGRATE_ON_START),
        m.get(DECISION_RETENTION),
        readTls(m));
    m.done();
    return mysql;
  }

  /**
   * {@code mysql.ssl-*}. A CA only means something to a mode that checks the server's certificate:
   * with {@code disable} or {@code require} it would be ignored, which is refused rather than let an
   * operator believe the server is verified.
   */
  private static MysqlTls readTls(NodeReader m) {
    SslMode mode = m.get(SSL_MODE);
    Path ca = m.get(SSL_CA);
    if (ca != null && !mode.verifies()) {
      m.fail(SSL_CA, "is only used with ssl-mode verify-ca or verify-full (ssl-mode is " + mode.setting()
          + ", which does not check the server's certificate)");
    }
    String keystoreText = m.string(SSL_KEYSTORE);
    String keystorePassword = m.string(SSL_KEYSTORE_PASSWORD);
    Path keystore = null;
    if (keystoreText != null && !keystoreText.isBlank()) {
      keystore = Path.of(keystoreText.trim());
      if (mode == SslMode.DISABLE) {
        m.fail(SSL_KEYSTORE, "a client certificate needs TLS: set ssl-mode (require, verify-ca or verify-full)");
      }
      String problem = keystoreProblem(keystore, keystorePassword);
      if (problem != null) {
        m.fail(SSL_KEYSTORE, problem);
      }
    } else if (keystorePassword != null) {
      m.fail(SSL_KEYSTORE_PASSWORD, "is only used with ssl-keystore");
    }
    return new MysqlTls(mode, ca, keystore, keystorePassword);
  }

  /** Why {@code file} is not a PKCS12 key store that opens with {@code password}; {@code null} when it is. */
  private static String keystoreProblem(Path file, String password) {
    try (InputStream in = Files.newInputStream(file)) {
      java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
      ks.load(in, password == null ? new char[0] : password.toCharArray());
      for (String alias : Collections.list(ks.aliases())) {
        if (ks.isKeyEntry(alias)) {
          return null;
        }
      }
      return "key store " + file + " holds no private key (it needs the client's key and certificate)";
    } catch (java.nio.file.NoSuchFileException e) {
      return "key store " + file + " does not exist";
    } catch (IOException | java.security.GeneralSecurityException e) {
      // the message may say "wrong password" (never the password itself)
      return "cannot open PKCS12 key store " + file + " with ssl-keystore-password: " + e.getMessage();
    }
  }
}
