package dev.onceguard.proxy.time;

/**
 * Wall-clock time in milliseconds since the epoch, injected so that leases, TTLs and backoff can
 * be tested without sleeping. Leases are compared across sidecar instances, so production clocks
 * must be NTP-synchronised; leases are tens of seconds, far above normal skew.
 */
@FunctionalInterface
public interface Clock {
  long nowMillis();

  Clock SYSTEM = System::currentTimeMillis;
}
