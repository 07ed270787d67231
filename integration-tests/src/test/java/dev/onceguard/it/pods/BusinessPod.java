package dev.onceguard.it.pods;

import dev.onceguard.proxy.config.RouteConfig.Mode;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * One of the example business containers under {@code examples/}, as the ITs build and start it:
 * the toolchain it needs, the build step its README gives, and its command line in push or pull
 * mode. All of them write the same JSON lines (those of {@code examples/node-business}), so
 * {@link BusinessPodScenario} checks them all with the same assertions.
 *
 * @param name for messages, e.g. {@code "python (pull)"}
 * @param dir the example's directory in this checkout
 * @param mode push: the pod serves MessageHandler; pull: it subscribes to the sidecar
 * @param executables what must be on the PATH (or an absolute path that must be executable)
 * @param probe a command that must exit 0 with the toolchain in place (e.g. a Python import);
 *     empty for none
 * @param build run in {@code dir} before every start (idempotent, fast once done); empty for none
 * @param run the command line, without the mode's own arguments
 * @param packages what installs the toolchain, for the failure message
 */
record BusinessPod(String name, Path dir, Mode mode, List<String> executables, List<String> probe, List<String> build, List<String> run,
    String packages) {

  /** The Debian Python that has {@code python3-grpcio}: a python3 earlier on the PATH (pyenv) may not. */
  private static final String PYTHON = Files.isExecutable(Path.of("/usr/bin/python3")) ? "/usr/bin/python3" : "python3";

  static BusinessPod node() {
    return new BusinessPod("node (push)", example("node-business", "server.js"), Mode.PUSH, List.of("node", "npm"), List.of(),
        List.of("npm", "ci", "--no-audit", "--no-fund"), List.of("node", "server.js"), "nodejs npm");
  }

  static BusinessPod python(Mode mode) {
    return new BusinessPod("python (" + mode.name().toLowerCase() + ")", example("python-business", "business.py"), mode,
        List.of(PYTHON, "protoc", "grpc_python_plugin"), List.of(PYTHON, "-c", "import grpc, google.protobuf"),
        List.of("sh", "generate.sh"), List.of(PYTHON, "business.py", mode.name().toLowerCase()),
        "python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc");
  }

  /**
   * The Python example as an idempotent HTTP endpoint on the Guard API ({@code business.py http}):
   * binds a free port and prints it like push mode, and calls the sidecar like pull mode.
   */
  static BusinessPod pythonHttp() {
    BusinessPod push = python(Mode.PUSH);
    return new BusinessPod("python (http)", push.dir(), Mode.PUSH, push.executables(), push.probe(), push.build(),
        List.of(PYTHON, "business.py", "http"), push.packages());
  }

  static BusinessPod go(Mode mode) {
    return new BusinessPod("go (" + mode.name().toLowerCase() + ")", example("go-business", "main.go"), mode,
        List.of("go", "protoc", "protoc-gen-go", "protoc-gen-go-grpc"), List.of("test", "-f",
        "/usr/share/gocode/src/github.com/golang/protobuf/proto/registry.go", "-a", "-d", "/usr/share/gocode/src/google.golang.org/grpc"),
        List.of("sh", "build.sh"), List.of("build/go-business", mode.name().toLowerCase()),
        "golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev"
            + " golang-github-golang-protobuf-1-5-dev");
  }

  /**
   * The command line: push binds a free port and prints it, pull subscribes to {@code sidecar}; the
   * HTTP endpoint binds a free port and calls {@code sidecar}.
   */
  List<String> command(Path out, String sidecar, String route) {
    List<String> cmd = new ArrayList<>(run);
    if (mode == Mode.PUSH) {
      cmd.addAll(List.of("--port", "0", "--out", out.toString()));
      if (run.get(run.size() - 1).equals("http")) {
        cmd.addAll(List.of("--sidecar", sidecar, "--route", route));
      }
    } else {
      cmd.addAll(List.of("--sidecar", sidecar, "--route", route, "--out", out.toString(), "--subscriber", "it-" + name));
    }
    return cmd;
  }

  /**
   * When the toolchain is missing: fails under {@code make test}, which sets
   * {@code ONCEGUARD_REQUIRE_TOOLCHAINS=true} (its {@code scripts/stack.sh up} installs the packages),
   * and in CI ({@code CI=true}, as GitHub Actions and GitLab set it); skips elsewhere (a bare
   * {@code mvn verify}), naming what is missing and the packages that bring it.
   */
  void requireToolchain() throws IOException, InterruptedException {
    List<String> missing = new ArrayList<>();
    for (String e : executables) {
      if (!executable(e)) {
        missing.add(e);
      }
    }
    if (missing.isEmpty() && !probe.isEmpty() && runQuietly(probe, Path.of(""), 30).exitCode() != 0) {
      missing.add("`" + String.join(" ", probe) + "` fails");
    }
    if (missing.isEmpty()) {
      return;
    }
    String why = "the " + name + " business example needs " + missing + " (Debian: apt-get install " + packages
        + "; scripts/stack.sh up installs them)";
    if (envTrue("ONCEGUARD_REQUIRE_TOOLCHAINS") || envTrue("CI")) {
      throw new AssertionError(why + " (make test and CI=true require it: the test is not skipped there)");
    }
    Assumptions.abort(why + " (skipped outside make test and CI; there this fails)");
  }

  private static boolean envTrue(String name) {
    String v = System.getenv(name);
    return v != null && "true".equalsIgnoreCase(v.trim());
  }

  /** The example's build step (npm ci, stub generation, go build); fails with its output. */
  void build(int timeoutSeconds) throws IOException, InterruptedException {
    if (build.isEmpty() || (build.get(0).equals("npm") && Files.isDirectory(dir.resolve("node_modules/@grpc/grpc-js"))
        && Files.isDirectory(dir.resolve("node_modules/@grpc/proto-loader")))) {
      return;
    }
    Result r = runQuietly(build, dir, timeoutSeconds);
    if (r.exitCode() != 0) {
      throw new IllegalStateException("`" + String.join(" ", build) + "` in " + dir + " failed (exit " + r.exitCode() + "):\n" + r.output());
    }
  }

  private record Result(int exitCode, String output) {}

  private static Result runQuietly(List<String> cmd, Path dir, int timeoutSeconds) throws IOException, InterruptedException {
    Path log = Files.createTempFile("business-pod", ".log");
    try {
      Process p = new ProcessBuilder(cmd).directory(dir.toAbsolutePath().toFile()).redirectErrorStream(true).redirectOutput(log.toFile())
          .start();
      if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return new Result(-1, "did not finish within " + timeoutSeconds + " s:\n" + Files.readString(log));
      }
      return new Result(p.exitValue(), Files.readString(log));
    } catch (IOException e) {
      return new Result(-1, e.toString()); // e.g. the program does not exist
    } finally {
      Files.deleteIfExists(log);
    }
  }

  private static boolean executable(String command) {
    if (command.contains("/")) {
      return Files.isExecutable(Path.of(command));
    }
    String path = System.getenv("PATH");
    if (path == null) {
      return false;
    }
    for (String d : path.split(File.pathSeparator)) {
      if (Files.isExecutable(Path.of(d, command))) {
        return true;
      }
    }
    return false;
  }

  /** examples/{@code name} of this checkout, found upwards from the working directory. */
  private static Path example(String name, String marker) {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      Path candidate = p.resolve("examples").resolve(name);
      if (Files.isRegularFile(candidate.resolve(marker))) {
        return candidate;
      }
    }
    throw new IllegalStateException("examples/" + name + "/" + marker + " not found above " + Path.of("").toAbsolutePath());
  }
}
