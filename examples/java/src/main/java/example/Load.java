package example;

import com.google.protobuf.ByteString;
import io.github.mcpsealer.RequestDigest;
import io.github.mcpsealer.SealerClient;
import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import sealer.v1.SealerOuterClass.Binding;
import sealer.v1.SealerOuterClass.OpenRequest;
import sealer.v1.SealerOuterClass.SealRequest;
import sealer.v1.SealerOuterClass.SealResponse;

/**
 * The Java client's share of BENCHMARKS.md: closed-loop Seal+Open pairs per
 * second through {@link SealerClient}, over gRPC and over REST, with the
 * request and payload of bench/sealer-load's seal-open (principal alice, a
 * tools/call of get_weather, its digest computed in process for each call, a
 * payload of 1,024 bytes of 'a'). With {@code --echo-grpc} and {@code
 * --echo-http} the same calls go to bench/sealer-echo too, which answers
 * them without the sealer's work: the client's floor. {@code -c} platform
 * threads call one shared client (it blocks), for {@code --warmup}, then
 * for {@code -d}, which alone is counted; the targets take turns {@code
 * --repeat} times, each run with a client built anew, and the run with the
 * median throughput is reported, as in sealer-load. Before the turns, each
 * target runs once for {@code --jit-warmup} (5 s), not counted: a server
 * runs the client's code compiled, and the first run in a cold JVM made
 * half the pairs of the next or fewer. A second table gives the client's
 * share of its floor and, when {@code --go-grpc} and {@code --go-rest}
 * give the Go client's pairs/s, of the Go client's. With {@code
 * --server-pid} and {@code --echo-pid}, the CPU time the sealer and the echo
 * spent per pair is printed beside the JVM's: on a machine whose cores the
 * client and the server share, the two add up to what bounds a run.
 * scripts/bench.sh runs it beside bench/sealer-load.
 *
 * <pre>
 * java -cp 'examples/java/target/classes:examples/java/target/lib/*' example.Load --grpc 127.0.0.1:7443 \
 *     --rest 127.0.0.1:7080 --echo-grpc 127.0.0.1:7543 --echo-http 127.0.0.1:7580 -c 16 -d 10s --repeat 3
 * java ... example.Load ... --only '^REST Seal\+Open \(1024 B\)$'   one target
 * </pre>
 */
public final class Load {
  private Load() {}

  /** One target: a transport on the sealer or on the echo. */
  private record Target(String label, String transport, boolean echo, long serverPid, Supplier<SealerClient> make) {}

  /** One run: pairs counted in the measured duration, their latencies, and what the JVM spent on them. */
  private record Run(int pairs, double perSecond, double p50, double p99, long errors, String firstError,
      double cpuPerPair, double gcPerSecond, double serverCpuPerPair) {}

  public static void main(String[] args) throws Exception {
    Map<String, String> f = flags(args);
    int callers = Integer.parseInt(f.get("c"));
    long warmup = nanos(f.get("warmup"));
    long duration = nanos(f.get("d"));
    int repeat = Integer.parseInt(f.get("repeat"));
    byte[] payload = new byte[Integer.parseInt(f.get("payload"))];
    Arrays.fill(payload, (byte) 'a');

    List<Target> targets = new ArrayList<>();
    for (String transport : List.of("gRPC", "REST")) {
      boolean grpc = transport.equals("gRPC");
      List<String[]> servers = new ArrayList<>();
      servers.add(new String[] {"sealer", grpc ? f.get("grpc") : f.get("rest")});
      if (f.containsKey("echo-grpc") && f.containsKey("echo-http")) {
        servers.add(new String[] {"echo", grpc ? f.get("echo-grpc") : f.get("echo-http")});
      }
      for (String[] s : servers) {
        boolean echo = s[0].equals("echo");
        String url = "http://" + s[1];
        String label = transport + " Seal+Open (" + payload.length + " B)" + (echo ? " on the echo" : "");
        long pid = Long.parseLong(f.getOrDefault(echo ? "echo-pid" : "server-pid", "0"));
        targets.add(new Target(label, transport, echo, pid,
            () -> (grpc ? SealerClient.grpc(url) : SealerClient.rest(url)).build()));
      }
    }
    // --only runs the targets whose label matches the regular expression.
    if (f.containsKey("only")) {
      Pattern only = Pattern.compile(f.get("only"));
      targets.removeIf(t -> !only.matcher(t.label()).find());
    }

    // The JIT compiles the client's paths during the first run of each
    // transport: a run of every target, before the turns, that is only
    // printed on stderr (--jit-warmup 0 counts cold runs too).
    long jitWarmup = nanos(f.get("jit-warmup"));
    if (jitWarmup > 0) {
      for (Target t : targets) {
        try (SealerClient c = t.make().get()) {
          Run r = run(c, 0, payload, callers, 0, jitWarmup);
          System.err.printf(Locale.ROOT, "JIT warmup: %s, %d callers: %.0f pairs/s (not counted)%n",
              t.label(), callers, r.perSecond());
        }
      }
    }

    // The targets take turns, so that a slow stretch of a shared machine
    // moves no ratio; each run builds its client anew and connects within
    // its warmup.
    List<List<Run>> runs = new ArrayList<>();
    targets.forEach(t -> runs.add(new ArrayList<>()));
    for (int i = 0; i < repeat; i++) {
      for (int k = 0; k < targets.size(); k++) {
        try (SealerClient c = targets.get(k).make().get()) {
          Run r = run(c, targets.get(k).serverPid(), payload, callers, warmup, duration);
          runs.get(k).add(r);
          System.err.printf(Locale.ROOT, "run %d of %d: %s, %d callers: %.0f pairs/s%n",
              i + 1, repeat, targets.get(k).label(), callers, r.perSecond());
          if (r.firstError() != null) {
            System.err.println(targets.get(k).label() + ": " + r.errors() + " errors, the first: " + r.firstError());
          }
        }
      }
    }
    List<Run> median = new ArrayList<>();
    for (List<Run> rs : runs) {
      rs.sort((a, b) -> Double.compare(a.perSecond(), b.perSecond()));
      median.add(rs.get(rs.size() / 2));
    }

    String java = System.getProperty("java.version");
    System.out.println("| call (Java client, java " + java + ", " + Runtime.getRuntime().availableProcessors()
        + " CPUs) | concurrency | pairs/s | p50 | p99 | errors | JVM CPU/pair | server CPU/pair | GC ms/s |");
    System.out.println("|---|---|---|---|---|---|---|---|---|");
    for (int k = 0; k < targets.size(); k++) {
      Run m = median.get(k);
      String server = Double.isNaN(m.serverCpuPerPair()) ? "-" : String.format(Locale.ROOT, "%.0f µs", m.serverCpuPerPair());
      System.out.printf(Locale.ROOT, "| %s | %d | %.0f | %.2f ms | %.2f ms | %d | %.0f µs | %s | %.1f |%n",
          targets.get(k).label(), callers, m.perSecond(), m.p50(), m.p99(), m.errors(), m.cpuPerPair(), server,
          m.gcPerSecond());
    }

    System.out.println();
    System.out.println("| Java client | concurrency | pairs/s | floor (echo) pairs/s | share of its floor | Go client pairs/s | share of Go client |");
    System.out.println("|---|---|---|---|---|---|---|");
    for (String transport : List.of("gRPC", "REST")) {
      double client = rate(targets, median, transport, false);
      double floor = rate(targets, median, transport, true);
      String goFlag = f.get(transport.equals("gRPC") ? "go-grpc" : "go-rest");
      double go = goFlag == null || goFlag.isEmpty() ? Double.NaN : Double.parseDouble(goFlag);
      if (Double.isNaN(client) && Double.isNaN(floor)) {
        continue;
      }
      System.out.printf(Locale.ROOT, "| %s Seal+Open (%d B) | %d | %s | %s | %s | %s | %s |%n",
          transport, payload.length, callers, count(client), count(floor), share(client, floor), count(go), share(client, go));
    }
  }

  /**
   * Keeps callers pairs in flight for warmup + duration and counts those
   * that start after the warmup and end within the duration, with the CPU
   * time the JVM spent meanwhile (all its threads: callers, Netty's event
   * loops, HttpClient's selector, the JIT compilers, GC).
   */
  private static Run run(SealerClient c, long serverPid, byte[] payload, int callers, long warmup, long duration)
      throws InterruptedException {
    long start = System.nanoTime();
    long warmupEnd = start + warmup;
    long end = warmupEnd + duration;
    ByteString body = ByteString.copyFrom(payload);
    Map<String, Object> params = Map.of("name", "get_weather", "arguments", Map.of("location", "New York"));

    long[][] latencies = new long[callers][];
    int[] counts = new int[callers];
    long[] errors = new long[callers];
    String[] firstError = new String[callers];
    Thread[] threads = new Thread[callers];
    for (int i = 0; i < callers; i++) {
      int me = i;
      threads[i] = new Thread(() -> {
        long[] lat = new long[1 << 14];
        int n = 0;
        long now;
        while ((now = System.nanoTime()) < end) {
          long t0 = now;
          try {
            // The digest is the client's work on every call, as the Go
            // client computes it for each Seal and each Open.
            SealResponse s = c.seal(SealRequest.newBuilder().setPrincipal("alice")
                .setRequest(Binding.newBuilder().setDigest(ByteString.copyFrom(RequestDigest.of("tools/call", params))))
                .setPayload(body).build());
            c.open(OpenRequest.newBuilder().setRequestState(s.getRequestState()).setPrincipal("alice")
                .setRequest(Binding.newBuilder().setDigest(ByteString.copyFrom(RequestDigest.of("tools/call", params))))
                .build());
            long t1 = System.nanoTime();
            if (t0 >= warmupEnd && t1 <= end) {
              if (n == lat.length) {
                lat = Arrays.copyOf(lat, 2 * n);
              }
              lat[n++] = t1 - t0;
            }
          } catch (RuntimeException e) {
            if (t0 >= warmupEnd) {
              errors[me]++;
              if (firstError[me] == null) {
                firstError[me] = e.toString();
              }
            }
          }
        }
        latencies[me] = lat;
        counts[me] = n;
      }, "load-" + i);
      threads[i].start();
    }
    // The JVM's CPU time and GC time over the measured duration alone.
    sleepUntil(warmupEnd);
    long cpu0 = processCpu();
    long gc0 = gcMillis();
    long server0 = cpuOf(serverPid);
    sleepUntil(end);
    long cpu = processCpu() - cpu0;
    long gc = gcMillis() - gc0;
    long server1 = cpuOf(serverPid);
    long server = server0 == Long.MIN_VALUE || server1 == Long.MIN_VALUE ? -1 : server1 - server0;
    for (Thread t : threads) {
      t.join();
    }

    int total = 0;
    for (int n : counts) {
      total += n;
    }
    long[] all = new long[total];
    int at = 0;
    long errs = 0;
    String first = null;
    for (int i = 0; i < callers; i++) {
      System.arraycopy(latencies[i], 0, all, at, counts[i]);
      at += counts[i];
      errs += errors[i];
      first = first != null ? first : firstError[i];
    }
    Arrays.sort(all);
    double seconds = duration / 1e9;
    return new Run(total, total / seconds, quantile(all, 0.50), quantile(all, 0.99), errs, first,
        cpu / 1e3 / Math.max(1, total), gc / seconds,
        serverPid == 0 || server < 0 ? Double.NaN : server / 1e3 / Math.max(1, total));
  }

  private static double quantile(long[] sorted, double p) {
    if (sorted.length == 0) {
      return 0;
    }
    return sorted[Math.min(sorted.length - 1, (int) (p * sorted.length))] / 1e6;
  }

  private static void sleepUntil(long deadline) throws InterruptedException {
    for (long left; (left = deadline - System.nanoTime()) > 0; ) {
      Thread.sleep(left / 1_000_000, (int) (left % 1_000_000));
    }
  }

  /** The CPU time of the whole JVM so far, in nanoseconds. */
  private static long processCpu() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
  }

  /**
   * The CPU time of process pid so far (user and system, from /proc/PID/stat,
   * in ticks of 10 ms), in nanoseconds; 0 for pid 0, Long.MIN_VALUE when it
   * cannot be read.
   */
  private static long cpuOf(long pid) {
    if (pid == 0) {
      return 0;
    }
    try {
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      // The command name, field 2, is in parentheses and may hold spaces.
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) * 10_000_000L; // fields 14 and 15
    } catch (IOException | RuntimeException e) {
      return Long.MIN_VALUE;
    }
  }

  private static long gcMillis() {
    long ms = 0;
    for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
      ms += Math.max(0, b.getCollectionTime());
    }
    return ms;
  }

  private static double rate(List<Target> targets, List<Run> median, String transport, boolean echo) {
    for (int k = 0; k < targets.size(); k++) {
      if (targets.get(k).transport().equals(transport) && targets.get(k).echo() == echo) {
        return median.get(k).perSecond();
      }
    }
    return Double.NaN;
  }

  private static String count(double v) {
    return Double.isNaN(v) ? "" : String.format(Locale.ROOT, "%.0f", v);
  }

  private static String share(double a, double b) {
    double s = a / b;
    return Double.isFinite(s) ? Math.round(100 * s) + "%" : "";
  }

  /** Seconds as load.ts writes them ("10s", "2", "500ms"), in nanoseconds. */
  private static long nanos(String s) {
    if (s.endsWith("ms")) {
      return (long) (Double.parseDouble(s.substring(0, s.length() - 2)) * 1e6);
    }
    return (long) (Double.parseDouble(s.endsWith("s") ? s.substring(0, s.length() - 1) : s) * 1e9);
  }

  /** The flags of load.ts, {@code --name value} or {@code -c value}, over their defaults. */
  private static Map<String, String> flags(String[] args) {
    Map<String, String> f = new HashMap<>(Map.of(
        "grpc", "127.0.0.1:7443", "rest", "127.0.0.1:7080", "c", "16", "d", "10s", "warmup", "2s",
        "payload", "1024", "repeat", "1", "jit-warmup", "5s"));
    List<String> known = List.of("grpc", "rest", "echo-grpc", "echo-http", "go-grpc", "go-rest", "server-pid", "echo-pid",
        "c", "d", "warmup", "jit-warmup", "payload", "repeat", "only");
    for (int i = 0; i < args.length; i++) {
      String name = args[i].replaceFirst("^--?", "");
      String value = null;
      int eq = name.indexOf('=');
      if (eq >= 0) {
        value = name.substring(eq + 1);
        name = name.substring(0, eq);
      }
      if (!args[i].startsWith("-") || !known.contains(name)) {
        System.err.println("usage: Load [--grpc H:P] [--rest H:P] [--echo-grpc H:P --echo-http H:P] [--go-grpc N --go-rest N]"
            + " [--server-pid PID] [--echo-pid PID] [-c N] [-d 10s] [--warmup 2s] [--jit-warmup 5s] [--payload 1024] [--repeat 1] [--only REGEXP]: unknown " + args[i]);
        System.exit(2);
      }
      if (value == null) {
        if (i + 1 >= args.length) {
          System.err.println("Load: " + args[i] + " needs a value");
          System.exit(2);
        }
        value = args[++i];
      }
      f.put(name, value);
    }
    return f;
  }
}
