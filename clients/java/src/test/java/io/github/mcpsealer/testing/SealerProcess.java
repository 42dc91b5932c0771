package io.github.mcpsealer.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * The real sealer binary, started by a test on loopback ports of its own
 * with the embedded default (a generated key file and the embedded ledger
 * in a temporary data directory), stopped and cleaned up by {@link #close()}:
 *
 * <pre>{@code
 * try (SealerProcess sealer = SealerProcess.start("--tenants", tenants.toString())) {
 *   SealerClient c = SealerClient.grpc(sealer.grpcUrl()).build();
 * }
 * }</pre>
 *
 * <p>The binary is {@code SEALER_TEST_SEALER}, else built once with {@code go
 * build ./cmd/sealer} from the repository. When neither works, a test fails
 * under CI (the environment variable {@code CI} set) and is skipped elsewhere.
 */
public final class SealerProcess implements AutoCloseable {
  /** How long the sealer may take to say it listens: generous, for a loaded CI machine. */
  public static final long START_SECONDS = 30;

  private static final ObjectMapper JSON = new ObjectMapper();
  private static Path built;

  private final Process process;
  private final Path dataDir;
  private final List<String> lines; // every line of stderr, added to by the follower thread
  private final String grpc;
  private final String http;
  private final boolean tls;

  private SealerProcess(Process process, Path dataDir, List<String> lines, String grpc, String http, boolean tls) {
    this.process = process;
    this.dataDir = dataDir;
    this.lines = lines;
    this.grpc = grpc;
    this.http = http;
    this.tls = tls;
  }

  /**
   * Starts the sealer: {@code serve} on 127.0.0.1 ports the kernel picks, a
   * fresh data directory, JSON debug logs, no shutdown delay, then the extra
   * flags. Returns once its "listening" log line came (within {@link
   * #START_SECONDS}), else fails with what it printed.
   *
   * @param flags more flags of {@code sealer serve}, as {@code "--tls-cert", path}
   * @return the running sealer
   */
  public static SealerProcess start(String... flags) {
    Path binary = binary();
    Path dataDir;
    try {
      dataDir = Files.createTempDirectory("sealer-data-");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> args = new ArrayList<>(List.of(binary.toString(), "serve",
        "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
        "--data-dir", dataDir.toString(),
        "--log-format", "json", "--log-level", "debug", "--shutdown-delay", "0s"));
    args.addAll(List.of(flags));
    Process p;
    try {
      p = new ProcessBuilder(args).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
    } catch (IOException e) {
      delete(dataDir);
      throw new UncheckedIOException(e);
    }
    List<String> lines = Collections.synchronizedList(new ArrayList<>());
    CompletableFuture<JsonNode> listening = new CompletableFuture<>();
    Thread follower = new Thread(() -> follow(p, lines, listening), "sealer-stderr");
    follower.setDaemon(true);
    follower.start();
    JsonNode line;
    try {
      line = listening.get(START_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException | ExecutionException | TimeoutException e) {
      p.destroyForcibly();
      delete(dataDir);
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      synchronized (lines) {
        throw new AssertionError("the sealer did not listen within " + START_SECONDS + " s:\n" + String.join("\n", lines));
      }
    }
    return new SealerProcess(p, dataDir, lines, line.get("grpc").asText(), line.get("http").asText(), line.path("tls").asBoolean());
  }

  /** Reads the sealer's stderr to its end, completing listening with its "listening" line. */
  private static void follow(Process p, List<String> lines, CompletableFuture<JsonNode> listening) {
    try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
      for (String line; (line = r.readLine()) != null; ) {
        lines.add(line);
        if (!listening.isDone()) {
          JsonNode rec = parse(line);
          if (rec != null && "listening".equals(rec.path("msg").asText())) {
            listening.complete(rec);
          }
        }
      }
    } catch (IOException e) {
      // the process ended
    }
    listening.completeExceptionally(new IllegalStateException("the sealer exited"));
  }

  private static JsonNode parse(String line) {
    try {
      return JSON.readTree(line);
    } catch (IOException e) {
      return null;
    }
  }

  /** The gRPC listener, host:port. */
  public String grpcAddress() {
    return grpc;
  }

  /** The HTTP listener (REST gateway, probes, metrics), host:port. */
  public String httpAddress() {
    return http;
  }

  /** The gRPC target, http:// or https:// as the sealer serves TLS or not. */
  public String grpcUrl() {
    return scheme() + grpc;
  }

  /** The REST gateway's base URL, http:// or https:// as the sealer serves TLS or not. */
  public String restUrl() {
    return scheme() + http;
  }

  private String scheme() {
    return tls ? "https://" : "http://";
  }

  /** Everything the sealer printed on stderr so far. */
  public String logs() {
    synchronized (lines) {
      return String.join("\n", lines);
    }
  }

  /** Stops the sealer and removes its data directory. */
  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    delete(dataDir);
  }

  /**
   * The sealer binary: {@code SEALER_TEST_SEALER}, else one built from this
   * repository with go (once per JVM). Fails under CI, skips elsewhere, when
   * there is neither.
   *
   * @return the path of an executable sealer
   */
  public static synchronized Path binary() {
    String env = System.getenv("SEALER_TEST_SEALER");
    if (env != null && !env.isEmpty()) {
      Path p = Path.of(env);
      if (!Files.isExecutable(p)) {
        missing("SEALER_TEST_SEALER=" + env + " is not an executable");
      }
      return p;
    }
    if (built != null) {
      return built;
    }
    Path root = repositoryRoot();
    Path go = go();
    if (root == null || go == null) {
      missing("no sealer binary (SEALER_TEST_SEALER) and " + (go == null ? "no go" : "no repository") + " to build one");
    }
    try {
      Path dir = Files.createTempDirectory("sealer-bin-");
      Path out = dir.resolve("sealer");
      Process build = new ProcessBuilder(go.toString(), "build", "-o", out.toString(), "./cmd/sealer")
          .directory(root.toFile()).redirectErrorStream(true).start();
      String output = new String(build.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (build.waitFor() != 0) {
        throw new AssertionError("go build ./cmd/sealer failed:\n" + output);
      }
      Runtime.getRuntime().addShutdownHook(new Thread(() -> delete(dir)));
      built = out;
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted while building the sealer");
    }
  }

  /** Fails under CI (the environment must provide what is missing), else skips the test. */
  public static void missing(String why) {
    if (System.getenv("CI") != null) {
      Assertions.fail("missing in CI: " + why);
    }
    Assumptions.abort(why);
  }

  /** The repository: the first directory up from here holding go.mod and cmd/sealer. */
  private static Path repositoryRoot() {
    for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
      if (Files.isRegularFile(d.resolve("go.mod")) && Files.isDirectory(d.resolve("cmd/sealer"))) {
        return d;
      }
    }
    return null;
  }

  /** go on the PATH, else in GOROOT, else where Go's installer puts it. */
  private static Path go() {
    List<Path> candidates = new ArrayList<>();
    String path = System.getenv("PATH");
    if (path != null) {
      for (String dir : path.split(File.pathSeparator)) {
        candidates.add(Path.of(dir, "go"));
      }
    }
    String goroot = System.getenv("GOROOT");
    if (goroot != null) {
      candidates.add(Path.of(goroot, "bin", "go"));
    }
    candidates.add(Path.of("/usr/local/go/bin/go"));
    return candidates.stream().filter(Files::isExecutable).findFirst().orElse(null);
  }

  private static void delete(Path dir) {
    try (Stream<Path> all = Files.walk(dir)) {
      all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // already gone, or not ours to remove
    }
  }
}
