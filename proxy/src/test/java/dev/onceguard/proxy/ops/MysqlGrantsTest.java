package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class MysqlGrantsTest {
  private static final Set<String> ALL_NEEDED = MysqlGrants.needed(true);

  @Test
  void needed_createAndAlterOnlyWhenTheSidecarMigrates() {
    assertThat(MysqlGrants.needed(true)).containsExactly("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER");
    assertThat(MysqlGrants.needed(false)).containsExactly("SELECT", "INSERT", "UPDATE", "DELETE");
  }

  @Test
  void allPrivilegesOnEverything_coversTheDatabase() {
    assertThat(MysqlGrants.missing(List.of(
        "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED VIA unix_socket WITH GRANT OPTION"), "onceguard", ALL_NEEDED))
        .isEmpty();
  }

  @Test
  void databaseLevelGrant_listsWhatIsHeld_andWhatIsMissing() {
    List<String> grants = List.of(
        "GRANT USAGE ON *.* TO `og`@`%` IDENTIFIED BY PASSWORD '*ABC'",
        "GRANT SELECT, INSERT, UPDATE ON `onceguard`.* TO `og`@`%`");

    assertThat(MysqlGrants.missing(grants, "onceguard", ALL_NEEDED)).containsExactly("DELETE", "CREATE", "ALTER");
    assertThat(MysqlGrants.missing(grants, "other", ALL_NEEDED)).containsExactlyElementsOf(ALL_NEEDED);
  }

  @Test
  void wildcardDatabasePattern_matchesWithEscapedUnderscoreLiteral() {
    List<String> grants = List.of("GRANT ALL PRIVILEGES ON `og\\_%`.* TO `og`@`%`");

    assertThat(MysqlGrants.missing(grants, "og_prod", ALL_NEEDED)).isEmpty();
    assertThat(MysqlGrants.missing(grants, "ogXprod", ALL_NEEDED)).as("an escaped _ is a literal underscore")
        .containsExactlyElementsOf(ALL_NEEDED);
  }

  @Test
  void tableAndColumnLevelGrants_doNotCount() {
    List<String> grants = List.of(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON `onceguard`.`og_ledger` TO `og`@`%`",
        "GRANT SELECT (id), INSERT ON `onceguard`.* TO `og`@`%`");

    assertThat(MysqlGrants.missing(grants, "onceguard", MysqlGrants.needed(false))).containsExactly("SELECT", "UPDATE", "DELETE");
  }
}
