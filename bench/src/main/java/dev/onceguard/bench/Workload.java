package dev.onceguard.bench;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The records of one run: each a creating event of its own order ({@code /id}), about 250 bytes
 * of JSON. The backlog can be sent again (the replay scenario); paced records are always new.
 */
final class Workload {
  private final String runId = UUID.randomUUID().toString().substring(0, 8);
  private final int backlogSize;
  private int next;

  private Workload(int backlogSize) {
    this.backlogSize = backlogSize;
  }

  static Workload fresh(int backlog) {
    return new Workload(backlog);
  }

  List<byte[][]> backlog() {
    List<byte[][]> out = new ArrayList<>(backlogSize);
    for (int i = 0; i < backlogSize; i++) {
      out.add(record(i));
    }
    next = Math.max(next, backlogSize);
    return out;
  }

  List<byte[][]> paced(int n) {
    List<byte[][]> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(record(next++));
    }
    return out;
  }

  /** {key, value}. */
  private byte[][] record(int i) {
    String id = "o-" + runId + "-" + i;
    String json = "{\"id\":\"" + id + "\",\"event\":\"create\",\"sku_id\":\"sku-" + (i % 97) + "\",\"warehouse_id\":\"w-" + (i % 5)
        + "\",\"batch_no\":" + (i % 13) + ",\"amount\":\"" + (i % 1000) + ".50\",\"note\":\""
        + "x".repeat(120) + "\"}";
    return new byte[][] {id.getBytes(StandardCharsets.UTF_8), json.getBytes(StandardCharsets.UTF_8)};
  }
}
