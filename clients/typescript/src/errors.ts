// The sealer's errors, typed by the reason of the google.rpc.ErrorInfo
// (domain sealer.mcp) it puts in every error: the proto's enum Reason, read
// from the gRPC status details or from the REST error body alike. What a
// reason means (whether it refuses the client's state, whether a retry may
// succeed) is the enum value's option rule in the proto, read here.
import { getOption } from "@bufbuild/protobuf";
import { Reason, ReasonSchema, rule } from "./gen/sealer/v1/sealer_pb.js";

export { Reason };

/** The reasons whose rule says so: the values of Reason with rejects (the MCP client must start the request over) or retryable (the same call may succeed later, with backoff). */
const rejections = new Set<Reason>();
const transient = new Set<Reason>();
for (const v of ReasonSchema.values) {
  const r = getOption(v, rule);
  if (r.rejects) rejections.add(v.number);
  if (r.retryable) transient.add(v.number);
}

/**
 * What went wrong on the way to the sealer, for an error without a reason
 * from it (UNSPECIFIED): what a log line says instead of UNSPECIFIED.
 * "unreachable" and "deadline" may pass; "tls" (a certificate, a CA, a
 * name, plaintext to a TLS port), "not_the_sealer" (another service
 * answered) and "http_status" below 500 never do.
 */
export type Failure = "unreachable" | "deadline" | "tls" | "not_the_sealer" | "http_status";

// How Node (undici, tls) and grpc words a failed handshake.
const tlsMarkers = /\b(ssl|tls|certificate|cert_|self[-_ ]signed|handshake|wrong_version_number|unable_to_verify|altname)/i;

function chainText(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, i = 0; e && i < 8; i++) {
    if (e instanceof Error) {
      parts.push(e.message, String((e as { code?: unknown }).code ?? ""));
      e = e.cause;
    } else {
      parts.push(String(e));
      break;
    }
  }
  return parts.join(" ");
}

/**
 * An error of the sealer or of the way to it. `reason` is the sealer's
 * (REASON_UNSPECIFIED when the sealer gave none: a network failure, a
 * deadline, a reply that is not the sealer's; then `failure` says which).
 * Every error is exactly one of `rejected`, `unavailable` and
 * `misconfigured`. The message never holds the state, the payload or the
 * principal.
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

  /** For an error without a reason: what went wrong on the way (undefined when the sealer gave a reason). */
  get failure(): Failure | undefined {
    if (this.reason !== Reason.UNSPECIFIED) return undefined;
    const text = `${this.message} ${chainText(this.cause)}`;
    if (tlsMarkers.test(text)) return "tls";
    const c = this.code;
    if (c !== undefined && c >= 100) return /not the sealer's|too large/.test(this.message) ? "not_the_sealer" : "http_status";
    if (c === 4 || /deadline/.test(this.message)) return "deadline"; // Code.DeadlineExceeded
    if (c === 14 || c === 1 || /unreachable/.test(this.message)) return "unreachable"; // Code.Unavailable, Code.Canceled
    return "not_the_sealer";
  }

  /** The reason's name, or for an error without one its failure: what a log line says. */
  get why(): string {
    const f = this.failure;
    if (f === undefined) return this.reasonName;
    return f === "http_status" ? `HTTP ${this.code}` : f;
  }

  /**
   * The state is refused: not authentic, expired, another principal's or
   * request's, already consumed (OUTCOME_CONFLICT too: by an open whose
   * inputResponses were other than this retry's), answered with other input
   * keys than its round asked, or of a flow past its deadline or out of
   * rounds (from open, or from a seal that continues it).
   */
  get rejected(): boolean {
    return rejections.has(this.reason);
  }

  /**
   * The same call may succeed later: the ledger or the key source could not
   * answer, a limit was hit, the sealer could not be reached or did not
   * answer in time, a proxy before it answered 502, 503 or 504, or
   * (IN_PROGRESS) a retry came while the first open's handler still ran.
   * Never a TLS failure nor another 4xx. A one-time state is not consumed
   * by an open that failed so (IN_PROGRESS: it was, by that first open,
   * whose answer a later retry gets).
   */
  get retryable(): boolean {
    if (transient.has(this.reason)) return true;
    const f = this.failure;
    return f === "unreachable" || f === "deadline" || (f === "http_status" && [502, 503, 504].includes(this.code ?? 0));
  }

  /** The sealer could not answer: unreachable, late, its ledger or keys down, a limit hit, an outcome not recorded yet, its own internal error. */
  get unavailable(): boolean {
    return this.retryable || this.reason === Reason.INTERNAL || (this.failure === "http_status" && (this.code ?? 0) >= 500);
  }

  /** Neither refused nor unavailable: credentials refused, TLS, an address that is not the sealer's, a call it finds invalid. */
  get misconfigured(): boolean {
    return !this.rejected && !this.unavailable;
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
