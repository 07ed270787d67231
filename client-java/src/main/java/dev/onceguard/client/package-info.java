/**
 * Java client for the OnceGuard sidecar.
 *
 * <ul>
 *   <li>{@link dev.onceguard.client.OnceGuardConsumer}: a drop-in
 *       {@link org.apache.kafka.clients.consumer.Consumer} backed by the sidecar's pull stream
 *       ({@code Deliveries.Subscribe}); code that calls {@code poll()} and {@code commitSync()}
 *       keeps working when only the constructor line changes.
 *   <li>{@link dev.onceguard.client.MessageHandlerAdapter}: serves the push-mode
 *       {@code MessageHandler} service from a {@link dev.onceguard.client.RecordHandler} that
 *       takes a {@link org.apache.kafka.clients.consumer.ConsumerRecord}.
 *   <li>{@link dev.onceguard.client.GuardClient}: the synchronous {@code Guard} API
 *       (submit, complete, explain) with Java types.
 * </ul>
 *
 * <p>Everything in {@code dev.onceguard.client.internal} is implementation, not API, and may
 * change without notice.
 */
package dev.onceguard.client;
