package io.github.mcpsealer;

import sealer.v1.SealerOuterClass.Reason;
import sealer.v1.SealerOuterClass.ReasonRule;

/**
 * An error of the sealer or of the way to it: the one exception of this
 * package, typed by the reason the sealer puts in every error.
 *
 * <p>{@link #reason()} is the proto's enum {@code sealer.v1.Reason}, read from
 * the {@code google.rpc.ErrorInfo} (domain {@code sealer.mcp}) of a gRPC
 * status or from the REST error body alike; {@code REASON_UNSPECIFIED} when
 * the sealer gave none (a network failure, a deadline, an answer that is not
 * the sealer's), and then {@link #failure()} says which. What each reason means
 * to a caller is the option {@code rule} on its value in the proto, read here
 * from the descriptor: no copy of it is kept by hand.
 *
 * <p>Every error is exactly one of {@link #rejected()} (the state is
 * refused), {@link #unavailable()} (the sealer could not answer now) and
 * {@link #misconfigured()} (the way to the sealer is wrong). The message
 * never holds the state, the payload or the principal.
 */
public final class SealerException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Why a call failed without a reason from the sealer. */
  public enum Cause {
    /** The sealer answered with a reason. */
    NONE,
    /** No connection, or it broke: may succeed later. */
    UNREACHABLE,
    /** No answer in time: may succeed later. */
    DEADLINE,
    /** The TLS handshake failed (certificate, CA, name, plaintext to a TLS port): never retried. */
    TLS,
    /** An answer that is not the sealer's (another service, a proxy's page). */
    NOT_THE_SEALER,
    /** An HTTP status without the sealer's error body: a 5xx from a proxy may pass, a 4xx never. */
    HTTP_STATUS,
  }

  /** The sealer's reason, or REASON_UNSPECIFIED. */
  private final Reason reason;
  /** Why, without a reason; NONE with one. */
  private final Cause cause;
  /** The gRPC status code or the HTTP status, or 0. */
  private final int code;

  /**
   * An error of the sealer's reason, or of a cause on the way to it.
   *
   * @param reason the sealer's reason, or {@code REASON_UNSPECIFIED}
   * @param cause why, when the sealer gave no reason ({@link Cause#NONE} when it did)
   * @param code the gRPC status code or the HTTP status, or 0 when there was none
   * @param message what failed, without the state, the payload or the principal
   */
  public SealerException(Reason reason, Cause cause, int code, String message) {
    super(message);
    this.reason = reason;
    this.cause = cause;
    this.code = code;
  }

  /**
   * A call this client refuses before sending it.
   *
   * @param message what is wrong, without the state, the payload, the principal or a token
   * @return an error of reason {@code REASON_INVALID_ARGUMENT}
   */
  public static SealerException invalidArgument(String message) {
    return new SealerException(Reason.REASON_INVALID_ARGUMENT, Cause.NONE, 0, "sealer: invalid argument: " + message);
  }

  /** A failure on the way to the sealer, without a reason from it. */
  static SealerException failure(Cause cause, int code, String message) {
    return new SealerException(Reason.REASON_UNSPECIFIED, cause, code, message);
  }

  /**
   * A call given up because its thread was interrupted: told as a deadline
   * (no answer in time), with the thread's interrupt flag set again.
   */
  static SealerException interrupted() {
    Thread.currentThread().interrupt();
    return failure(Cause.DEADLINE, 0, "sealer: interrupted before an answer");
  }

  /**
   * The reason an ErrorInfo names, as the sealer sends it ({@code EXPIRED}) or
   * with its prefix ({@code REASON_EXPIRED}); {@code REASON_UNSPECIFIED} for
   * anything else.
   */
  static Reason reasonOf(String text) {
    if (text == null || text.isEmpty()) {
      return Reason.REASON_UNSPECIFIED;
    }
    String name = text.startsWith("REASON_") ? text : "REASON_" + text;
    for (Reason r : Reason.values()) {
      if (r != Reason.UNRECOGNIZED && r.name().equals(name)) {
        return r;
      }
    }
    return Reason.REASON_UNSPECIFIED;
  }

  /**
   * The sealer's reason.
   *
   * @return the reason, or {@code REASON_UNSPECIFIED} when the sealer gave none
   */
  public Reason reason() {
    return reason;
  }

  /**
   * Why the call failed when the sealer gave no reason.
   *
   * @return the cause; {@link Cause#NONE} when the sealer gave a reason
   */
  public Cause failure() {
    return cause;
  }

  /**
   * The status of the failed call.
   *
   * @return the gRPC status code or the HTTP status, or 0 when there was none
   */
  public int code() {
    return code;
  }

  /**
   * What a log line says of the error.
   *
   * @return the reason's name without its prefix ({@code EXPIRED}), else
   *     {@code HTTP 502} for an HTTP status, else the cause ({@code unreachable})
   */
  public String why() {
    if (reason != Reason.REASON_UNSPECIFIED) {
      return reason.name().substring("REASON_".length());
    }
    if (cause == Cause.HTTP_STATUS) {
      return "HTTP " + code;
    }
    return cause.name().toLowerCase(java.util.Locale.ROOT);
  }

  private ReasonRule rule() {
    return reason.getValueDescriptor().getOptions().getExtension(sealer.v1.SealerOuterClass.rule);
  }

  /**
   * The state is refused: not authentic, expired, another principal's or
   * request's, already consumed, answered with other input keys than its
   * round asked or other answers than the open that ran the handler, or of a
   * flow past its deadline or out of rounds.
   *
   * @return true when the MCP server answers invalid params and the client starts over
   */
  public boolean rejected() {
    return reason != Reason.REASON_UNSPECIFIED && rule().getRejects();
  }

  /**
   * The same call may succeed later: the ledger or the key source could not
   * answer, a limit was hit, the state's first open still runs its handler
   * (IN_PROGRESS), the sealer could not be reached or did not answer in
   * time, or a proxy before it answered 502, 503 or 504. Never a TLS failure
   * or another 4xx.
   *
   * @return true when the same call may be tried again, with backoff
   */
  public boolean retryable() {
    if (reason != Reason.REASON_UNSPECIFIED) {
      return rule().getRetryable();
    }
    return cause == Cause.UNREACHABLE
        || cause == Cause.DEADLINE
        || (cause == Cause.HTTP_STATUS && (code == 502 || code == 503 || code == 504));
  }

  /**
   * The sealer could not answer now: retryable, or its own internal error, or a 5xx.
   *
   * @return true when the failure is the sealer's or the network's, for now
   */
  public boolean unavailable() {
    return retryable() || reason == Reason.REASON_INTERNAL || (cause == Cause.HTTP_STATUS && code >= 500);
  }

  /**
   * Neither a refused state nor a passing outage: the credentials refused, a
   * TLS failure, an address that is not the sealer's, a call the sealer finds
   * invalid. Retrying cannot help.
   *
   * @return true when neither {@link #rejected()} nor {@link #unavailable()}
   */
  public boolean misconfigured() {
    return !rejected() && !unavailable();
  }

  @Override
  public String toString() {
    return "SealerException(" + why() + ", " + getMessage() + ")";
  }
}
