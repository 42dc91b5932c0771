package io.github.mcpsealer;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The request digest of FORMAT.md, "Request digest": the 32 bytes that bind
 * a requestState to the MCP request that produced it, so that the client's
 * retry of that request (new id, {@code _meta}, {@code inputResponses} and
 * {@code requestState} added) opens the state and any other request does
 * not.
 *
 * <p>It reads params already decoded, as FORMAT.md, "Params as text, params
 * decoded" allows: a Jackson tree, or the {@code Map} a JSON parser builds
 * (numbers as Integer, Long, BigInteger, Double or BigDecimal, whichever
 * the mapper makes: each is read as the double its text reads as). What
 * only the text shows (its size, duplicate member names, invalid UTF-8, and
 * anything JCS cannot write outside the salient members) is the JSON
 * decoder's to refuse; everything else is refused exactly as the Go core
 * (mcpdigest) and the Python and TypeScript clients refuse it, so that one
 * request has one digest on every path.
 */
public final class RequestDigest {
  private RequestDigest() {}

  /** The methods whose requests may carry a requestState, and so have a digest (R9). */
  public static final Set<String> INPUT_REQUIRED_METHODS = Set.of("tools/call", "prompts/get", "resources/read");

  /** The deepest nesting of the arguments: 64 levels, the arguments object being the first. */
  public static final int MAX_DEPTH = 64;

  /** The most values the arguments may hold, the arguments object included; member names are not values. */
  public static final int MAX_VALUES = 100_000;

  /** The largest magnitude of a number in the arguments, 2^53 - 1: beyond it doubles cannot tell integers apart. */
  public static final long MAX_SAFE_INTEGER = Jcs.MAX_SAFE_INTEGER;

  /** The member naming the target, and the one holding the arguments (null for none). */
  private record Salient(String target, String arguments) {
    List<String> names() {
      return arguments == null ? List.of(target) : List.of(target, arguments);
    }
  }

  private static final Map<String, Salient> SALIENT =
      Map.of(
          "tools/call", new Salient("name", "arguments"),
          "prompts/get", new Salient("name", "arguments"),
          "resources/read", new Salient("uri", null));

  private static final byte[] LABEL = "mcp-sealer/v1 request\0".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] NULL = "null".getBytes(StandardCharsets.US_ASCII);

  /**
   * The 32-byte digest of FORMAT.md for the method and the params as an MCP
   * server decoded them: a Jackson tree, or the Map, List, String, Number,
   * Boolean and null of a JSON parser (the two may mix).
   *
   * @throws SealerException (REASON_INVALID_ARGUMENT) for whatever the core
   *     refuses: another method; params that are not an object; a member
   *     whose name is a look-alike of a salient one ({@link LookAlike}); a
   *     target that is not a non-empty string; arguments that are not an
   *     object or null; arguments nested deeper than {@link #MAX_DEPTH},
   *     holding more than {@link #MAX_VALUES} values, or a number beyond
   *     ±{@link #MAX_SAFE_INTEGER} (send such numbers as strings); and, in
   *     the salient members, what JSON text cannot hold (a lone surrogate, a
   *     number that is not finite, a member name that is not a string, any
   *     other Java object). Other members are not read.
   */
  public static byte[] of(String method, Object params) {
    Salient s = salient(method);
    if (!Jcs.isObject(params)) {
      throw SealerException.invalidArgument("params must be a JSON object");
    }
    Object target = null;
    Object arguments = null;
    Iterable<? extends Map.Entry<?, ?>> members =
        params instanceof JsonNode node ? node.properties() : ((Map<?, ?>) params).entrySet();
    for (Map.Entry<?, ?> m : members) {
      if (!(m.getKey() instanceof String name)) {
        throw SealerException.invalidArgument("params member names must be strings");
      }
      if (!Jcs.wellFormed(name)) {
        throw SealerException.invalidArgument("params member names must be valid Unicode");
      }
      checkName(s, name);
      if (name.equals(s.target())) {
        target = m.getValue();
      } else if (name.equals(s.arguments())) {
        arguments = m.getValue();
      }
    }
    String t = target instanceof JsonNode n && n.isTextual() ? n.textValue() : target instanceof String str ? str : null;
    if (t == null || t.isEmpty() || !Jcs.wellFormed(t)) {
      throw SealerException.invalidArgument("params." + s.target() + " must be a non-empty string");
    }
    if (s.arguments() == null) {
      return digest(method, t, new byte[0]);
    }
    if (Jcs.isNull(arguments)) {
      return digest(method, t, NULL); // absent or null
    }
    if (!Jcs.isObject(arguments)) {
      throw SealerException.invalidArgument("params." + s.arguments() + " must be an object");
    }
    Jcs w = Jcs.arguments("params." + s.arguments(), MAX_DEPTH, MAX_VALUES);
    w.write(arguments, null);
    return digest(method, t, w.bytes());
  }

  /** {@link #of(String, Object)} for params held as a Jackson tree. */
  public static byte[] of(String method, JsonNode params) {
    return of(method, (Object) params);
  }

  private static Salient salient(String method) {
    Salient s = method == null ? null : SALIENT.get(method);
    if (s == null) {
      throw SealerException.invalidArgument("unsupported method " + Jcs.quoted(String.valueOf(method)));
    }
    return s;
  }

  /**
   * Refuses a params member whose name is a look-alike of a salient one.
   * Only the members of params are checked, not those of objects inside them.
   */
  private static void checkName(Salient s, String name) {
    for (String want : s.names()) {
      if (LookAlike.lookAlike(name, want)) {
        throw SealerException.invalidArgument(
            "params member " + Jcs.quoted(name) + " is a look-alike of " + Jcs.quoted(want));
      }
    }
  }

  /** Step 5: SHA-256 of the label and the three parts, each after its length in bytes as a u32. */
  private static byte[] digest(String method, String target, byte[] args) {
    MessageDigest h = sha256();
    h.update(LABEL);
    for (byte[] part : new byte[][] {method.getBytes(StandardCharsets.UTF_8), target.getBytes(StandardCharsets.UTF_8), args}) {
      h.update(ByteBuffer.allocate(4).putInt(part.length).array());
      h.update(part);
    }
    return h.digest();
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e); // Java SE requires it
    }
  }
}
