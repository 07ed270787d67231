package dev.onceguard.it.scenario;

import com.sun.tools.attach.VirtualMachine;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * Reads a sidecar process's memory from outside: resident set size from {@code /proc/<pid>/status},
 * the heap in use right after a full collection (the JVM's own {@link MemoryMXBean} over a local
 * JMX agent started through the attach API: {@code gc()}, then heap used), and the number of
 * series its admin {@code /metrics} endpoint exports (a label map that grows shows up there).
 */
final class SidecarMemory implements AutoCloseable {
  /** One reading; heap and series are -1 when they could not be read. */
  record Sample(double rssMb, double heapAfterGcMb, int metricSeries) {}

  private final long pid;
  private final URI metrics;
  private final JMXConnector jmx;
  private final MemoryMXBean memory;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

  SidecarMemory(long pid, String adminHostPort) throws IOException {
    this.pid = pid;
    this.metrics = URI.create("http://" + adminHostPort + "/metrics");
    String address;
    try {
      VirtualMachine vm = VirtualMachine.attach(Long.toString(pid));
      try {
        address = vm.startLocalManagementAgent();
      } finally {
        vm.detach();
      }
    } catch (com.sun.tools.attach.AttachNotSupportedException e) {
      throw new IOException("cannot attach to the sidecar (pid " + pid + ")", e);
    }
    this.jmx = JMXConnectorFactory.connect(new JMXServiceURL(address));
    this.memory = ManagementFactory.newPlatformMXBeanProxy(jmx.getMBeanServerConnection(), ManagementFactory.MEMORY_MXBEAN_NAME,
        MemoryMXBean.class);
  }

  Sample sample() throws InterruptedException {
    double heap;
    try {
      memory.gc();
      heap = memory.getHeapMemoryUsage().getUsed() / 1048576.0;
    } catch (RuntimeException e) {
      heap = -1;
    }
    return new Sample(rssMb(pid), heap, metricSeries());
  }

  /** VmRSS of {@code pid} in MB; -1 if the process is gone. */
  static double rssMb(long pid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
        if (line.startsWith("VmRSS:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0;
        }
      }
    } catch (IOException | NumberFormatException e) {
      // gone
    }
    return -1;
  }

  private int metricSeries() throws InterruptedException {
    try {
      HttpResponse<java.util.stream.Stream<String>> r = http.send(HttpRequest.newBuilder(metrics).timeout(Duration.ofSeconds(5)).build(),
          HttpResponse.BodyHandlers.ofLines());
      return r.statusCode() != 200 ? -1 : (int) r.body().filter(l -> !l.isEmpty() && !l.startsWith("#")).count();
    } catch (IOException e) {
      return -1;
    }
  }

  @Override
  public void close() throws IOException {
    jmx.close();
  }
}
