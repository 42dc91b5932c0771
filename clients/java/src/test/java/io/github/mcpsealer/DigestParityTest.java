package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java request digest against the Go core's, on 5,000 generated
 * requests, as clients/python/tests/test_digest_differential.py does for
 * the Python one.
 *
 * <p>Each request's params are written as JSON text once; the Go core
 * (mcpdigest.Request, through internal/cmd/digestoracle) reads that text,
 * and {@link RequestDigest} reads what Jackson's default ObjectMapper, the
 * MCP SDK's decoder, makes of the same text: a Map, and a tree. Both must
 * refuse, or both give the same digest.
 *
 * <p>What only the text path can refuse (FORMAT.md, "Params as text, params
 * decoded": the size of the text, duplicate names, lone surrogates or
 * numbers with no double outside the salient members) is not generated:
 * the generator's objects are Maps, the texts stay far below 1 MiB, and the
 * ignored members hold only what JCS can express. Look-alike names are
 * built from characters of Unicode 6 and before, which every runtime's
 * tables hold alike.
 *
 * <p>The seed is SEALER_TEST_SEED if set, else a fixed one; it is printed.
 * The oracle is SEALER_TEST_DIGEST_ORACLE if set, else built with go.
 * Without either the test is skipped, or fails when CI is set.
 */
class DigestParityTest {
  static final int N = 5_000;
  static final long MAX = RequestDigest.MAX_SAFE_INTEGER;
  static final ObjectMapper SDK = new ObjectMapper(); // the MCP SDK reads JSON-RPC params with Jackson's defaults

  static Process oracle;
  static OutputStream toOracle;
  static BufferedReader fromOracle;

  @BeforeAll
  static void startOracle(@TempDir Path tmp) throws Exception {
    String path = System.getenv("SEALER_TEST_DIGEST_ORACLE");
    if (path == null || path.isEmpty()) {
      path = buildOracle(tmp.resolve("digestoracle"));
    }
    oracle = new ProcessBuilder(path).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    toOracle = oracle.getOutputStream();
    fromOracle = new BufferedReader(new InputStreamReader(oracle.getInputStream(), StandardCharsets.UTF_8));
  }

  @AfterAll
  static void stopOracle() throws Exception {
    if (oracle != null) {
      toOracle.close();
      if (!oracle.waitFor(10, TimeUnit.SECONDS)) {
        oracle.destroyForcibly();
      }
    }
  }

  static String buildOracle(Path out) throws Exception {
    String go = findGo();
    if (go == null) {
      String why = "no Go digest oracle: set SEALER_TEST_DIGEST_ORACLE or put go on PATH";
      String ci = System.getenv("CI");
      if (ci != null && !ci.isEmpty()) {
        fail(why + " (CI is set: the parity test must run)");
      }
      Assumptions.abort(why);
    }
    Path root = Path.of(System.getProperty("basedir", ".")).resolve("../..").normalize();
    Process build =
        new ProcessBuilder(go, "build", "-o", out.toString(), "./internal/cmd/digestoracle")
            .directory(root.toFile())
            .redirectErrorStream(true)
            .start();
    String log = new String(build.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (build.waitFor() != 0) {
      fail("go build ./internal/cmd/digestoracle failed:\n" + log);
    }
    return out.toString();
  }

  /** go on PATH, else in GOROOT, else where Go's own installer puts it. */
  static String findGo() {
    List<Path> candidates = new ArrayList<>();
    for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      if (!dir.isEmpty()) {
        candidates.add(Path.of(dir, "go"));
      }
    }
    String goroot = System.getenv("GOROOT");
    if (goroot != null && !goroot.isEmpty()) {
      candidates.add(Path.of(goroot, "bin", "go"));
    }
    candidates.add(Path.of("/usr/local/go/bin/go"));
    return candidates.stream().filter(Files::isExecutable).map(Path::toString).findFirst().orElse(null);
  }

  /** The Go core's answer: the hex digest, or "refused" and the Go error after a tab. */
  static String goDigest(String method, String params) throws IOException {
    Map<String, String> line = new LinkedHashMap<>();
    line.put("method", method);
    line.put("params", params);
    toOracle.write(SDK.writeValueAsBytes(line));
    toOracle.write('\n');
    toOracle.flush();
    String answer = fromOracle.readLine();
    assertTrue(answer != null && !answer.startsWith("error"), "digestoracle answered " + answer);
    return answer;
  }

  /** The Java digest of the params decoded as a Java MCP server would (a Map, or a tree), or "refused". */
  static String javaDigest(String method, String text, boolean tree) {
    Object params;
    try {
      params = tree ? SDK.readTree(text) : SDK.readValue(text, Object.class);
    } catch (IOException e) {
      return "refused";
    }
    try {
      return HexFormat.of().formatHex(RequestDigest.of(method, params));
    } catch (SealerException e) {
      assertEquals(sealer.v1.SealerOuterClass.Reason.REASON_INVALID_ARGUMENT, e.reason(), e.toString());
      return "refused";
    }
  }

  @Test
  void javaDigestMatchesGo() throws IOException {
    String env = System.getenv("SEALER_TEST_SEED");
    long seed = env == null || env.isEmpty() ? 20260501L : Long.parseLong(env);
    Gen gen = new Gen(new Random(seed));
    int agree = 0;
    int refused = 0;
    int digested = 0;
    int many = 0;
    Map<String, Integer> reasons = new TreeMap<>();
    List<String> disagreements = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      String method = gen.method();
      Object params = gen.params(method);
      String text = gen.json(params);
      assertTrue(text.getBytes(StandardCharsets.UTF_8).length <= 1 << 20, "params beyond 1 MiB: only the text path refuses them");
      String go = goDigest(method, text);
      String verdict = go.startsWith("refused") ? "refused" : go;
      if (verdict.equals("refused")) {
        refused++;
        String why = go.substring(go.indexOf('\t') + 1).replace("sealer: invalid argument: ", "");
        why = why.replaceAll("\"[^\"]*\"|\\d+", "#");
        reasons.merge(why.substring(0, Math.min(60, why.length())), 1, Integer::sum);
      } else {
        digested++;
      }
      if (params instanceof Map<?, ?> p && p.get("arguments") instanceof Map<?, ?> a && a.containsKey("many")) {
        many++;
      }
      String map = javaDigest(method, text, false);
      String tree = javaDigest(method, text, true);
      if (verdict.equals(map) && verdict.equals(tree)) {
        agree++;
      } else if (disagreements.size() < 5) {
        disagreements.add(String.format("%s %.300s: Go %s, Map %s, tree %s", method, text, go, map, tree));
      }
    }
    System.out.printf(
        "digest parity (seed %d): %d requests compared with the Go core: %d agree; %d digested, %d refused; %d with arguments of about %d values%n",
        seed, N, agree, digested, refused, many, RequestDigest.MAX_VALUES);
    reasons.entrySet().stream()
        .sorted(Map.Entry.<String, Integer>comparingByValue().reversed())
        .limit(12)
        .forEach(e -> System.out.printf("  refused %5d: %s%n", e.getValue(), e.getKey()));
    String first = String.join("\n", disagreements);
    assertEquals(N, agree, (N - agree) + " disagreements (method, params, Go, Java), the first:\n" + first);
    assertTrue(digested >= N / 5, "too few digested: " + digested);
    assertTrue(refused >= N / 5, "too few refused: " + refused);
  }

  /** A number as a literal of the JSON text ("1E+0", "9007199254740991.4", "1e400"), so that both sides parse one spelling. */
  record Raw(String literal) {}

  /** A member left out of params. */
  static final Object MISSING = new Object();

  /** The generator: the strategies of test_digest_differential.py, drawn from one seeded Random. */
  static final class Gen {
    final Random r;

    Gen(Random r) {
      this.r = r;
    }

    boolean oneIn(int n) {
      return r.nextInt(n) == 0;
    }

    @SafeVarargs
    final <T> T pick(T... choices) {
      return choices[r.nextInt(choices.length)];
    }

    @SafeVarargs
    final Object oneOf(Supplier<?>... choices) {
      return choices[r.nextInt(choices.length)].get();
    }

    long between(long lo, long hi) {
      return lo + (long) Math.floor(r.nextDouble() * ((double) hi - lo + 1));
    }

    // Characters besides random ones: escapes, controls, the characters JCS
    // writes as themselves, astral ones (whose UTF-16 order differs from
    // their code point order) and those of the look-alike rule.
    static final String[] SPECIAL = {
      "e", "\"", "\\", "/", "\0", "\b", "\u001f", "\u007f", "\u2028", "\u2029", "\ufeff", "\ufffd", "\uff61",
      "\uD83D\uDE00", "\uDBFF\uDFFF", "\u00e9", "\u00df", "\u017f", "\u0131", "\u0130", "\u212a",
    };
    static final String[] LONE = {"\uD800", "\uDBFF", "\uDC00", "\uDFFF", "\uD83D"};

    /** Up to 8 characters, from ASCII, SPECIAL, the rest of the BMP and the astral planes. */
    String seededText() {
      StringBuilder b = new StringBuilder();
      for (int n = r.nextInt(9); n > 0; n--) {
        int kind = r.nextInt(10);
        if (kind < 4) {
          b.append((char) (0x20 + r.nextInt(0x7F - 0x20)));
        } else if (kind < 6) {
          b.append(pick(SPECIAL));
        } else if (kind < 8) {
          int cp = 0x80 + r.nextInt(0x10000 - 0x800 - 0x80);
          b.appendCodePoint(cp >= 0xD800 ? cp + 0x800 : cp);
        } else {
          b.appendCodePoint(0x10000 + r.nextInt(0x110000 - 0x10000));
        }
      }
      return b.toString();
    }

    String text() {
      return r.nextBoolean() ? pick("", "a", "name", "e\u0301") : seededText();
    }

    /** s, with a lone surrogate put in (at a code point boundary) about once in n: JCS cannot write it. */
    String sometimesLone(String s, int n) {
      if (!oneIn(n)) {
        return s;
      }
      int at = Math.min(r.nextInt(9), s.codePointCount(0, s.length()));
      int i = s.offsetByCodePoints(0, at);
      return s.substring(0, i) + pick(LONE) + s.substring(i);
    }

    // Number spellings that read as doubles within ±(2^53-1), and ones that do not.
    static final String[] RAW_OK = {
      "1E+0", "10e-1", "0.1e1", "-0", "-0.0e0", "1e-400", "-1e-400", "9007199254740991.4", "9.007199254740991e15",
      "-9007199254740991.49999", "4.9e-324", "2.4703282292062328e-324", "2.4703282292062327e-324", "0.000001",
      "1e-7", "1.0000000000000000000001", "123456789012345678901234567890e-20", "1500", "0.1", "100e-2",
    };
    static final String[] RAW_BEYOND = {
      "1e400", "-1e400", "9007199254740991.5", "9007199254740992", "-9007199254740992", "9007199254740993",
      "1e16", "1E+21", "1" + "0".repeat(30), "1.7976931348623157e308", "1.8e308",
    };

    /** Decimal literals of any size and exponent (and, as in the Python test, some like 1E+-5 that are not JSON). */
    Raw rawDecimal() {
      StringBuilder b = new StringBuilder(pick("", "-"));
      b.append(new BigInteger(67, r).mod(BigInteger.TEN.pow(20).add(BigInteger.ONE)));
      int frac = r.nextInt(21);
      if (frac > 0) {
        b.append('.');
        for (int i = 0; i < frac; i++) {
          b.append((char) ('0' + r.nextInt(10)));
        }
      }
      switch (r.nextInt(3)) {
        case 0 -> {}
        case 1 -> b.append('e').append(between(-340, 330));
        default -> b.append("E+").append(between(-30, 30));
      }
      return new Raw(b.toString());
    }

    /** A double as JSON text: Java's spelling, or now and then its exact decimal expansion. */
    Raw dbl(double d) {
      return new Raw(oneIn(10) ? new java.math.BigDecimal(d).toString() : Double.toString(d));
    }

    Raw intsOk() {
      return new Raw(
          Long.toString(
              switch (r.nextInt(3)) {
                case 0 -> between(-1000, 1000);
                case 1 -> between(-MAX, MAX);
                default -> pick(0L, MAX, -MAX, 1L << 52, 1L << 31);
              }));
    }

    /** A double in [lo, hi]: uniform, or of a uniform exponent. */
    double within(double lo, double hi) {
      if (r.nextBoolean()) {
        return lo + r.nextDouble() * (hi - lo);
      }
      double span = Math.max(Math.abs(lo), Math.abs(hi));
      double d = span * Math.pow(2, -r.nextInt(1100)) * r.nextDouble() * (r.nextBoolean() ? 1 : -1);
      return Math.max(lo, Math.min(hi, d));
    }

    Raw floatsOk() {
      return dbl(
          switch (r.nextInt(5)) {
            case 0 -> within(-MAX, MAX);
            case 1 -> within(-1e-300, 1e-300);
            case 2 -> within(-1e-5, 1e-5);
            case 3 -> within(0x1p52, MAX);
            default -> pick(0.0, -0.0, 5e-324, -5e-324, 1e-7, 1e-6, 9.99e-7, 0.1, 1.0, 1.5, 1e15, (double) MAX, 123456789.125);
          });
    }

    /** Numbers beyond ±(2^53-1): refused in the arguments, ignored elsewhere. */
    Raw numbersBeyond() {
      return switch (r.nextInt(4)) {
        case 0 -> {
          BigInteger n = BigInteger.TWO.pow(53).add(new BigInteger(70, r).mod(BigInteger.TWO.pow(70).subtract(BigInteger.TWO.pow(53))));
          yield new Raw((n.testBit(0) ? n : n.negate()).toString());
        }
        case 1 -> new Raw(pick("9007199254740992", "-9007199254740992", "9007199254740993", "1" + "0".repeat(30), "-1" + "0".repeat(40)));
        case 2 -> {
          double d = within(0x1p53, 1e300);
          yield dbl(((long) (d % 3)) != 0 ? d : -d);
        }
        default -> dbl(pick(Double.MAX_VALUE, 1e21, 1e16, 0x1p53));
      };
    }

    Object leafOk() {
      return oneOf(() -> null, r::nextBoolean, this::intsOk, this::floatsOk, this::text);
    }

    Object salientLeaf() {
      return oneOf(
          this::leafOk,
          this::leafOk,
          () -> sometimesLone(text(), 40),
          () -> oneIn(16) ? rawDecimal() : new Raw(pick(RAW_OK)));
    }

    /** A tree of lists and objects of up to 4 items, with at most 10 leaves. */
    Object containers(Supplier<Object> leaf, Supplier<String> keys) {
      return tree(leaf, keys, new int[] {10});
    }

    private Object tree(Supplier<Object> leaf, Supplier<String> keys, int[] leaves) {
      if (leaves[0] <= 0 || r.nextBoolean()) {
        leaves[0]--;
        return leaf.get();
      }
      int n = r.nextInt(5);
      if (r.nextBoolean()) {
        List<Object> list = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          list.add(tree(leaf, keys, leaves));
        }
        return list;
      }
      Map<String, Object> map = new LinkedHashMap<>();
      for (int i = 0; i < n; i++) {
        map.put(keys.get(), tree(leaf, keys, leaves));
      }
      return map;
    }

    /** inner wrapped in levels arrays and objects, which the bits of shapes pick. */
    static Object nest(int levels, Object inner, int shapes) {
      for (int i = 0; i < levels; i++) {
        inner = ((shapes >> (i % 8)) & 1) == 1 ? Collections.singletonList(inner) : Collections.singletonMap("k", inner);
      }
      return inner;
    }

    /** Arguments nested 58 to 70 levels below the arguments object: 64 levels in all is the most. */
    Object deep() {
      return nest((int) between(58, 70), leafOk(), r.nextInt(256));
    }

    /** Now and then, arguments of about MAX_VALUES values and nothing else, on either side of the limit. */
    Map<String, Object> many() {
      if (!oneIn(20)) {
        return null;
      }
      int n = (int) between(RequestDigest.MAX_VALUES - 5, RequestDigest.MAX_VALUES);
      Object v = pick(new Raw("0"), null, true, "\u00e9", new Raw("1.5"));
      List<Object> items = new ArrayList<>(Collections.nCopies(n, v));
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("many", items);
      return m;
    }

    /** What makes the core refuse the arguments: put in them now and then. */
    Object poison() {
      return oneOf(
          this::numbersBeyond,
          () -> new Raw(pick(RAW_BEYOND)),
          () -> pick(LONE),
          () -> Map.of(pick(LONE), new Raw("1")),
          () -> nest((int) between(64, 70), leafOk(), r.nextInt(256)));
    }

    String argKey() {
      return (String) oneOf(this::text, () -> sometimesLone(text(), 60), () -> pick("NAME", "Arguments", "name", "arguments", "uri"));
    }

    Object argumentsObject() {
      Map<String, Object> base = new LinkedHashMap<>();
      for (int n = r.nextInt(6); n > 0; n--) {
        base.put(argKey(), containers(this::salientLeaf, this::argKey));
      }
      if (r.nextBoolean()) {
        base.put("deep", deep());
      }
      if (oneIn(8)) {
        base.put("p" + r.nextInt(4), poison());
      }
      if (r.nextBoolean()) {
        Map<String, Object> m = many();
        if (m != null) {
          return m;
        }
      }
      return base;
    }

    Object arguments() {
      return switch (r.nextInt(6)) {
        case 0, 1, 2, 3 -> argumentsObject();
        case 4 -> pick(MISSING, null);
        default -> pick(List.of(), List.of(new Raw("1")), "a=b", new Raw("1"), true, false, new Raw("0"), "");
      };
    }

    String nonemptyText() {
      String s = seededText();
      return s.isEmpty() ? "t" : s;
    }

    Object target() {
      return switch (r.nextInt(5)) {
        case 0, 1, 2 -> nonemptyText();
        case 3 -> pick("get_weather", "file:///etc/motd", "gr\u00fc\u00dfe \uD83D\uDE42", "\ufeffx");
        default -> oneIn(8) ? sometimesLone(text(), 1) : pick("", new Raw("7"), null, List.of(), MISSING, true);
      };
    }

    // Members besides the salient ones: the ignored ones, and look-alikes of
    // a salient name (refused where that name is salient).
    static final String[] CASE_NAMES = {
      "Name", "NAME", "nAME", "namE", "Arguments", "ARGUMENTS", "argument\u017f", "ARGUMENT\u017f", "URI", "Uri",
      "ur\u0131", "ur\u0130", "UR\u0131", "uR\u0130",
      "\uff41\uff52\uff47\uff55\uff4d\uff45\uff4e\uff54\uff53", "\uff4e\uff41\uff4d\uff45", "\u3381me", "\uff55\uff52\u0131",
      "ur\uD835\uDEA4",
    };
    static final String[] NOT_CASE_NAMES = {
      "_meta", "inputResponses", "requestState", "n\u0430me", "argumen\ufb06", "name\u0301", "\u212a", "\u017f", "names",
      "argument\u00df", "\uff4e\uff41\uff4d\uff45\uff53",
    };

    /**
     * A salient name with one to three of its letters spelled otherwise
     * (the other case, fullwidth, mathematical bold, circled, superscript,
     * ſ, the Kelvin sign, İ, ı, a Cyrillic homoglyph, a combining mark
     * after it, doubled), or two of them as a ligature: look-alikes and
     * other names, as mcpdigest's lookAlikeNames.
     */
    String lookAlikeName() {
      String s = pick("name", "arguments", "uri");
      if (oneIn(8)) {
        return s.replace("ff", "\ufb00").replace("fi", "\ufb01").replace("st", "\ufb06").replace("s", oneIn(2) ? "\u00df" : "s");
      }
      boolean[] at = new boolean[s.length()];
      for (int n = 1 + r.nextInt(3); n > 0; n--) {
        at[r.nextInt(s.length())] = true;
      }
      StringBuilder b = new StringBuilder();
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        b.append(at[i] ? spell(c) : String.valueOf(c));
      }
      return b.toString();
    }

    private String spell(char c) {
      String superscripts = "a\u1d43e\u1d49i\u2071m\u1d50n\u207fo\u1d52p\u1d56r\u02b3s\u02e2t\u1d57u\u1d58";
      String homoglyphs = "a\u0430e\u0435o\u043ep\u0440c\u0441i\u0456s\u0455";
      return switch (r.nextInt(10)) {
        case 0 -> String.valueOf((char) (c ^ 0x20));
        case 1 -> String.valueOf((char) ((oneIn(2) ? 0xFF41 : 0xFF21) + c - 'a'));
        case 2 -> new String(Character.toChars(0x1D400 + (c - 'a') + 26 * r.nextInt(2)));
        case 3 -> String.valueOf((char) (0x24D0 + c - 'a'));
        case 4 -> homoglyphs.indexOf(c) % 2 == 0 ? String.valueOf(homoglyphs.charAt(homoglyphs.indexOf(c) + 1)) : String.valueOf(c);
        case 5 -> c + pick("\u0301", "\u0307", "\u0338", "\u200b");
        case 6 -> switch (c) {
          case 's' -> "\u017f";
          case 'i' -> pick("\u0130", "\u0131");
          case 'k' -> "\u212a";
          default -> String.valueOf(c);
        };
        case 7 -> superscripts.indexOf(c) % 2 == 0 ? String.valueOf(superscripts.charAt(superscripts.indexOf(c) + 1)) : String.valueOf(c);
        case 8 -> "" + c + c;
        default -> String.valueOf(c);
      };
    }

    String extraName() {
      return (String) oneOf(() -> pick(NOT_CASE_NAMES), () -> pick(NOT_CASE_NAMES), this::text, () -> pick(CASE_NAMES), this::lookAlikeName);
    }

    Object ignoredValue() {
      return r.nextBoolean() ? containers(() -> r.nextBoolean() ? leafOk() : numbersBeyond(), this::text) : deep();
    }

    String method() {
      return oneIn(100) ? pick("tools/list", "Tools/Call", "") : pick("tools/call", "prompts/get", "resources/read");
    }

    Object params(String method) {
      Object target = target();
      Object arguments = arguments();
      Object ignored = r.nextBoolean() ? MISSING : ignoredValue();
      Map<String, Object> params = new LinkedHashMap<>();
      for (int n = r.nextInt(4); n > 0; n--) {
        params.put(extraName(), ignoredValue());
      }
      if (oneIn(60)) { // now and then, params that are not an object
        return target == MISSING ? null : target instanceof String ? List.of(target) : target;
      }
      if (method.equals("resources/read")) { // arguments are an ignored member
        params.put("arguments", ignored);
        params.put("uri", target);
      } else {
        params.put("arguments", arguments);
        params.put("name", target);
      }
      params.values().removeIf(v -> v == MISSING);
      return params;
    }

    /**
     * value as JSON text: lone surrogates as escapes (the only way UTF-8
     * text can hold them), other characters now and then escaped, Raw
     * numbers as their literal, whitespace now and then between tokens.
     */
    String json(Object value) {
      StringBuilder b = new StringBuilder();
      space(b);
      write(b, value);
      space(b);
      return b.toString();
    }

    private void space(StringBuilder b) {
      if (oneIn(10)) {
        b.append(pick(" ", "\t", "\n", "\r\n", "  "));
      }
    }

    private void write(StringBuilder b, Object v) {
      if (v == null) {
        b.append("null");
      } else if (v instanceof Boolean x) {
        b.append(x);
      } else if (v instanceof Raw raw) {
        b.append(raw.literal());
      } else if (v instanceof String s) {
        string(b, s);
      } else if (v instanceof List<?> list) {
        b.append('[');
        for (int i = 0; i < list.size(); i++) {
          if (i > 0) {
            b.append(',');
          }
          space(b);
          write(b, list.get(i));
        }
        b.append(']');
      } else {
        b.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> m : ((Map<?, ?>) v).entrySet()) {
          if (!first) {
            b.append(',');
          }
          first = false;
          space(b);
          string(b, (String) m.getKey());
          b.append(':');
          space(b);
          write(b, m.getValue());
        }
        b.append('}');
      }
    }

    private void string(StringBuilder b, String s) {
      b.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
          if (oneIn(8)) {
            escape(b, c);
            escape(b, s.charAt(i + 1));
          } else {
            b.append(c).append(s.charAt(i + 1));
          }
          i++;
        } else if (Character.isSurrogate(c)) {
          escape(b, c);
        } else if (c == '"' || c == '\\') {
          b.append('\\').append(c);
        } else if (c < 0x20) {
          int at = "\b\f\n\r\t".indexOf(c);
          if (at >= 0 && r.nextBoolean()) {
            b.append('\\').append("bfnrt".charAt(at));
          } else {
            escape(b, c);
          }
        } else if (c == '/' && oneIn(4)) {
          b.append("\\/");
        } else if (oneIn(16)) {
          escape(b, c);
        } else {
          b.append(c);
        }
      }
      b.append('"');
    }

    private void escape(StringBuilder b, char c) {
      String hex = String.format("%04x", (int) c);
      b.append("\\u").append(r.nextBoolean() ? hex : hex.toUpperCase(java.util.Locale.ROOT));
    }
  }
}
