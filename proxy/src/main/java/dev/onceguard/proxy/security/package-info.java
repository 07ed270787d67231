/**
 * Securing the sidecar's gRPC: TLS credentials that follow certificate rotation, Unix domain
 * sockets, and the bearer token / client certificate check on the Guard and Deliveries services.
 */
package dev.onceguard.proxy.security;
