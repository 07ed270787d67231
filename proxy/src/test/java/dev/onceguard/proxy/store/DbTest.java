package dev.onceguard.proxy.store;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.onceguard.proxy.config.SidecarConfig.MysqlConfig;
import dev.onceguard.proxy.store.StoreUnavailableException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.sql.SQLNonTransientConnectionException;
import java.sql.SQLSyntaxErrorException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class DbTest {
  @Test
  void withCauses_namesTheServersAnswerUnderTheDriversWrapper() {
    SQLSyntaxErrorException server = new SQLSyntaxErrorException("(conn=7) Unknown database 'og_x'", "42000", 1049);
    SQLNonTransientConnectionException wrapper = new SQLNonTransientConnectionException("(conn=7) Initialization command fail", "08000", server);

    assertThat(Db.withCauses(wrapper))
        .isEqualTo("java.sql.SQLNonTransientConnectionException: (conn=7) Initialization command fail;"
            + " caused by java.sql.SQLSyntaxErrorException: (conn=7) Unknown database 'og_x'");
    assertThat(Db.withCauses(server)).isEqualTo("java.sql.SQLSyntaxErrorException: (conn=7) Unknown database 'og_x'");
  }

  /**
   * A server that accepts connections and never answers (a hung MySQL): the pool's one worker
   * waits in the handshake, so the work behind it queues up.
   */
  @Test
  void atItsQueueBound_workFailsAtOnceAsAnOutage_insteadOfPilingUp() throws Exception {
    List<Socket> accepted = new CopyOnWriteArrayList<>();
    try (ServerSocket hung = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      Thread acceptor = new Thread(() -> {
        try {
          while (true) {
            accepted.add(hung.accept());
          }
        } catch (IOException closed) {
          // the test is over
        }
      });
      acceptor.setDaemon(true);
      acceptor.start();
      MysqlConfig cfg = new MysqlConfig("127.0.0.1", hung.getLocalPort(), "og_none", "root", "", "og_", 1, false, Duration.ofDays(1));
      Db db = new Db(cfg);
      try {
        List<CompletableFuture<Integer>> work = new ArrayList<>();
        // one unit runs (its worker waits for the server), the default bound waits behind it
        int fits = 1 + Db.DEFAULT_QUEUE_PER_CONNECTION;
        for (int i = 0; i < fits; i++) {
          work.add(db.autocommit(c -> 1));
        }
        await().atMost(5, TimeUnit.SECONDS).until(() -> !accepted.isEmpty());

        CompletableFuture<Integer> beyond = db.autocommit(c -> 1);

        assertThat(beyond).as("refused at once, not queued").isCompletedExceptionally();
        assertThatThrownBy(beyond::join).cause().isInstanceOf(StoreUnavailableException.class)
            .hasMessageContaining("MySQL store saturated: 256 steps already wait for 1 connection(s)");
        assertThat(work).as("the queued work still waits for its turn").noneMatch(CompletableFuture::isDone);
        assertThat(db.queued()).isEqualTo(Db.DEFAULT_QUEUE_PER_CONNECTION);
        assertThat(db.refused()).isEqualTo(1);
      } finally {
        hung.close(); // new connections are refused and the waiting handshake fails: the queued work fails fast
        for (Socket s : accepted) {
          s.close();
        }
        db.close();
      }
    }
  }
}
