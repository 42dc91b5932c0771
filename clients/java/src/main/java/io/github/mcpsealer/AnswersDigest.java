package io.github.mcpsealer;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;

/**
 * The answers digest of a retry's {@code inputResponses} (FORMAT.md,
 * "Recorded outcomes", "The answers digest"), as mcpdigest.Answers computes
 * it from text and answers_digest of the Python client from decoded values.
 *
 * <p>An open that records its outcome sends it, and a retry that answers
 * otherwise than the open that consumed its state is refused
 * (OUTCOME_CONFLICT) instead of getting that open's answer: round 2 of a
 * booking retried with seat {@code 1A} after it booked {@code 12A} is never
 * told "booked 12A".
 */
public final class AnswersDigest {
  private AnswersDigest() {}

  private static final byte[] LABEL = "mcp-sealer/v1 answers\0".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] EMPTY = "{}".getBytes(StandardCharsets.US_ASCII);

  /**
   * The 32-byte answers digest of an {@code inputResponses} value as decoded
   * (a Jackson tree, or a Map of a JSON parser): SHA-256, under its own label,
   * of the RFC 8785 form of the object with the member {@code _meta} of each
   * of its members' values removed. Absent ({@code null}, a MissingNode),
   * JSON null and {@code {}} have one digest. Numbers are read as the
   * doubles JCS writes, whatever their size: answers that differ only
   * beyond a double's precision have one digest. The value is not changed.
   *
   * @throws SealerException (REASON_INVALID_ARGUMENT) for what has no
   *     digest: anything but an object or null, and what JSON text cannot
   *     hold (a number that is not finite or does not fit a double, a lone
   *     surrogate, a member name that is not a string, any other Java
   *     object, a Map or List that holds itself). No limit on nesting
   *     applies. Duplicate names and invalid UTF-8 are the JSON decoder's to
   *     refuse.
   */
  public static byte[] of(Object inputResponses) {
    if (Jcs.isNull(inputResponses) || (inputResponses instanceof JsonNode n && n.isMissingNode())) {
      return digest(EMPTY);
    }
    if (!Jcs.isObject(inputResponses)) {
      throw SealerException.invalidArgument("inputResponses must be an object");
    }
    Jcs w = Jcs.answers("inputResponses");
    w.write(inputResponses, "_meta"); // each response's own metadata, not an answer
    return digest(w.bytes());
  }

  /** {@link #of(Object)} for inputResponses held as a Jackson tree. */
  public static byte[] of(JsonNode inputResponses) {
    return of((Object) inputResponses);
  }

  private static byte[] digest(byte[] canonical) {
    MessageDigest h = RequestDigest.sha256();
    h.update(LABEL);
    h.update(canonical);
    return h.digest();
  }
}
