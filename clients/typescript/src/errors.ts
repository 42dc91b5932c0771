// The sealer's errors, typed by the reason of the google.rpc.ErrorInfo
// (domain sealer.mcp) it puts in every error: the proto's enum Reason, read
// from the gRPC status details or from the REST error body alike.
import { Reason } from "./gen/sealer/v1/sealer_pb.js";

export { Reason };

/** The reasons that refuse a state: the MCP client must start the request over. */
const rejections = new Set<Reason>([
  Reason.INVALID_STATE,
  Reason.EXPIRED,
  Reason.PRINCIPAL_MISMATCH,
  Reason.REQUEST_MISMATCH,
  Reason.ALREADY_CONSUMED,
  Reason.INPUT_MISMATCH,
  Reason.FLOW_EXPIRED,
  Reason.FLOW_EXHAUSTED,
]);

/** The reasons after which the same call may succeed later: the sealer or its ledger could not answer now. */
const transient = new Set<Reason>([
  Reason.LEDGER_UNAVAILABLE,
  Reason.KEYS_UNAVAILABLE,
  Reason.RESOURCE_EXHAUSTED,
]);

/**
 * An error of the sealer or of the way to it. `reason` is the sealer's
 * (REASON_UNSPECIFIED when the sealer gave none: a network failure, a
 * deadline, a reply that is not the sealer's). The message never holds the
 * state, the payload or the principal.
 */
export class SealerError extends Error {
  override name = "SealerError";
  constructor(
    /** Why, as the sealer said it (Reason.UNSPECIFIED when it did not). */
    readonly reason: Reason,
    message: string,
    /** The gRPC status code (connect's Code) or the HTTP status, when there was one. */
    readonly code?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  /** The reason's name as the sealer sends it: "EXPIRED", "LEDGER_UNAVAILABLE"... ("UNSPECIFIED" when none). */
  get reasonName(): string {
    return Reason[this.reason] ?? "UNSPECIFIED";
  }

  /**
   * The state is refused: not authentic, expired, another principal's or
   * request's, already consumed, answered with other input keys than its
   * round asked, or of a flow past its deadline or out of rounds (from
   * open, or from a seal that continues it).
   */
  get rejected(): boolean {
    return rejections.has(this.reason);
  }

  /**
   * The same call may succeed later: the ledger or the key source could not
   * answer, a limit was hit, or the sealer could not be reached in time. A
   * one-time state is not consumed by an open that failed so.
   */
  get retryable(): boolean {
    return transient.has(this.reason) || this.reason === Reason.UNSPECIFIED;
  }
}

/** Whether err refuses the state to the MCP client (SealerError.rejected). */
export function rejected(err: unknown): boolean {
  return err instanceof SealerError && err.rejected;
}

/** Reads a reason as the sealer sends it, the name without REASON_; anything else is UNSPECIFIED. */
export function parseReason(name: unknown): Reason {
  if (typeof name !== "string" || name === "UNSPECIFIED" || !Object.hasOwn(Reason, name)) return Reason.UNSPECIFIED;
  const r = (Reason as unknown as Record<string, unknown>)[name];
  return typeof r === "number" ? (r as Reason) : Reason.UNSPECIFIED;
}
