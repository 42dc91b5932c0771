// What the MCP client sees of a sealer failure (README, "What the MCP
// client sees of a failure"): a bare message, a code and a data.reason,
// never the sealer's address, message or credentials, which go to onError.
import { Reason } from "./gen/sealer/v1/sealer_pb.js";
import { SealerError } from "./errors.js";
import { IN_PROGRESS_ERROR, OUTCOME_CONFLICT_ERROR } from "./outcomes.js";

/**
 * What the MCP client sees when a seal or an open fails because the sealer
 * could not answer: the message of SealFailed and of
 * SEALER_UNAVAILABLE_ERROR.
 */
export const SEALER_UNAVAILABLE = "requestState sealer unavailable";
/** See SEALER_UNAVAILABLE: the way to the sealer is wrong (credentials, TLS, address). */
export const SEALER_MISCONFIGURED = "requestState sealer misconfigured";

/** A JSON-RPC error as states.fetch answers it in place of the SDK's -32602. */
export type AnswerError = Readonly<{ code: number; message: string; data: Readonly<{ reason: string }> }>;

/**
 * The JSON-RPC error an open gets when the sealer could not answer
 * (SealerError.unavailable: unreachable, past the deadline, a 5xx, its
 * ledger or keys down, a limit hit), after retries within deadlineMs. Its
 * data.reason is "sealer_unavailable", as the Python middleware's.
 */
export const SEALER_UNAVAILABLE_ERROR: AnswerError = Object.freeze({
  code: -32603,
  message: SEALER_UNAVAILABLE,
  data: Object.freeze({ reason: "sealer_unavailable" }),
});

/**
 * The JSON-RPC error an open gets when the way to the sealer is wrong
 * (SealerError.misconfigured: credentials refused, TLS, a 4xx or an answer
 * that is not the sealer's), at once. Its data.reason is
 * "sealer_misconfigured", as the Python middleware's.
 */
export const SEALER_MISCONFIGURED_ERROR: AnswerError = Object.freeze({
  code: -32603,
  message: SEALER_MISCONFIGURED,
  data: Object.freeze({ reason: "sealer_misconfigured" }),
});

/**
 * The JSON-RPC error states.fetch answers for an open of the state the
 * client sent that failed with err, in place of the SDK's -32602; undefined
 * leaves the -32602: a refused state, INVALID_ARGUMENT (the state's or the
 * request's own fault: its size, its input keys), or anything that is not
 * a SealerError. IN_PROGRESS_ERROR and OUTCOME_CONFLICT_ERROR (a refused
 * state, told apart) only for a recording open.
 */
export function openFailure(err: unknown, recording: boolean): AnswerError | undefined {
  if (recording && err instanceof SealerError && err.reason === Reason.OUTCOME_CONFLICT) return OUTCOME_CONFLICT_ERROR;
  if (!(err instanceof SealerError) || err.rejected || err.reason === Reason.INVALID_ARGUMENT) return undefined;
  if (recording && err.reason === Reason.IN_PROGRESS) return IN_PROGRESS_ERROR;
  return err.unavailable ? SEALER_UNAVAILABLE_ERROR : SEALER_MISCONFIGURED_ERROR;
}

/** The error mint throws for a sealer failure: a bare message, the SealerError as cause. */
export class SealFailed extends Error {
  override name = "SealFailed";
  constructor(readonly sealerError: SealerError) {
    super(sealerError.unavailable ? SEALER_UNAVAILABLE : SEALER_MISCONFIGURED, { cause: sealerError });
  }
}
