package dev.onceguard.proxy.api;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** Records what a service sent on a stream or answered to a unary call. Thread-safe. */
class RecordingObserver<T> implements StreamObserver<T> {
  final List<T> values = new CopyOnWriteArrayList<>();
  volatile Throwable error;
  volatile boolean completed;

  @Override
  public void onNext(T v) {
    values.add(v);
  }

  @Override
  public void onError(Throwable t) {
    error = t;
  }

  @Override
  public void onCompleted() {
    completed = true;
  }

  /** {@code OK} unless the call ended with an error. */
  Status status() {
    return error == null ? Status.OK : Status.fromThrowable(error);
  }

  /** The single answer of a unary call that succeeded. */
  T value() {
    assertThat(error).isNull();
    assertThat(completed).isTrue();
    return values.get(0);
  }
}
