package dev.onceguard.proxy.store;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.config.SidecarConfig.MysqlTls;
import dev.onceguard.proxy.config.SidecarConfig.SslMode;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.SQLNonTransientConnectionException;
import java.time.Duration;
import java.util.Properties;

/**
 * Where and how every connection to MySQL is opened (MariaDB Connector/J): the one place that
 * turns {@code mysql.*} settings into a JDBC URL and driver properties, TLS included. The
 * password and the TLS options travel as properties, never in the URL, so that a URL in a log
 * line or a driver message holds no secret. No {@code toString}: the properties hold the password.
 */
public final class JdbcTarget {
  private final String url;
  private final Properties props;
  private final MysqlTls tls;

  private JdbcTarget(String url, Properties props, MysqlTls tls) {
    this.url = url;
    this.props = props;
    this.tls = tls;
  }

  /**
   * The target of {@code cfg}: its database, TLS mode and CA, and the session settings the store
   * relies on.
   *
   * @param socketTimeout the driver's bound on one wait for the server
   */
  public static JdbcTarget of(MysqlConfig cfg, Duration socketTimeout) {
    // READ COMMITTED: the claim's CAS must not take gap locks, and each statement must see the
    // latest committed row (the classification read after a lost CAS).
    // UTC: leases are computed from the database's NOW(3) through UNIX_TIMESTAMP, which is
    // ambiguous in a session time zone with daylight saving time.
    // The driver sends CREATE DATABASE IF NOT EXISTS on every connect when asked to, and MySQL
    // checks the CREATE privilege even for a database that exists: only a sidecar that migrates
    // (and so holds CREATE anyway) asks for it, so a least-privilege user can run the others.
    String url = "jdbc:mariadb://" + cfg.host() + ":" + cfg.port() + "/" + cfg.database()
        + "?createDatabaseIfNotExist=" + cfg.migrateOnStart() + "&connectTimeout=5000&socketTimeout=" + socketTimeout.toMillis()
        + "&tcpKeepAlive=true&transactionIsolation=READ-COMMITTED"
        + "&sessionVariables=time_zone='+00:00',innodb_lock_wait_timeout=10"
        // a claim or confirm group sends its transaction's statements in one or two round trips
        // (Db.together); every statement is built from constants and the validated table prefix,
        // every value is bound as a parameter
        + "&allowMultiQueries=true";
    Properties props = new Properties();
    props.setProperty("user", cfg.user());
    if (!cfg.password().isEmpty()) {
      props.setProperty("password", cfg.password());
    }
    MysqlTls tls = cfg.tls();
    props.setProperty("sslMode", switch (tls.mode()) {
      case DISABLE -> "disable";
      case REQUIRE -> "trust"; // Connector/J's name for "encrypted, certificate not checked"
      case VERIFY_CA -> "verify-ca";
      case VERIFY_FULL -> "verify-full";
    });
    if (tls.ca() != null) {
      props.setProperty("serverSslCert", tls.ca().toString());
      // mysql.ssl-ca is the only authority: a server certificate that some CA of the JVM's trust
      // store signed must not pass for the configured one's
      props.setProperty("fallbackToSystemTrustStore", "false");
    }
    if (tls.keystore() != null) {
      // the client's certificate, for users that REQUIRE X509
      props.setProperty("keyStore", tls.keystore().toString());
      props.setProperty("keyStoreType", "PKCS12");
      if (tls.keystorePassword() != null) {
        props.setProperty("keyStorePassword", tls.keystorePassword());
      }
    }
    return new JdbcTarget(url, props, tls);
  }

  /** The JDBC URL: no password, no TLS option (for tests). */
  String url() {
    return url;
  }

  /** A copy of the driver properties (for tests). */
  Properties properties() {
    Properties copy = new Properties();
    copy.putAll(props);
    return copy;
  }

  /**
   * A new connection. A TLS failure (handshake, certificate, host name) is thrown as
   * {@link TlsFailure}, its message naming the settings to check: it is a configuration problem,
   * which waiting does not solve.
   */
  public Connection open() throws SQLException {
    try {
      return DriverManager.getConnection(url, props);
    } catch (SQLException e) {
      String hint = tlsHint(e);
      if (hint != null) {
        throw new TlsFailure(hint + ": " + e.getMessage(), e);
      }
      if (tls.mode() == SslMode.DISABLE && e.getErrorCode() == ER_ACCESS_DENIED) {
        // MariaDB answers a plaintext login to a server with require_secure_transport this way.
        // Not a TlsFailure: a wrong password is the likelier cause, and it may be fixed meanwhile.
        SQLException hinted = new SQLNonTransientConnectionException(e.getMessage() + " (mysql.ssl-mode is disable: if the server "
            + "requires TLS (require_secure_transport), set mysql.ssl-mode and mysql.ssl-ca; else check mysql.user and mysql.password)",
            e.getSQLState(), e.getErrorCode());
        hinted.addSuppressed(e); // not the cause: reports show a failure's root cause, which would drop the hint
        throw hinted;
      }
      throw e;
    }
  }

  /** What to check when {@code e} is about TLS; {@code null} when it is not. */
  private String tlsHint(SQLException e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (isCertificateRefusal(t)) {
        return "TLS to MySQL failed (mysql.ssl-mode " + tls.mode().setting() + (tls.ca() == null ? "" : ", mysql.ssl-ca " + tls.ca())
            + (tls.keystore() == null ? "" : ", mysql.ssl-keystore " + tls.keystore())
            + (tls.mode() == SslMode.VERIFY_FULL ? "; verify-full also needs mysql.host to be a name in the server's certificate" : "")
            + ")";
      }
    }
    return null;
  }

  /**
   * A certificate or host name refused, or TLS asked of a server without it: configuration, which
   * waiting does not fix. Not any {@code SSLException}: a connection reset or a handshake cut
   * short while MySQL or a proxy restarts is an outage to wait out, not a reason to exit.
   */
  static boolean isCertificateRefusal(Throwable t) {
    if (t instanceof java.security.cert.CertificateException || t instanceof javax.net.ssl.SSLPeerUnverifiedException) {
      return true; // untrusted chain (PKIX), a name not in the certificate, an expired certificate
    }
    String m = t.getMessage() == null ? "" : t.getMessage().toLowerCase(java.util.Locale.ROOT);
    // the driver's own words, without an exception of those types under them
    return m.contains("self signed certificate") || m.contains("ssl not enabled in the server")
        || m.contains("hostname verification failed") || m.contains("doesn't correspond to certificate");
  }

  private static final int ER_ACCESS_DENIED = 1045;

  /** A connection failed for TLS: a configuration problem, not an outage to wait out at start-up. */
  public static final class TlsFailure extends SQLNonTransientConnectionException {
    private static final long serialVersionUID = 1L;

    TlsFailure(String message, SQLException driver) {
      super(message, driver.getSQLState(), driver.getErrorCode());
      addSuppressed(driver); // not the cause: reports show a failure's root cause, which would drop the settings named here
    }
  }
}
