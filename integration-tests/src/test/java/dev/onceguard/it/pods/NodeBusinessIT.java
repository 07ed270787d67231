package dev.onceguard.it.pods;

import org.junit.jupiter.api.Test;

/**
 * The Node.js example business container ({@code examples/node-business}, push mode) behind a real
 * sidecar: the checks of {@link BusinessPodScenario}. Without {@code node} and {@code npm} it fails
 * under {@code make test} and in CI ({@code CI=true}), and is skipped elsewhere.
 */
class NodeBusinessIT {
  @Test
  void nodeBusiness_receivesEveryLegitimateRecordOnce_andTheRestIsEscalatedOrIgnored() throws Exception {
    BusinessPodScenario.run(BusinessPod.node());
  }
}
