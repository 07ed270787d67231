package dev.onceguard.it.pods;

import dev.onceguard.proxy.config.RouteConfig.Mode;
import org.junit.jupiter.api.Test;

/**
 * The Go example business container ({@code examples/go-business}, built offline by its
 * {@code build.sh} from Debian's Go packages) behind a real sidecar, in push mode and in pull
 * mode: the checks of {@link BusinessPodScenario}. Without the toolchain it fails under
 * {@code make test} (whose {@code scripts/stack.sh up} installs it) and in CI, and is skipped elsewhere.
 */
class GoBusinessIT {
  @Test
  void pushMode_receivesEveryLegitimateRecordOnce_andTheRestIsEscalatedOrIgnored() throws Exception {
    BusinessPodScenario.run(BusinessPod.go(Mode.PUSH));
  }

  @Test
  void pullMode_receivesAndAcksEveryLegitimateRecordOnce_andGetsTheEscalationNotices() throws Exception {
    BusinessPodScenario.run(BusinessPod.go(Mode.PULL));
  }
}
