package dev.onceguard.proxy.guard;

import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A serial context without a thread of its own (like grpc-java's {@code SynchronizationContext}):
 * tasks run one at a time, in the order they were submitted, on the thread that submits them or
 * on the thread already running the context's tasks. State touched only by its tasks needs no
 * lock and no volatile: each task sees everything the tasks before it wrote.
 *
 * <p>A task submitted from inside a task runs after that task ends, not nested in it. A task that
 * throws is handed to {@code onFailure} (run inside the context) and the following tasks still
 * run. Tasks must not block: whoever submits may be made to run other tasks first.
 *
 * <p>Thread-safe: {@link #execute} may be called from any thread and returns once the queue is
 * drained or another thread is draining it.
 */
final class SerialExecutor implements Executor {
  private static final Logger log = LoggerFactory.getLogger(SerialExecutor.class);

  private final Queue<Runnable> tasks = new ConcurrentLinkedQueue<>();
  /** The thread running the context's tasks; null when none does. */
  private final AtomicReference<Thread> drainer = new AtomicReference<>();
  private final Consumer<Throwable> onFailure;

  /** @param onFailure told, inside the context, of a task that threw; must not throw */
  SerialExecutor(Consumer<Throwable> onFailure) {
    this.onFailure = Objects.requireNonNull(onFailure, "onFailure");
  }

  @Override
  public void execute(Runnable task) {
    tasks.add(Objects.requireNonNull(task, "task"));
    drain();
  }

  /** True on the thread that runs the context's tasks right now. */
  boolean inContext() {
    return drainer.get() == Thread.currentThread();
  }

  private void drain() {
    // a task queued by another thread just after this one's last poll, and before it let go, is
    // run by whichever thread takes the context next: the loop takes it again if nobody did
    do {
      if (!drainer.compareAndSet(null, Thread.currentThread())) {
        return;
      }
      try {
        Runnable r;
        while ((r = tasks.poll()) != null) {
          try {
            r.run();
          } catch (Throwable t) {
            try {
              onFailure.accept(t);
            } catch (Throwable t2) {
              t2.addSuppressed(t);
              log.error("a task failed and so did its failure handler", t2);
            }
          }
        }
      } finally {
        drainer.set(null);
      }
    } while (!tasks.isEmpty());
  }
}
