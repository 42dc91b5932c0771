package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import sealer.v1.SealerOuterClass.Reason;

/**
 * The request digest on values as a Java program holds them: each of
 * Jackson's number types, Maps and trees, and what JSON cannot hold; the
 * canonical form against FORMAT.md's step 5 written out, and numbers against
 * RFC 8785's table. As clients/python/tests/test_digest.py.
 */
class RequestDigestTest {
  static final long MAX = RequestDigest.MAX_SAFE_INTEGER;

  static byte[] args(Object arguments) {
    Map<String, Object> params = new HashMap<>();
    params.put("name", "x");
    params.put("arguments", arguments);
    return RequestDigest.of("tools/call", params);
  }

  /** FORMAT.md step 5, written out. */
  static byte[] step5(String method, String target, String args) throws Exception {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.write("mcp-sealer/v1 request\0".getBytes(StandardCharsets.UTF_8));
    for (String part : new String[] {method, target, args}) {
      byte[] p = part.getBytes(StandardCharsets.UTF_8);
      b.write(ByteBuffer.allocate(4).putInt(p.length).array());
      b.write(p);
    }
    return MessageDigest.getInstance("SHA-256").digest(b.toByteArray());
  }

  static SealerException refuses(String method, Object params) {
    SealerException e = assertThrows(SealerException.class, () -> RequestDigest.of(method, params));
    assertEquals(Reason.REASON_INVALID_ARGUMENT, e.reason(), e.toString());
    return e;
  }

  static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  static Stream<Arguments> canonicalArguments() {
    return Stream.of(
        Arguments.of(map("a", true), "{\"a\":true}"),
        Arguments.of(map("a", 1), "{\"a\":1}"),
        Arguments.of(map("a", 1L), "{\"a\":1}"),
        Arguments.of(map("a", (short) 1), "{\"a\":1}"),
        Arguments.of(map("a", BigInteger.ONE), "{\"a\":1}"),
        Arguments.of(map("a", 1.0), "{\"a\":1}"),
        Arguments.of(map("a", 1.0f), "{\"a\":1}"),
        Arguments.of(map("a", new BigDecimal("1.000")), "{\"a\":1}"),
        Arguments.of(map("a", -0.0), "{\"a\":0}"),
        Arguments.of(map("a", 0.1), "{\"a\":0.1}"),
        Arguments.of(map("a", 0.1f), "{\"a\":0.10000000149011612}"), // the float, widened
        Arguments.of(map("a", 1e-7), "{\"a\":1e-7}"),
        Arguments.of(map("a", 1e-6), "{\"a\":0.000001}"),
        Arguments.of(map("a", 5e-324), "{\"a\":5e-324}"),
        Arguments.of(map("a", 1500.0), "{\"a\":1500}"),
        Arguments.of(map("a", MAX), "{\"a\":9007199254740991}"),
        Arguments.of(map("a", -MAX), "{\"a\":-9007199254740991}"),
        Arguments.of(map("a", (double) MAX), "{\"a\":9007199254740991}"),
        Arguments.of(map("a", new BigDecimal("9007199254740991.4")), "{\"a\":9007199254740991}"),
        Arguments.of(map("a", -1.5e-7), "{\"a\":-1.5e-7}"),
        Arguments.of(map("a", 123456789.125), "{\"a\":123456789.125}"),
        Arguments.of(map("a", new BigDecimal("1e-400")), "{\"a\":0}"),
        // U+1F600 is D83D DE00 in UTF-16, before U+FF61; by code point it would sort after
        Arguments.of(
            map("\uFF61", 1, "\uD83D\uDE00", 2, "\u00E9", 3, "e", 4, "\0", 5),
            "{\"\\u0000\":5,\"e\":4,\"\u00E9\":3,\"\uD83D\uDE00\":2,\"\uFF61\":1}"),
        Arguments.of(
            map("a", "\u00E9\uD83D\uDE00\u2028\uFEFF\u007F\u001F\n\"\\/\b\f\r\t"),
            "{\"a\":\"\u00E9\uD83D\uDE00\u2028\uFEFF\u007F\\u001f\\n\\\"\\\\/\\b\\f\\r\\t\"}"),
        Arguments.of(new TreeMap<>(Map.of("b", 1, "a", 2)), "{\"a\":2,\"b\":1}"),
        Arguments.of(map("NAME", "x", "Arguments", Map.of()), "{\"Arguments\":{},\"NAME\":\"x\"}"),
        Arguments.of(map("a", Arrays.asList(null, List.of(), Map.of())), "{\"a\":[null,[],{}]}"),
        Arguments.of(map("a", JsonNodeFactory.instance.objectNode().put("z", 1).put("y", 0.5)), "{\"a\":{\"y\":0.5,\"z\":1}}"));
  }

  @ParameterizedTest
  @MethodSource("canonicalArguments")
  void canonicalForm(Object arguments, String canonical) throws Exception {
    assertArrayEquals(step5("tools/call", "x", canonical), args(arguments));
  }

  /** RFC 8785, Appendix B: IEEE 754 bits and the number JCS writes. */
  @ParameterizedTest(name = "{0} = {1}")
  @CsvSource({
    "0000000000000000, 0",
    "8000000000000000, 0",
    "0000000000000001, 5e-324",
    "8000000000000001, -5e-324",
    "7fefffffffffffff, 1.7976931348623157e+308",
    "ffefffffffffffff, -1.7976931348623157e+308",
    "4340000000000000, 9007199254740992",
    "c340000000000000, -9007199254740992",
    "4430000000000000, 295147905179352830000",
    "44b52d02c7e14af5, 9.999999999999997e+22",
    "44b52d02c7e14af6, 1e+23",
    "44b52d02c7e14af7, 1.0000000000000001e+23",
    "444b1ae4d6e2ef4e, 999999999999999700000",
    "444b1ae4d6e2ef4f, 999999999999999900000",
    "444b1ae4d6e2ef50, 1e+21",
    "3eb0c6f7a0b5ed8c, 9.999999999999997e-7",
    "3eb0c6f7a0b5ed8d, 0.000001",
    "41b3de4355555553, 333333333.3333332",
    "41b3de4355555554, 333333333.33333325",
    "41b3de4355555555, 333333333.3333333",
    "41b3de4355555556, 333333333.3333334",
    "41b3de4355555557, 333333333.33333343",
    "becbf647612f3696, -0.0000033333333333333333",
    "43143ff3c1cb0959, 1424953923781206.2",
    // Java 17's Double.toString writes 8.0522777147371376E16 and 2.5490945129981568E18: a digit too many
    "4371e130a08326f7, 80522777147371380",
    "43c1b019fa191385, 2549094512998157000",
    "3f60624dd2f1a9fc, 0.002",
    // 2^-1017: the closest 16-digit decimal lies below it and does not read back; the one above does
    "0060000000000000, 7.120236347223045e-307",
    "4000000000000000, 2",
    "3ff8000000000000, 1.5",
  })
  void numbers(String bits, String want) {
    assertEquals(want, Jcs.number(Double.longBitsToDouble(Long.parseUnsignedLong(bits, 16))));
  }

  /**
   * Each number written is the decimal of fewest digits that reads back, and
   * of those the closest, checked from that definition: on every power of
   * two of the doubles (below which the decimals that read back lie half as
   * far as above) and on 20,000 doubles of random bits.
   */
  @Test
  void numbersAreTheShortestClosestDecimals() {
    List<Double> doubles = new ArrayList<>();
    for (int e = -1074; e <= 1023; e++) {
      doubles.add(Math.scalb(1.0, e));
    }
    java.util.Random random = new java.util.Random(8785);
    while (doubles.size() < 2098 + 20_000) {
      double d = Double.longBitsToDouble(random.nextLong());
      if (Double.isFinite(d) && d != 0) {
        doubles.add(d);
      }
    }
    for (double d : doubles) {
      String s = Jcs.number(d);
      assertEquals(d, Double.parseDouble(s), s);
      double a = Math.abs(d);
      assertEquals(a >= 1e-6 && a < 1e21, !s.contains("e"), s);
      BigDecimal written = new BigDecimal(s).abs().stripTrailingZeros();
      BigDecimal exact = new BigDecimal(a);
      int p = written.precision();
      if (p > 1) { // no decimal of fewer digits reads back: neither the one below a nor the one above
        for (java.math.RoundingMode m : List.of(java.math.RoundingMode.FLOOR, java.math.RoundingMode.CEILING)) {
          BigDecimal shorter = exact.round(new java.math.MathContext(p - 1, m));
          assertFalse(Double.parseDouble(shorter.toString()) == a, () -> s + ": " + shorter + " reads back");
        }
      }
      for (BigDecimal other : List.of(written.add(written.ulp()), written.subtract(written.ulp()))) {
        if (other.signum() > 0 && Double.parseDouble(other.toString()) == a) { // another p-digit decimal reads back
          int cmp = other.subtract(exact).abs().compareTo(written.subtract(exact).abs());
          assertTrue(cmp > 0 || (cmp == 0 && written.unscaledValue().testBit(0) == false), () -> s + ": " + other + " is closer");
        }
      }
    }
  }

  static Stream<Arguments> refusedArguments() {
    Map<String, Object> self = new HashMap<>();
    self.put("self", self);
    return Stream.of(
        Arguments.of("int 2^53", map("a", MAX + 1)),
        Arguments.of("int -2^53", map("a", -MAX - 1)),
        Arguments.of("int 2^53+1", map("a", MAX + 2)),
        Arguments.of("Long.MIN_VALUE", map("a", Long.MIN_VALUE)),
        Arguments.of("BigInteger 10^400", map("a", BigInteger.TEN.pow(400))),
        Arguments.of("double 2^53", map("a", 9007199254740992.0)),
        Arguments.of("BigDecimal 2^53-1 + 0.5 reads as 2^53", map("a", new BigDecimal("9007199254740991.5"))),
        Arguments.of("BigDecimal 1e400", map("a", new BigDecimal("1e400"))),
        Arguments.of("1e16", map("a", 1e16)),
        Arguments.of("1e21", map("a", 1e21)),
        Arguments.of("largest double", map("a", Double.MAX_VALUE)),
        Arguments.of("NaN", map("a", Double.NaN)),
        Arguments.of("Infinity", map("a", Double.POSITIVE_INFINITY)),
        Arguments.of("float -Infinity", map("a", Float.NEGATIVE_INFINITY)),
        Arguments.of("lone high surrogate in a value", map("a", "\uD800")),
        Arguments.of("lone low surrogate in a value", map("a", "x\uDC00y")),
        Arguments.of("pair reversed", map("a", "\uDE00\uD83D")),
        Arguments.of("lone surrogate in a member name", map("\uD800", 1)),
        Arguments.of("lone surrogate in a deep member name", map("a", List.of(map("b", map("\uDFFF", 1))))),
        Arguments.of("a set", map("a", Set.of(1))),
        Arguments.of("an array", map("a", new int[] {1})),
        Arguments.of("bytes", map("a", new byte[] {1})),
        Arguments.of("an object", map("a", new Object())),
        Arguments.of("another Number", map("a", new java.util.concurrent.atomic.AtomicLong(1))),
        Arguments.of("a member name not a string", map("a", Collections.singletonMap(1, "x"))),
        Arguments.of("a null member name", map("a", Collections.singletonMap(null, "x"))),
        Arguments.of("a POJO in a tree", map("a", JsonNodeFactory.instance.pojoNode(new Object()))),
        Arguments.of("binary in a tree", map("a", JsonNodeFactory.instance.binaryNode(new byte[] {1}))),
        Arguments.of("a cycle", self),
        Arguments.of("big int deep", map("a", List.of(List.of(1, BigInteger.TWO.pow(64))))));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("refusedArguments")
  void argumentsRefused(String name, Object arguments) {
    refuses("tools/call", map("name", "x", "arguments", arguments));
  }

  @ParameterizedTest
  @MethodSource("notAnObject")
  void argumentsNotAnObject(Object arguments) {
    assertTrue(refuses("tools/call", map("name", "x", "arguments", arguments)).getMessage().contains("must be an object"));
  }

  static Stream<Object> notAnObject() {
    return Stream.of(List.of(), "a=b", 1, true, false, 0, JsonNodeFactory.instance.arrayNode(), JsonNodeFactory.instance.textNode(""));
  }

  static Stream<Arguments> refusedParams() {
    return Stream.of(
        Arguments.of("tools/list", map("name", "x")),
        Arguments.of("Tools/Call", map("name", "x")),
        Arguments.of("", map("name", "x")),
        Arguments.of(null, map("name", "x")),
        Arguments.of("tools/call", List.of(map("name", "x"))),
        Arguments.of("tools/call", null),
        Arguments.of("tools/call", "x"),
        Arguments.of("tools/call", JsonNodeFactory.instance.nullNode()),
        Arguments.of("tools/call", JsonNodeFactory.instance.missingNode()),
        Arguments.of("tools/call", map()),
        Arguments.of("tools/call", map("name", "")),
        Arguments.of("tools/call", map("name", 7)),
        Arguments.of("tools/call", map("name", true)),
        Arguments.of("tools/call", map("name", null)),
        Arguments.of("tools/call", map("name", "x\uD800")),
        Arguments.of("resources/read", map("uri", "\uDC00")),
        Arguments.of("resources/read", map("name", "x")),
        Arguments.of("tools/call", Collections.singletonMap(1, "y")),
        Arguments.of("tools/call", map("name", "x", "_meta\uD800", map())),
        Arguments.of("tools/call", map("name", "x", "NAME", "y")),
        Arguments.of("resources/read", map("uri", "u", "ur\u0131", "v")));
  }

  @ParameterizedTest
  @MethodSource("refusedParams")
  void paramsRefused(String method, Object params) {
    refuses(method, params);
  }

  @Test
  void absentOrNullArgumentsAreNull() throws Exception {
    byte[] absent = RequestDigest.of("tools/call", map("name", "get_weather"));
    assertArrayEquals(step5("tools/call", "get_weather", "null"), absent);
    assertArrayEquals(absent, RequestDigest.of("tools/call", map("name", "get_weather", "arguments", null)));
    assertArrayEquals(absent, RequestDigest.of("tools/call", tree("{\"name\":\"get_weather\",\"arguments\":null}")));
    assertFalse(Arrays.equals(absent, RequestDigest.of("tools/call", map("name", "get_weather", "arguments", map()))));
  }

  @Test
  void resourcesReadIgnoresArguments() throws Exception {
    byte[] want = RequestDigest.of("resources/read", map("uri", "file:///etc/motd"));
    assertArrayEquals(step5("resources/read", "file:///etc/motd", ""), want);
    assertArrayEquals(want, RequestDigest.of("resources/read", map("uri", "file:///etc/motd", "arguments", List.of(1, Double.NaN))));
    assertArrayEquals(want, RequestDigest.of("resources/read", map("uri", "file:///etc/motd", "Arguments", map(), "NAME", "x")));
  }

  /** The limits and the number rule bind the arguments only; a decoded digester may skip the rest (FORMAT.md). */
  @Test
  void ignoredMembersAreNotChecked() {
    byte[] want = RequestDigest.of("tools/call", map("name", "x", "arguments", map("a", 1)));
    Map<String, Object> self = new HashMap<>();
    self.put("self", self);
    for (Object meta : List.of(map("big", BigInteger.TWO.pow(64)), map("a", Double.NaN), map("a", "\uD800"), Set.of(1), nested(1000), map("NAME", "x"), self)) {
      assertArrayEquals(want, RequestDigest.of("tools/call", map("name", "x", "arguments", map("a", 1), "_meta", meta)));
    }
  }

  @Test
  void mapAndTreeAgree() throws Exception {
    String text = "{\"name\":\"gr\\u00fc\\u00dfe\",\"arguments\":{\"b\":[1.0,2e0,-0,1e-7,9007199254740991,12345678901234567890e-10],\"a\":{\"y\":null,\"x\":true,\"\\ud83d\\ude00\":\"\\uff61\"}},\"_meta\":{}}";
    ObjectMapper plain = new ObjectMapper();
    ObjectMapper big = new ObjectMapper().enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS, DeserializationFeature.USE_BIG_INTEGER_FOR_INTS);
    byte[] want = RequestDigest.of("tools/call", plain.readValue(text, Object.class));
    assertArrayEquals(want, RequestDigest.of("tools/call", plain.readTree(text)));
    assertArrayEquals(want, RequestDigest.of("tools/call", big.readValue(text, Object.class)));
    assertArrayEquals(want, RequestDigest.of("tools/call", big.readTree(text)));
    ObjectNode mixed = (ObjectNode) plain.readTree(text);
    Map<String, Object> params = map("name", "gr\u00FC\u00DFe", "arguments", mixed.get("arguments"));
    assertArrayEquals(want, RequestDigest.of("tools/call", params));
  }

  static JsonNode tree(String text) throws Exception {
    return new ObjectMapper().readTree(text);
  }

  /** Arguments nested levels deep, the arguments object being the first: {"a": [[...[]...]]}. */
  static Map<String, Object> nested(int levels) {
    Object inner = new ArrayList<>();
    for (int i = 0; i < levels - 2; i++) {
      inner = List.of(inner);
    }
    return map("a", inner);
  }

  @Test
  void depth() {
    args(nested(RequestDigest.MAX_DEPTH));
    assertTrue(refuses("tools/call", map("name", "x", "arguments", nested(RequestDigest.MAX_DEPTH + 1))).getMessage().contains("deeper than 64"));
    // objects as well as arrays, and a level-64 scalar is no level
    Map<String, Object> deep = map("a", 1);
    for (int i = 0; i < RequestDigest.MAX_DEPTH - 1; i++) {
      deep = map("a", deep);
    }
    args(deep);
    refuses("tools/call", map("name", "x", "arguments", map("a", deep)));
  }

  @Test
  void values() {
    // the arguments object, the list and its items: member names are not values
    args(map("a", Collections.nCopies(RequestDigest.MAX_VALUES - 2, 0)));
    assertTrue(
        refuses("tools/call", map("name", "x", "arguments", map("a", Collections.nCopies(RequestDigest.MAX_VALUES - 1, 0))))
            .getMessage()
            .contains("more than 100000"));
    Map<String, Object> wide = new HashMap<>();
    for (int i = 0; i < RequestDigest.MAX_VALUES - 1; i++) {
      wide.put(Integer.toString(i), null);
    }
    args(wide);
    wide.put("one more", null);
    refuses("tools/call", map("name", "x", "arguments", wide));
  }

  @Test
  void inputRequiredMethods() {
    assertEquals(Set.of("tools/call", "prompts/get", "resources/read"), RequestDigest.INPUT_REQUIRED_METHODS);
    assertEquals(9007199254740991L, RequestDigest.MAX_SAFE_INTEGER);
  }
}
