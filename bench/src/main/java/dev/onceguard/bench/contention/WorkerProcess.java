package dev.onceguard.bench.contention;

import dev.onceguard.bench.seed.BenchArgs;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One {@link ContentionWorker} JVM, started and owned by the orchestrator: orders go to its stdin,
 * its answers come back one line at a time; its stderr (logs) is passed through.
 */
final class WorkerProcess implements AutoCloseable {
  private static final String EOF = "\u0000eof";

  private final int index;
  private final Process process;
  private final Writer stdin;
  private final BlockingQueue<String> answers = new LinkedBlockingQueue<>();

  private WorkerProcess(int index, Process process) {
    this.index = index;
    this.process = process;
    this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
    Thread reader = new Thread(this::readAnswers, "contention-worker-" + index + "-out");
    reader.setDaemon(true);
    reader.start();
  }

  /** Starts a worker JVM on this JVM's class path; it boots while the caller goes on. */
  static WorkerProcess start(int index) throws IOException {
    List<String> cmd = List.of(BenchArgs.javaBin(), "-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
        ContentionWorker.class.getName());
    return new WorkerProcess(index, new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start());
  }

  private void readAnswers() {
    try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        answers.add(line);
      }
    } catch (IOException e) {
      System.err.println("[contention] reading worker " + index + ": " + e);
    }
    answers.add(EOF);
  }

  void send(String line) throws IOException {
    stdin.write(line);
    stdin.write('\n');
    stdin.flush();
  }

  /** The next answer, which must start with {@code word}; what follows the word is returned. */
  String await(String word, long timeoutMs) throws InterruptedException {
    String line = answers.poll(timeoutMs, TimeUnit.MILLISECONDS);
    if (line == null) {
      throw new IllegalStateException("worker " + index + " did not answer " + word + " within " + timeoutMs + " ms");
    }
    if (line.equals(EOF)) {
      throw new IllegalStateException("worker " + index + " exited while " + word + " was awaited");
    }
    if (!line.equals(word) && !line.startsWith(word + " ")) {
      throw new IllegalStateException("worker " + index + " answered '" + abbreviate(line) + "' instead of " + word);
    }
    return line.substring(word.length()).trim();
  }

  private static String abbreviate(String s) {
    return s.length() > 300 ? s.substring(0, 300) + "…" : s;
  }

  /** Asks the worker to quit, then ends it if it does not. */
  @Override
  public void close() {
    try {
      send("quit");
      stdin.close();
    } catch (IOException ignored) {
      // it is gone already
    }
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroy();
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
          process.destroyForcibly();
        }
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }
}
