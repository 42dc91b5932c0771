package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import sealer.v1.SealerOuterClass.Reason;

/** The answers digest on values as a Java program holds them, as clients/python/tests/test_answers_digest.py. */
class AnswersDigestTest {
  static final String SEAT_12A = "78b1d6a4e4d9dce37020ec6d0e19f8118642bbf7e489f9e601e7c300a13c5628";
  static final ObjectMapper JSON = new ObjectMapper();

  static String hex(Object v) {
    return HexFormat.of().formatHex(AnswersDigest.of(v));
  }

  static Stream<Object> noDigest() {
    Map<String, Object> self = new HashMap<>();
    self.put("self", self);
    List<Object> holdsItself = new java.util.ArrayList<>();
    holdsItself.add(List.of(1, holdsItself));
    return Stream.of(
        List.of(),
        "seat",
        1,
        JsonNodeFactory.instance.arrayNode(),
        Map.of("seat", Double.NaN),
        Map.of("seat", Double.POSITIVE_INFINITY),
        Map.of("seat", BigInteger.TEN.pow(400)),
        Map.of("seat", new BigDecimal("1e400")),
        Map.of("seat", Set.of(1)),
        Map.of("seat", new byte[] {1}),
        Collections.singletonMap(1, Map.of("action", "accept")),
        Map.of("seat", Map.of("content", Map.of("\uD800", "x"))),
        Map.of("seat", new Object()),
        self,
        Map.of("a", holdsItself),
        JsonNodeFactory.instance.objectNode().put("a", Double.NaN));
  }

  @ParameterizedTest
  @MethodSource("noDigest")
  void whatJsonCannotHoldHasNoDigest(Object bad) {
    SealerException e = assertThrows(SealerException.class, () -> AnswersDigest.of(bad));
    assertEquals(Reason.REASON_INVALID_ARGUMENT, e.reason());
    assertFalse(e.rejected());
  }

  @Test
  void numbersAreDoubles() throws Exception {
    // 2^53 + 1 reads as 2^53, as JCS reads its text; 1e21 is written 1e+21.
    long two53 = 1L << 53;
    assertEquals(hex(Map.of("n", two53 + 1)), hex(Map.of("n", two53)));
    assertEquals(hex(Map.of("n", two53)), hex(Map.of("n", (double) two53)));
    assertEquals(hex(Map.of("n", BigInteger.TEN.pow(21))), hex(JSON.readValue("{\"n\":1E+21}", Object.class)));
    assertEquals(hex(Map.of("n", 1)), hex(Map.of("n", 1.0)));
    assertFalse(hex(Map.of("n", 1)).equals(hex(Map.of("n", true))));
    assertEquals(hex(Map.of("n", -0.0)), hex(Map.of("n", 0)));
    assertEquals(
        hex(JSON.readValue("{\"n\":{\"a\":1.0,\"b\":1e21,\"c\":-0,\"d\":0.000001,\"e\":1e-7,\"f\":9007199254740993}}", Object.class)),
        hex(JSON.readTree("{\"n\":{\"f\":9007199254740992,\"e\":1e-7,\"d\":1e-6,\"c\":0,\"b\":1e+21,\"a\":1}}")));
  }

  @Test
  void onlyEachResponsesOwnMetaIsLeftOut() throws Exception {
    Map<String, Object> seat = Map.of("action", "accept", "content", Map.of("seat", "12A"));
    assertEquals(SEAT_12A, hex(Map.of("seat", seat)));
    Map<String, Object> withMeta = new HashMap<>(seat);
    withMeta.put("_meta", Map.of("io.example/trace", "t-2"));
    assertEquals(SEAT_12A, hex(Map.of("seat", withMeta)));
    assertEquals(SEAT_12A, hex(JSON.valueToTree(Map.of("seat", withMeta))));
    assertFalse(SEAT_12A.equals(hex(Map.of("seat", seat, "_meta", Map.of("action", "accept")))));
    assertFalse(SEAT_12A.equals(hex(Map.of("seat", Map.of("action", "accept", "content", Map.of("seat", "12A", "_meta", 1))))));
    // The caller's values are not changed.
    assertEquals(Map.of("io.example/trace", "t-2"), withMeta.get("_meta"));
    // Absent, null and {} are one.
    String empty = hex(null);
    assertEquals(empty, hex(Map.of()));
    assertEquals(empty, hex(JsonNodeFactory.instance.nullNode()));
    assertEquals(empty, hex(JsonNodeFactory.instance.missingNode()));
    assertEquals(empty, hex(JSON.readTree("{}")));
    assertArrayEquals(AnswersDigest.of((Object) null), AnswersDigest.of(JSON.readTree("{}").get("inputResponses")));
  }

  /** No limit on nesting applies (FORMAT.md), and none overflows the stack: the walk keeps its own. */
  @Test
  void anyNesting() {
    Object deep = Arrays.asList((Object) null);
    for (int i = 0; i < 100_000; i++) {
      deep = List.of(deep, Map.of("k", i));
    }
    AnswersDigest.of(Map.of("deep", deep));
  }
}
