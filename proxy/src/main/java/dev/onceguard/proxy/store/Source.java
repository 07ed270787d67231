package dev.onceguard.proxy.store;

/**
 * Identifies where a claimed event came from, so that a redelivery of the same source (after a
 * crash or rebalance) is told apart from a duplicate sent by somebody else. For Kafka it is the
 * record's coordinates; for the Guard API a request id ({@code topic = "@api:<id>"}).
 */
public record Source(String topic, int partition, long offset) {
  public static Source api(String requestId) {
    String t = "@api:" + requestId;
    return new Source(t.length() > 240 ? t.substring(0, 240) : t, -1, -1L);
  }

  @Override
  public String toString() {
    return topic + "/" + partition + "@" + offset;
  }
}
