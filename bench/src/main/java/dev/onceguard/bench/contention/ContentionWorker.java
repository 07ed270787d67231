package dev.onceguard.bench.contention;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;

/**
 * One instance of the contention bench, in its own JVM: reads orders from stdin and answers on
 * stdout, one line each.
 *
 * <pre>
 * cell {Order as JSON}   → ready            (connections made, guard built)
 * go                     → result {Samples}  (warm-up, then the measured window)
 * quit                   (exits)
 * </pre>
 *
 * Logs go to stderr, so stdout carries nothing but answers. A failure prints {@code error …} and
 * exits non-zero.
 */
public final class ContentionWorker {
  private ContentionWorker() {}

  public static void main(String[] args) throws Exception {
    PrintStream answers = System.out;
    System.setOut(System.err); // before logback starts: its console appender writes to System.out
    System.setProperty("ONCEGUARD_LOG_LEVEL", System.getProperty("ONCEGUARD_LOG_LEVEL", "WARN"));
    ObjectMapper json = new ObjectMapper();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try {
      String line;
      while ((line = in.readLine()) != null && !line.equals("quit")) {
        if (!line.startsWith("cell ")) {
          throw new IllegalArgumentException("expected a cell order, got: " + line);
        }
        Order o = json.readValue(line.substring("cell ".length()), Order.class);
        try (Transitions t = prepare(o)) {
          answers.println("ready");
          answers.flush();
          String go = in.readLine();
          if (!"go".equals(go)) {
            throw new IllegalArgumentException("expected go, got: " + go);
          }
          long start = System.nanoTime();
          long measureStart = start + o.warmupMs() * 1_000_000L;
          Samples s = t.run(new Recorder(measureStart, measureStart + o.measureMs() * 1_000_000L));
          answers.println("result " + json.writeValueAsString(s));
          answers.flush();
        }
      }
    } catch (Exception e) {
      e.printStackTrace();
      answers.println("error " + e.toString().replace('\n', ' '));
      answers.flush();
      System.exit(1);
    }
  }

  private static Transitions prepare(Order o) throws Exception {
    ClaimSide.Target t = o.target();
    if (o.variant() == Variant.FOR_UPDATE) {
      Connection c = DriverManager.getConnection("jdbc:mariadb://" + t.host() + ":" + t.port() + "/" + t.database(), t.user(),
          t.password());
      return new ForUpdateLoop(c, o.entities(), o.holdMs());
    }
    Duration retry = o.earlyArrivalRetryMs() > 0 ? Duration.ofMillis(o.earlyArrivalRetryMs()) : null;
    return new ClaimLoop(new ClaimSide(t, "instance-" + o.instance(), retry), o.instance(), o.cell(), o.entities(), o.holdMs());
  }
}
