package dev.onceguard.proxy.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Properties;
import org.junit.jupiter.api.Test;

class BuildInfoTest {

  private static Properties props(String... kv) {
    Properties p = new Properties();
    for (int i = 0; i < kv.length; i += 2) {
      p.setProperty(kv[i], kv[i + 1]);
    }
    return p;
  }

  @Test
  void of_filledIn_givesVersionAndCommit_markedDirtyWithUncommittedChanges() {
    assertThat(BuildInfo.of(props("version", "1.2.0", "commit", "0123456789ab", "dirty", "false")))
        .isEqualTo(new BuildInfo("1.2.0", "0123456789ab"));
    assertThat(BuildInfo.of(props("version", "1.2.0", "commit", "0123456789ab", "dirty", "true")).commit())
        .isEqualTo("0123456789ab-dirty");
    assertThat(new BuildInfo("1.2.0", "0123456789ab").text()).isEqualTo("onceguard 1.2.0 (commit 0123456789ab)");
  }

  @Test
  void of_placeholdersMavenCouldNotFill_readUnknown() {
    BuildInfo b = BuildInfo.of(props("version", "0.1.0", "commit", "${git.commit.id.abbrev}", "dirty", "${git.dirty}"));
    assertThat(b).isEqualTo(new BuildInfo("0.1.0", BuildInfo.UNKNOWN));
    assertThat(BuildInfo.of(new Properties())).isEqualTo(new BuildInfo(BuildInfo.UNKNOWN, BuildInfo.UNKNOWN));
  }

  @Test
  void current_isTheBuiltResource_withTheProjectVersionAndAGitCommit() {
    BuildInfo b = BuildInfo.current();
    // filled in by this build: the pom's version and the checkout's commit (tests run from a git checkout)
    assertThat(b.version()).matches("\\d+\\.\\d+\\.\\d+(-SNAPSHOT)?");
    assertThat(b.commit()).matches("[0-9a-f]{12}(-dirty)?");
  }
}
