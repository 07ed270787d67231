package dev.onceguard.proxy.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.SQLNonTransientConnectionException;
import java.sql.SQLSyntaxErrorException;
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
}
