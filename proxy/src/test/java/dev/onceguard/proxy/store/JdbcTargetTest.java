package dev.onceguard.proxy.store;

import static org.assertj.core.api.Assertions.assertThat;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlTls;
import dev.onceguard.proxy.config.SidecarConfig.SslMode;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import org.junit.jupiter.api.Test;

/** What the driver is given for each {@code mysql.ssl-mode}; the password never in the URL. */
class JdbcTargetTest {
  private static JdbcTarget target(MysqlTls tls) {
    return JdbcTarget.of(new MysqlConfig("db.internal", 3307, "onceguard", "og", "pw-4711", "og_", 2, true, Duration.ofDays(1), tls),
        Duration.ofSeconds(15));
  }

  @Test
  void disable_isPlaintext_andThePasswordIsAPropertyNotInTheUrl() {
    JdbcTarget t = target(MysqlTls.DISABLED);

    assertThat(t.url()).startsWith("jdbc:mariadb://db.internal:3307/onceguard?").doesNotContain("pw-4711").doesNotContain("ssl");
    Properties p = t.properties();
    assertThat(p.getProperty("sslMode")).isEqualTo("disable");
    assertThat(p.getProperty("password")).isEqualTo("pw-4711");
    assertThat(p.getProperty("serverSslCert")).isNull();
  }

  @Test
  void require_encryptsWithoutCheckingTheServer() {
    assertThat(target(new MysqlTls(SslMode.REQUIRE, null)).properties().getProperty("sslMode")).isEqualTo("trust");
  }

  @Test
  void verifyModes_withACa_trustOnlyThatCa() {
    Path ca = Path.of("/etc/onceguard/tls/mysql-ca.pem");
    for (SslMode mode : new SslMode[] {SslMode.VERIFY_CA, SslMode.VERIFY_FULL}) {
      Properties p = target(new MysqlTls(mode, ca)).properties();

      assertThat(p.getProperty("sslMode")).isEqualTo(mode.setting());
      assertThat(p.getProperty("serverSslCert")).isEqualTo(ca.toString());
      assertThat(p.getProperty("fallbackToSystemTrustStore")).isEqualTo("false");
    }
  }

  @Test
  void verifyFull_withoutACa_usesTheJvmTrustStore() {
    Properties p = target(new MysqlTls(SslMode.VERIFY_FULL, null)).properties();

    assertThat(p.getProperty("sslMode")).isEqualTo("verify-full");
    assertThat(p.getProperty("serverSslCert")).isNull();
    assertThat(p.getProperty("fallbackToSystemTrustStore")).isNull();
  }

  @Test
  void certificateRefusals_areConfiguration_butResetsAndCutHandshakesAreOutages() {
    assertThat(JdbcTarget.isCertificateRefusal(new java.security.cert.CertificateException("No subject alternative names matching IP"))).isTrue();
    assertThat(JdbcTarget.isCertificateRefusal(new javax.net.ssl.SSLPeerUnverifiedException("peer not authenticated"))).isTrue();
    assertThat(JdbcTarget.isCertificateRefusal(new java.sql.SQLException("Self signed certificates. Either set sslMode=trust, ..."))).isTrue();
    // the driver's host name check: an SSLException in its own words
    assertThat(JdbcTarget.isCertificateRefusal(new javax.net.ssl.SSLException(
        "DNS host \"localhost\" doesn't correspond to certificate CN \"mysql-server\" and SAN[{IP:\"127.0.0.1\"}]"))).isTrue();
    // a restarting server or proxy: wait for it
    assertThat(JdbcTarget.isCertificateRefusal(new javax.net.ssl.SSLException("Connection reset"))).isFalse();
    assertThat(JdbcTarget.isCertificateRefusal(
        new javax.net.ssl.SSLHandshakeException("Remote host terminated the handshake"))).isFalse();
    assertThat(JdbcTarget.isCertificateRefusal(new java.sql.SQLException("Could not connect to ssl-db.internal:3306"))).isFalse();
  }
}
