package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import sealer.v1.SealerOuterClass.Reason;

/**
 * The request digest and the answers digest against the repository's
 * vectors (sealer/testdata/vectors.json, member {@code digests}, and
 * sealer/testdata/outcomes.json, member {@code answers}; README.md beside
 * them), on params decoded as an MCP server decodes them, both as a Map and
 * as a Jackson tree: every "ok" vector gives its digest, every "refused"
 * one is refused, by the JSON decoder or by the digest. A {@code textOnly}
 * refusal depends on the params as text, which a digester of decoded params
 * MAY accept (FORMAT.md, "Params as text, params decoded"); the test's name
 * says which this one does.
 */
class DigestVectorsTest {
  static final Path TESTDATA = Path.of(System.getProperty("basedir", ".")).resolve("../../sealer/testdata").normalize();

  /**
   * The decoder of the test: Jackson's defaults, as the MCP SDK reads
   * params, reading the whole text (params arrive inside a message, so
   * nothing trails them), with its nesting bound raised past the vector of
   * 1,000 levels in _meta, which the digest does not read (a bound of the
   * decoder, not of the digest, as the Python test raises its recursion
   * limit).
   */
  static final ObjectMapper DECODER = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

  static {
    DECODER.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(10_000).build());
  }

  static final HexFormat HEX = HexFormat.of();

  static List<JsonNode> vectors(String file, String member) throws IOException {
    List<JsonNode> out = new ArrayList<>();
    new ObjectMapper().readTree(TESTDATA.resolve(file).toFile()).get(member).forEach(out::add);
    return out;
  }

  /** Text as a server receives it: strict UTF-8 (null when it is not), or the JSON string as it is. */
  static String text(JsonNode v, String member) {
    if (v.has(member + "Hex")) {
      try {
        return StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)
            .decode(ByteBuffer.wrap(HEX.parseHex(v.get(member + "Hex").asText())))
            .toString();
      } catch (CharacterCodingException e) {
        return null;
      }
    }
    return v.has(member) ? v.get(member).asText() : null;
  }

  /** What a digester returns on decoded params: the hex digest, or null when the decoder or the digester refused. */
  static String verdict(String text, Function<Object, byte[]> digest, boolean tree) {
    Object params;
    try {
      params = tree ? DECODER.readTree(text) : DECODER.readValue(text, Object.class);
    } catch (IOException e) {
      return null; // refused by the decoder
    }
    try {
      return HEX.formatHex(digest.apply(params));
    } catch (SealerException e) {
      assertEquals(Reason.REASON_INVALID_ARGUMENT, e.reason(), e.toString());
      return null;
    }
  }

  @TestFactory
  Stream<DynamicTest> requestDigestVectors() throws IOException {
    List<JsonNode> vs = vectors("vectors.json", "digests");
    int ok = 0;
    int refused = 0;
    int textOnlyAccepted = 0;
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode v : vs) {
      String method = v.get("method").asText();
      String text = text(v, "params");
      String map = text == null ? null : verdict(text, p -> RequestDigest.of(method, p), false);
      String tree = text == null ? null : verdict(text, p -> RequestDigest.of(method, p), true);
      String want = v.get("want").asText();
      boolean textOnly = v.path("textOnly").asBoolean();
      String label = want;
      if (textOnly) {
        label = "textOnly, " + (map == null ? "refused" : "accepted") + " decoded";
        textOnlyAccepted += map == null ? 0 : 1;
      }
      if (want.equals("ok")) {
        ok++;
      } else {
        refused++;
      }
      tests.add(
          DynamicTest.dynamicTest(
              v.get("name").asText() + " [" + label + "]",
              () -> {
                if (want.equals("ok")) {
                  assertEquals(v.get("digest").asText(), map, "as a Map");
                  assertEquals(v.get("digest").asText(), tree, "as a tree");
                } else if (!textOnly) {
                  assertNull(map, "as a Map: want refused");
                  assertNull(tree, "as a tree: want refused");
                } else {
                  // Either verdict conforms; both forms decide alike.
                  assertEquals(map == null, tree == null, "a Map and a tree disagree");
                }
              }));
    }
    System.out.printf(
        "request digest vectors: %d (%d ok, %d refused; %d textOnly accepted decoded)%n",
        vs.size(), ok, refused, textOnlyAccepted);
    assertTrue(ok >= 20 && refused >= 20, "too few vectors of a verdict");
    return tests.stream();
  }

  @TestFactory
  Stream<DynamicTest> answersDigestVectors() throws IOException {
    List<JsonNode> vs = vectors("outcomes.json", "answers");
    long ok = vs.stream().filter(v -> v.get("want").asText().equals("ok")).count();
    System.out.printf("answers digest vectors: %d (%d ok, %d refused)%n", vs.size(), ok, vs.size() - ok);
    assertTrue(ok >= 15 && vs.size() - ok >= 8, "too few vectors of a verdict");
    return vs.stream()
        .map(
            v ->
                DynamicTest.dynamicTest(
                    v.get("name").asText() + " [" + v.get("want").asText() + "]",
                    () -> {
                      boolean absent = !v.has("inputResponses") && !v.has("inputResponsesHex");
                      String text = text(v, "inputResponses");
                      String map = absent ? HEX.formatHex(AnswersDigest.of((Object) null)) : text == null ? null : verdict(text, AnswersDigest::of, false);
                      String tree = absent ? HEX.formatHex(AnswersDigest.of((JsonNode) null)) : text == null ? null : verdict(text, AnswersDigest::of, true);
                      String name = v.get("name").asText();
                      if (v.get("want").asText().equals("ok")) {
                        String want = v.get("digest").asText();
                        assertEquals(want, map, "as a Map");
                        assertEquals(want, tree, "as a tree");
                        // The canonical form of the vector is the object the digest reads.
                        assertEquals(want, verdict(v.get("canonical").asText(), AnswersDigest::of, false), "of canonical");
                      } else if (name.equals("duplicate names") || name.equals("duplicate _meta")) {
                        // The decoder kept the last of the names: what only the text shows.
                        assertTrue(map != null && tree != null, "a decoded value without duplicates has a digest");
                      } else {
                        assertNull(map, "as a Map: want refused");
                        assertNull(tree, "as a tree: want refused");
                      }
                    }));
  }

  @Test
  void formatMdExamples() {
    assertEquals(
        "a4a707f6c0aa07d0ff3d31f6008196705b904aa5e053f0d704cda5a9f171aa48",
        HEX.formatHex(RequestDigest.of("tools/call", java.util.Map.of("name", "get_weather", "arguments", java.util.Map.of("location", "New York")))));
    assertEquals(
        "7c5e1cee539b220a9fe70049e081ca41ca8b1854c3389d5078b97fbadaf4140a", HEX.formatHex(AnswersDigest.of((Object) null)));
  }
}
