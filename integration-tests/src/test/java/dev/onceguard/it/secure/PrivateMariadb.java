package dev.onceguard.it.secure;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A private MariaDB server for one test class: its own data directory (under the given temp
 * folder), port and socket, TLS from the given certificate files and
 * {@code require_secure_transport}, so that only encrypted connections get in. The machine's
 * shared MariaDB is not touched. A user {@code og}@{@code 127.0.0.1} with {@code password}
 * holds every privilege. {@link #close()} stops the server.
 */
public final class PrivateMariadb implements AutoCloseable {
  public final int port;
  private final Path dir;
  private final Process process;

  public PrivateMariadb(Path dir, Path ca, Path cert, Path key, String password) throws Exception {
    this.dir = dir;
    Path data = dir.resolve("data");
    Tools.run(dir, "mariadb-install-db", "--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=socket",
        "--skip-test-db", "--user=" + System.getProperty("user.name"));
    this.port = dev.onceguard.it.RecordingBusiness.freePort();
    List<String> cmd = new ArrayList<>(List.of("/usr/sbin/mariadbd", "--no-defaults", "--datadir=" + data,
        "--port=" + port, "--bind-address=127.0.0.1", "--socket=" + socket(), "--pid-file=" + dir.resolve("mariadbd.pid"),
        "--skip-log-bin", "--innodb-buffer-pool-size=16M", "--performance-schema=OFF", "--skip-name-resolve",
        "--ssl-ca=" + ca, "--ssl-cert=" + cert, "--ssl-key=" + key, "--require-secure-transport=ON",
        "--log-error=" + dir.resolve("mariadbd.err")));
    if (System.getProperty("user.name").equals("root")) {
      cmd.add(2, "--user=root"); // mariadbd refuses to run as root without being told to
    }
    this.process = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(dir.resolve("mariadbd.out").toFile()).start();
    try {
      Tools.awaitPort(port, process, dir.resolve("mariadbd.err"), 60);
      Path sql = dir.resolve("init.sql");
      Files.writeString(sql, "CREATE USER 'og'@'127.0.0.1' IDENTIFIED BY '" + password.replace("'", "''") + "';\n"
          + "GRANT ALL ON *.* TO 'og'@'127.0.0.1';\n");
      Tools.run(dir, "sh", "-c", "mysql --no-defaults -uroot -S '" + socket() + "' < '" + sql + "'");
      Files.delete(sql);
    } catch (Exception | AssertionError e) {
      close();
      throw e;
    }
  }

  private Path socket() {
    return dir.resolve("mariadbd.sock");
  }

  /** Rows of {@code sql} (tab-separated columns, one row a line), run as root over the server's socket. */
  public String query(String sql) throws Exception {
    Path out = dir.resolve("query.out");
    Tools.run(dir, "sh", "-c", "mysql --no-defaults -uroot -S '" + socket() + "' -N -B -e \"" + sql.replace("\"", "\\\"") + "\" > '" + out + "'");
    return Files.readString(out);
  }

  @Override
  public void close() {
    Tools.stop(process, 30);
  }
}
