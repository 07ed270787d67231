package dev.onceguard.it.scenario;

import dev.onceguard.it.ItEnv;
import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.store.Db;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The test's own MySQL connection (a small pool on the stack's default database, never on a
 * scenario database, so that killing a scenario database's connections never kills it). Blocking;
 * tables of a scenario database are named with the database, {@code og_it_x.og_entity}.
 */
final class Mysql implements AutoCloseable {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);
  private final Db db;

  Mysql() {
    this(ItEnv.mysqlHost(), ItEnv.mysqlPort());
  }

  /** Another server with the stack's credentials (a node of the local Galera cluster, say). */
  Mysql(String host, int port) {
    this.db = new Db(new MysqlConfig(host, port, ItEnv.mysqlDatabase(), ItEnv.mysqlUser(),
        ItEnv.mysqlPassword(), "og_", 2, false, Duration.ofDays(1)));
  }

  /** Every row, each as its column values in order. */
  List<List<Object>> rows(String sql, Object... args) {
    return db.select(sql, args);
  }

  void exec(String sql, Object... args) {
    db.execute(sql, args);
  }

  @Override
  public void close() {
    db.close();
  }
}
