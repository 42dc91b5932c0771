package io.github.mcpsealer.mcp;

import java.security.SecureRandom;
import java.util.Base64;
import java.util.Map;
import sealer.v1.SealerOuterClass.OpenResponse;

/**
 * One MCP request on its way through the guard: what the guard learnt
 * before the server ran (the principal, the params as received, the state it
 * opened), and what the codec handed back on the way out (the plaintext state
 * to seal). It travels to the codec in the request's transport context,
 * under {@link #KEY}, and nowhere else.
 */
final class Round {
  /** The transport context's key of the round. */
  static final String KEY = "io.github.mcpsealer/round";

  private static final SecureRandom RANDOM = new SecureRandom();

  final String method;
  final Map<String, Object> params;
  final String principal;
  /** The request digest of params, when the guard computed it to open; null on a first round. */
  final byte[] digest;
  /** The state the retry carried, as it carried it; null on a first round. */
  final String presented;
  /** What the sealer opened for it; null on a first round. */
  final OpenResponse opened;
  /** The hand-off of the opened plaintext: what the server is given in place of the state. */
  private final String openToken;
  private final String plaintext;

  /** Set by the codec's seal: the plaintext to seal, and what stands for it until sealed. */
  private volatile String pending;
  private volatile String sealToken;
  /** Set by a handler ({@link SealedRequestState#oneTime}): this round's state opens once. */
  volatile boolean oneTime;
  /** Set when the guard answered in the handler's place (its state not sealed). */
  private volatile boolean answeredHere;

  Round(String method, Map<String, Object> params, String principal, byte[] digest, String presented, OpenResponse opened) {
    this.method = method;
    this.params = params;
    this.principal = principal;
    this.digest = digest;
    this.presented = presented;
    this.opened = opened;
    this.openToken = opened == null ? null : token();
    this.plaintext = opened == null ? null : strictUtf8(opened.getPayload().toByteArray());
  }

  /** The text of bytes that are UTF-8, or null: a payload that is not opens nothing. */
  private static String strictUtf8(byte[] b) {
    try {
      return java.nio.charset.StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(b)).toString();
    } catch (java.nio.charset.CharacterCodingException e) {
      return null;
    }
  }

  /** A value no client can guess, standing for a state inside this process only. */
  private static String token() {
    byte[] b = new byte[24];
    RANDOM.nextBytes(b);
    return "sealer-handoff." + Base64.getUrlEncoder().withoutPadding().encodeToString(b);
  }

  String openToken() {
    return openToken;
  }

  /** The opened plaintext, when presented is the hand-off this round gave the server. */
  String open(String presentedToServer) {
    if (openToken == null || presentedToServer == null) {
      return null;
    }
    return java.security.MessageDigest.isEqual(
            openToken.getBytes(java.nio.charset.StandardCharsets.US_ASCII),
            presentedToServer.getBytes(java.nio.charset.StandardCharsets.UTF_8))
        ? plaintext
        : null;
  }

  /** Keeps the plaintext to seal; the server sends what this returns until the guard seals it. */
  synchronized String handOver(String state) {
    if (!isWellFormed(state)) {
      throw new IllegalArgumentException("a requestState to seal that is not well-formed text (a lone surrogate)");
    }
    if (sealToken != null) {
      throw new IllegalStateException("one request returned two requestStates");
    }
    pending = state;
    sealToken = token();
    return sealToken;
  }

  private static boolean isWellFormed(String s) {
    try {
      java.nio.charset.StandardCharsets.UTF_8.newEncoder().encode(java.nio.CharBuffer.wrap(s));
      return true;
    } catch (java.nio.charset.CharacterCodingException e) {
      return false;
    }
  }

  String sealToken() {
    return sealToken;
  }

  String pending() {
    return pending;
  }

  /** Notes that the guard answered in the handler's place with answer, and returns it. */
  <T> T answeredHere(T answer) {
    answeredHere = true;
    return answer;
  }

  boolean answeredHere() {
    return answeredHere;
  }

  /** The tool's, prompt's name or the resource's uri, or "". */
  String target() {
    Object v = params.get("resources/read".equals(method) ? "uri" : "name");
    return v instanceof String s ? s : "";
  }
}
