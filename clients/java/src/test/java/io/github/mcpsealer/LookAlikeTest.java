package io.github.mcpsealer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import sealer.v1.SealerOuterClass.Reason;

/**
 * The look-alike rule (FORMAT.md, "Request digest", step 3), on the cases of
 * mcpdigest/lookalike_test.go, FORMAT.md's list and the Python client's
 * tests: ſ, the Kelvin sign, İ, ı, fullwidth and other compatibility forms,
 * ligatures, and the names no folding takes to a salient one.
 */
class LookAlikeTest {
  @ParameterizedTest(name = "lookAlike({0}, {1}) = {2}")
  @CsvSource({
    // mcpdigest/lookalike_test.go, TestLookAlike
    "requestState, requestState, false",
    "requeststate, requestState, true",
    "reque\uFB06State, requestState, true", // U+FB06, the ligature st
    "\uFF52\uFF45\uFF51\uFF55\uFF45\uFF53\uFF54\uFF33\uFF54\uFF41\uFF54\uFF45, requestState, true",
    "\uFF50\uFF41\uFF52\uFF41\uFF4D\uFF53, params, true",
    "param\u017F, params, true",
    "\u1D56arams, params, true", // a modifier letter, NFKC to p
    "ur\u0130, uri, true",
    "\uFF55\uFF52\u0131, uri, true",
    "uri\u0307, uri, false", // i U+0307, İ's full lower case: another name
    "p\u0430rams, params, false", // Cyrillic a
    "params_, params, false",
    "request_state, requestState, false",
    // FORMAT.md, step 3
    "NAME, name, true",
    "Arguments, arguments, true",
    "URI, uri, true",
    "argument\u017F, arguments, true",
    "ur\u0131, uri, true",
    "\uFF41\uFF52\uFF47\uFF55\uFF4D\uFF45\uFF4E\uFF54\uFF53, arguments, true",
    "\u2115ame, name, true", // double-struck N
    "\u1D58ri, uri, true", // modifier u
    "n\u0430me, name, false", // Cyrillic a
    // the Kelvin sign and the other simple mappings
    "\u212Aind, kind, true",
    "\u212AIND, kind, true",
    "\u017Fize, size, true",
    // ligatures and ß: full case folding
    "\uFB01le, file, true", // U+FB01, fi
    "\uFB00, ff, true",
    "stra\u00DFe, strasse, true",
    "STRA\u1E9EE, strasse, true", // capital sharp s: folds to ss, upper then lower case does not
    "argument\u00DF, arguments, false", // argumentss
    "argumen\uFB06, arguments, false", // argumenst
    // other compatibility forms
    "\u3381me, name, true", // U+3381, the square nA
    "\uD835\uDC1Arguments, arguments, true", // mathematical bold a
    "\u24E4\u24E1\u24D8, uri, true", // circled uri
    "ur\u2170, uri, true", // small roman numeral one
    "ur\uD835\uDEA4, uri, true", // mathematical italic dotless i: NFKC to U+0131
    "\uFF55\uFF52\u0130, uri, true",
    "name\u0301, name, false", // NFKC composes it
    "name\u200B, name, false", // a zero width space: NFKC keeps it
    "UR\u0130\u0307, uri, false", // longer than uri
    "names, name, false",
    "nam, name, false",
  })
  void lookAlike(String name, String salient, boolean want) {
    assertEquals(want, LookAlike.lookAlike(name, salient), () -> "fold: " + LookAlike.fold(name));
    if (want) {
      assertEquals(salient.toLowerCase(java.util.Locale.ROOT), LookAlike.fold(name));
    }
  }

  @ParameterizedTest(name = "fold({0}) = {1}")
  @CsvSource({
    "NAME, name",
    "\u017F\u0130\u0131\u212A, siik",
    "\uFF21\uFF22, ab",
    "\u00DF, ss",
    "\u1E9E, ss",
    "\uFB06, st",
    "\uD835\uDEA4, i", // NFKC makes U+0131, which step 5 takes to i
    "I\u0307, i\u0307", // NFKC composes U+0130, whose full folding is i U+0307
  })
  void fold(String name, String want) {
    assertEquals(want, LookAlike.fold(name));
    assertEquals(want, LookAlike.fold(LookAlike.fold(name)), "folding twice");
  }

  /** The rule binds the members of params, per method, and nothing inside them. */
  @ParameterizedTest(name = "{0} {1}: refused {2}")
  @CsvSource({
    "tools/call, NAME, true",
    "tools/call, nAmE, true",
    "prompts/get, ARGUMENTS, true",
    "resources/read, URI, true",
    "resources/read, ur\u0131, true",
    "resources/read, ur\u0130, true",
    "tools/call, URI, false", // not salient for tools/call
    "resources/read, Arguments, false", // resources/read has no arguments
    "resources/read, NAME, false",
    "resources/read, \u017F, false",
    "tools/call, _meta, false",
  })
  void paramsMembers(String method, String name, boolean refused) {
    String target = method.equals("resources/read") ? "uri" : "name";
    Map<String, Object> params = new LinkedHashMap<>();
    params.put(target, "x");
    params.put(name, "y");
    if (refused) {
      SealerException e = assertThrows(SealerException.class, () -> RequestDigest.of(method, params));
      assertEquals(Reason.REASON_INVALID_ARGUMENT, e.reason());
      assertTrue(e.getMessage().contains("look-alike"), e.getMessage());
    } else {
      RequestDigest.of(method, params);
    }
    // Inside the arguments, a look-alike is an argument like any other.
    if (!method.equals("resources/read")) {
      RequestDigest.of(method, Map.of("name", "x", "arguments", Map.of(name, 1)));
    }
  }

  /** A long run of combining marks is never normalized: NFKC's cost grows with its square (some 20 s for this one). */
  @Test
  void longNamesAreNotFolded() {
    String name = "name" + "\u0301\u0316".repeat(100_000);
    assertFalse(LookAlike.lookAlike(name, "name"));
    RequestDigest.of("tools/call", Map.of("name", "x", name, 1));
  }
}
