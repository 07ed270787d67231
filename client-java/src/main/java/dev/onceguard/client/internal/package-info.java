/**
 * Implementation of the OnceGuard Java client. Not API: types here are public only so that
 * {@code dev.onceguard.client} can use them, and may change without notice.
 */
package dev.onceguard.client.internal;
