// A requestState codec for the official MCP TypeScript SDK
// (@modelcontextprotocol/server): states sealed and opened by the sealer,
// bound to the principal and to the originating request as the Go client
// binds them (the method, the tool or prompt name and its arguments, or the
// resource uri), with a TTL and optionally opening once.
//
//	const states = sealedRequestState<Progress>({ sealer, principal: fromAuthInfo }); // or your own function, or anonymous: true
//	const mcp = createMcpHandler(() => newServer({ requestState: { verify: states.verify } }), { legacy: "reject" });
//	serve(states.fetch(mcp.fetch));   // binds each request to what it asks
//	// in a handler:
//	return states.inputRequired({ inputRequests, payload: progress }, ctx);
//
// The principal is decided, never defaulted: the codec is made only with a
// principal function (fromAuthInfo: the identity the SDK's bearer
// authentication verified) or with anonymous: true. A caller the function
// does not name (undefined) is refused, or, with anonymous: true, is
// ANONYMOUS, under RESERVED_PREFIX, which no principal function may return.
//
// Every state is a round of a flow (FORMAT.md, "Flows"): a handler that
// asks again on a retry whose state the codec opened seals the next round
// of that state's flow, so the rounds of one request share one deadline
// and a round limit; latest-only, a round once answered never opens again
// (no rewind, no fork); and the input keys a round asks (the keys of the
// inputRequests, given to states.inputRequired or mint's asked) must be
// exactly the keys of the retry's inputResponses, which the codec reads
// from the request as received.
//
// The SDK's verify hook and mint get the handler's context, which carries
// the method but not the tool name nor the arguments; states.fetch reads
// each JSON-RPC request once (bounded) and hands it to the SDK already
// parsed, so that the codec binds to exactly what the handler receives.
// The context names the HTTP request it came in (ctx.http.req): the codec
// finds the body by that identity, never by async context, and binds only a
// body holding a single message, so that no message can borrow another's
// binding (a JSON-RPC batch, which the SDK's default legacy serving still
// accepts, may repeat an id with other arguments).
//
// Recorded outcomes (README, "Recorded outcomes"): verify opens the state
// the client sent with record_outcome and the answers digest of its
// inputResponses as received, and states.fetch, which sees both the
// request and the answer, records the answer sent for a state that open
// consumed, or answers a retry of it with the answer recorded before,
// under the retry's id, without the SDK running the handler; a retry with
// other inputResponses gets OUTCOME_CONFLICT_ERROR instead.
//
// The SDK answers whatever verify throws with its frozen -32602. For an
// open of the state the client sent that failed for the sealer's sake (it
// could not answer, or the way to it is wrong) or came too early,
// states.fetch answers a -32603 of its own instead (failures.ts), so that
// the MCP client tells an outage from a refused state.
import { createHash } from "node:crypto";
import type { InputRequests, InputRequiredResult, RequestStateCodec, ServerContext } from "@modelcontextprotocol/server";
import { answersDigest } from "./answers.js";
import { inputKeys } from "./client.js";
import type { Flow, FlowRequest, Opened, SealerClient } from "./client.js";
import { salientParams } from "./digest.js";
import { Reason } from "./gen/sealer/v1/sealer_pb.js";
import { SealerError } from "./errors.js";
import { openFailure, SealFailed } from "./failures.js";
import type { AnswerError } from "./failures.js";
import { answerOf, answerThrough, NO_ANSWER } from "./outcomes.js";

export { answerOf, IN_PROGRESS_ERROR, OUTCOME_CONFLICT_ERROR, outcomeOf } from "./outcomes.js";
export { SEALER_MISCONFIGURED, SEALER_MISCONFIGURED_ERROR, SEALER_UNAVAILABLE, SEALER_UNAVAILABLE_ERROR, SealFailed } from "./failures.js";
export type { AnswerError } from "./failures.js";

/**
 * The prefix of the principals the codec gives itself (ANONYMOUS): a
 * principal function that returns a value under it is refused, so no
 * authenticated caller can be given the state of an unauthenticated one.
 */
export const RESERVED_PREFIX = "mcp-sealer:";

/**
 * The principal of unauthenticated callers, with anonymous: true: every
 * such caller shares it. Reserved: a principal function cannot return it
 * (return undefined for a caller it does not name).
 */
export const ANONYMOUS = `${RESERVED_PREFIX}anonymous`;

/**
 * The principal function of the SDK's own authentication: the access token
 * the handler was given as verified (ctx.http.authInfo, which
 * requireBearerAuth's gate or handler.fetch(request, { authInfo }) passes),
 * as "token:" and the hex SHA-256 of the token; undefined when the request
 * came without one. Each token is its own principal: two users of one
 * OAuth client (one clientId) are two principals, and a state does not
 * open under a refreshed token. A principal function of your own can bind
 * a stabler identity the verifier puts in authInfo (a subject in extra).
 */
export function fromAuthInfo(ctx: ServerContext): string | undefined {
  const token = ctx.http?.authInfo?.token;
  if (typeof token !== "string" || token === "") return undefined;
  return `token:${createHash("sha256").update(token).digest("hex")}`;
}

/** The largest answer any sealer keeps as an outcome: 1 MiB (FORMAT.md, "Recorded outcomes"). */
export const MAX_OUTCOME = 1 << 20;

/** The largest request body states.fetch reads: 4 MiB, the SDK's own default. */
export const MAX_REQUEST_BODY = 4 << 20;

export interface SealedRequestStateOptions {
  /** The sealer (grpcClient or restClient). */
  sealer: SealerClient;
  /**
   * Who the request comes from, from the handler's context: fromAuthInfo
   * for the SDK's bearer authentication, or a function of your own (auth
   * outside the SDK: an API-key middleware, a session), which may be async.
   * It returns (or resolves to) the caller's principal, never "" nor under
   * RESERVED_PREFIX, or undefined for a caller it does not name, who is
   * refused unless anonymous is true; one that throws or rejects refuses
   * the request. Required unless anonymous is true, which defaults it to
   * fromAuthInfo: the codec is not made without one or the other.
   */
  principal?: (ctx: ServerContext) => string | undefined | Promise<string | undefined>;
  /**
   * Serve callers without a principal (the principal function returned
   * undefined; for fromAuthInfo, no authInfo) as ANONYMOUS, all alike: any
   * of them can present another's state. Default false: they are refused
   * (verify and mint throw). Only for a server whose unauthenticated
   * callers are all the same to it.
   */
  anonymous?: boolean;
  /** The life of each state in seconds; unset means the sealer's default. */
  ttlSeconds?: number;
  /** Whether states open at most once, unless mint says otherwise (default false). */
  oneTime?: boolean;
  /**
   * Whether every state is a round of a flow (default true): round 1 when
   * the request carried no state the codec opened (or one sealed without a
   * flow), else the round after the state it opened. Flow states need a
   * sealer release with flows on every replica (CHANGELOG); false seals
   * plain states, as earlier releases of the codec did.
   */
  flows?: boolean;
  /**
   * Whether only a flow's latest round opens (default true): after a round
   * opened, no state of it or of an earlier round opens again, so a client
   * can neither rewind the request nor fork it by retrying one round twice
   * (ALREADY_CONSUMED). It costs one ledger call per open, as oneTime does.
   * Sticky: once a round has it, the sealer keeps it for the later ones.
   * A tenant with oneTime: forbidden has no ledger and refuses latest-only
   * seals (INVALID_ARGUMENT): set false for it.
   */
  latestOnly?: boolean;
  /**
   * Calls that fail for a transient reason (LEDGER_UNAVAILABLE,
   * KEYS_UNAVAILABLE, RESOURCE_EXHAUSTED, the sealer unreachable or late)
   * are tried this many times in all, with a doubling backoff from
   * backoffMs, before the failure surfaces (default 3 attempts, 50 ms). An
   * open the sealer refused so has not consumed a one-time state; one that
   * timed out may have, and its retry then fails closed (ALREADY_CONSUMED).
   */
  retry?: { attempts?: number; backoffMs?: number };
  /**
   * The bound on each seal and each open, every attempt and backoff
   * included (default 5000 ms): the most a hung sealer adds to a request.
   */
  deadlineMs?: number;
  /**
   * Called with every failed seal, open and record (the SealerError, with
   * its reason or failure; what the operation was; the MCP method), before
   * the failure reaches the SDK; a failed record reaches nothing else.
   * Default: one console.error line with the sealer's reason (never the
   * state, the payload or the principal). The SDK's own onerror never sees
   * a mint's failure (it becomes the tool's isError result), hence this
   * hook.
   */
  onError?: (err: SealerError, info: { op: Op; method: string }) => void;
  /**
   * Whether the answer to a one-time or latest-only state is recorded
   * (default true; README, "Recorded outcomes"). verify opens the state the
   * client sent with record_outcome; states.fetch records the answer the
   * server sent for it (the result or the JSON-RPC error, as sent; a failed
   * record goes to onError with op "record" and changes nothing of the
   * answer). A retry of that state that passes every check (the client lost
   * the answer) gets the same answer under its own id, and the handler
   * does not run again; one that comes while the handler still runs waits
   * for it, within deadlineMs, then gets -32603 with data.reason
   * "in_progress" (IN_PROGRESS_ERROR) and may retry. Every such open sends
   * the answers digest of the retry's inputResponses as received
   * (answersDigest), so that a retry whose inputResponses differ from those
   * the handler ran with gets -32602 with data.reason "outcome_conflict"
   * (OUTCOME_CONFLICT_ERROR), never that answer. false opens as before:
   * such a retry is refused (-32602, ALREADY_CONSUMED). It needs a sealer
   * release with recorded outcomes on every replica: over REST an earlier
   * one refuses the open's new field (INVALID_ARGUMENT), so set false until
   * then (and the answers field: a release before OUTCOME_CONFLICT refuses
   * it); over gRPC an earlier one ignores both.
   */
  recordOutcomes?: boolean;
}

/** What a sealer call of the codec was, for onError: a seal (mint), an open (verify), or the record of an answer (states.fetch). */
export type Op = "seal" | "open" | "record";

/** The default onError: one line on the server's console. */
export function logSealerError(err: SealerError, info: { op: Op; method: string }): void {
  const kind = err.reason === Reason.OUTCOME_CONFLICT
    ? "answered before for other inputResponses"
    : err.rejected || (info.op === "open" && err.reason === Reason.INVALID_ARGUMENT)
    ? "refused"
    : err.reason === Reason.IN_PROGRESS
      ? "still in progress"
      : err.unavailable
        ? "sealer unavailable"
        : "sealer misconfigured";
  console.error(`mcp-sealer: requestState ${info.op} failed on ${info.method}: ${kind}: ${err.why} (${err.message})`);
}

/** Per mint: overrides of the codec's options, and the input keys the round asks. */
export interface MintOptions {
  oneTime?: boolean;
  ttlSeconds?: number;
  /**
   * The inputRequests the result returns with the state (or their keys):
   * the retry must answer exactly those keys (INPUT_MISMATCH). Unset leaves
   * the round's keys unbound. states.inputRequired sets it. Only flows
   * bind keys: with flows off it is ignored.
   */
  asked?: InputRequests | readonly string[];
}

/** What states.inputRequired returns: inputRequests, and the state sealed for them. */
export interface InputRequiredSpec<T> {
  inputRequests: InputRequests;
  /** What the next round needs (sealed as JSON). */
  payload: T;
}

/** A RequestStateCodec<T> whose states the sealer seals, plus the fetch wrapper that gives it the request. */
export interface SealedRequestState<T> extends RequestStateCodec<T> {
  /**
   * Seals payload (as JSON) for the request being handled; ctx is
   * required. With flows, the state is the round after the one verify
   * opened for this request, or round 1 of a new flow; opts.asked binds the
   * keys the round asks (states.inputRequired passes them).
   */
  mint(payload: T, ctx?: ServerContext, opts?: MintOptions): Promise<string>;
  /**
   * Seals payload for the request being handled, asking exactly the keys
   * of inputRequests, and returns the input_required result carrying both:
   * the way to ask, since the round's keys are then those the client sees.
   */
  inputRequired(spec: InputRequiredSpec<T>, ctx: ServerContext, opts?: Omit<MintOptions, "asked">): Promise<InputRequiredResult>;
  /**
   * Opens state for the request being handled, with the keys of its
   * inputResponses, and returns its payload; throws when refused. Drop in
   * as ServerOptions.requestState.verify.
   */
  verify(state: string, ctx: ServerContext): Promise<T>;
  /** The flow of the state the codec opened for the request being handled; undefined when none opened or it has no flow. */
  flowOf(ctx: ServerContext): Flow | undefined;
  /** Wraps a web-standard MCP handler (createMcpHandler(...).fetch) so that the codec sees each request's method and params. */
  fetch<O extends { parsedBody?: unknown }>(
    handler: (request: Request, options?: O) => Promise<Response>,
  ): (request: Request, options?: O) => Promise<Response>;
}

// The body of each request states.fetch has read, by the Request object the
// SDK gives the handler as ctx.http.req; BATCH for a JSON array.
const BATCH = Symbol("batch");
const bodies = new WeakMap<Request, unknown>();

// What states.fetch does with the answer to a request whose state verify
// opened: record it (a recording open consumed the state), replace it with
// the recorded one (a retry of a state consumed before), or with a
// JSON-RPC error of the codec's own (the open failed: openFailure).
type Answer =
  | { kind: "record"; requestState: string; method: string; none?: boolean }
  | { kind: "replay"; data: Uint8Array; method: string }
  | { kind: "error"; error: AnswerError };

/**
 * The error verify throws for a retry answered with its recorded outcome,
 * so that the SDK runs no handler; states.fetch answers the outcome in
 * place of the SDK's -32602.
 */
class Replayed extends Error {
  override name = "Replayed";
  constructor() {
    super("mcp-sealer: a retry of a state whose answer was recorded: answered with that answer, the handler not run");
  }
}

/** A requestState codec for @modelcontextprotocol/server backed by the sealer. */
export function sealedRequestState<T = unknown>(opts: SealedRequestStateOptions): SealedRequestState<T> {
  if (opts.principal === undefined ? opts.anonymous !== true : typeof opts.principal !== "function") {
    throw new TypeError(
      "sealedRequestState: say who callers are: principal: fromAuthInfo (the SDK's bearer authentication), principal: (ctx) => ... (your own), or anonymous: true (every unauthenticated caller one principal)",
    );
  }
  const principalOf = opts.principal ?? fromAuthInfo;
  const anonymous = opts.anonymous === true;
  const flows = opts.flows ?? true;
  const latestOnly = opts.latestOnly ?? true;
  const recordOutcomes = opts.recordOutcomes ?? true;
  // The answer each HTTP request's message is to get (one message per
  // request), set by verify for states.fetch.
  const answers = new WeakMap<Request, Answer>();
  // The state each HTTP request's message opened (one message per request:
  // batches are never bound), for the next round to continue.
  const opened = new WeakMap<Request, Opened>();
  const attempts = Math.max(1, opts.retry?.attempts ?? 3);
  const backoff = opts.retry?.backoffMs ?? 50;
  const deadlineMs = opts.deadlineMs ?? 5000;
  if (!(deadlineMs > 0)) throw new TypeError("sealedRequestState: deadlineMs must be positive");
  const onError = opts.onError ?? logSealerError;
  // Each attempt gets what is left of one deadline for the whole operation.
  const retrying = async <R>(f: (call: { timeoutMs: number }) => Promise<R>): Promise<R> => {
    const end = Date.now() + deadlineMs;
    for (let i = 1; ; i++) {
      const left = end - Date.now();
      if (left <= 0) throw new SealerError(Reason.UNSPECIFIED, "sealer: deadline exceeded");
      try {
        return await f({ timeoutMs: left });
      } catch (err) {
        if (!(err instanceof SealerError) || !err.retryable || i >= attempts) throw err;
        const pause = Math.min(backoff * 2 ** (i - 1), end - Date.now());
        if (pause <= 0) throw err;
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  };
  const report = (err: unknown, op: Op, method: string): void => {
    if (!(err instanceof SealerError)) return;
    try {
      onError(err, { op, method });
    } catch {
      // a hook that throws changes nothing of the answer
    }
  };
  const who = async (ctx: ServerContext): Promise<string> => {
    const p: unknown = await principalOf(ctx);
    if (p === undefined || p === null) {
      if (anonymous) return ANONYMOUS;
      throw new SealerError(Reason.INVALID_ARGUMENT, "sealer: the caller is not authenticated, and the codec serves no anonymous callers (anonymous: true)");
    }
    if (typeof p !== "string" || p === "") throw new SealerError(Reason.INVALID_ARGUMENT, "sealer: the principal function returned no principal");
    if (p.startsWith(RESERVED_PREFIX)) {
      throw new SealerError(
        Reason.INVALID_ARGUMENT,
        `sealer: the principal function returned a reserved principal (${RESERVED_PREFIX}...): return undefined for a caller it does not name`,
      );
    }
    return p;
  };
  const mint = async (payload: T, ctx?: ServerContext, mo?: MintOptions): Promise<string> => {
    if (!ctx) throw new TypeError("sealedRequestState.mint needs the handler's context");
    const request = requestOf(ctx);
    const principal = await who(ctx);
    const ttl = mo?.ttlSeconds ?? opts.ttlSeconds;
    let flow: FlowRequest | undefined;
    if (flows) {
      const prev = opened.get(ctx.http!.req!);
      const asked = mo?.asked === undefined ? undefined : Array.isArray(mo.asked) ? mo.asked : inputKeys(mo.asked);
      if (mo?.asked !== undefined && asked === undefined) throw new TypeError("sealedRequestState.mint: asked must be the inputRequests or their keys");
      flow = { continues: prev?.flow ? prev.requestState : "", latestOnly, ...(asked !== undefined && { asked }) };
    }
    let sealed;
    try {
      sealed = await retrying((call) =>
        opts.sealer.seal(
          {
            principal,
            request,
            payload: new TextEncoder().encode(JSON.stringify(payload ?? null)),
            ...(ttl !== undefined && { ttlMs: Math.round(ttl * 1000) }),
            oneTime: mo?.oneTime ?? opts.oneTime ?? false,
            ...(flow && { flow }),
          },
          call,
        ),
      );
    } catch (err) {
      report(err, "seal", ctx.mcpReq.method);
      // A flow past its deadline or out of rounds is the client's to start
      // over; any other failure reaches the client as a bare message.
      if (err instanceof SealerError && !err.rejected) {
        // A failure that may pass: none is recorded, so that a retry of the
        // state is refused at once and the client starts the request over,
        // rather than getting this failure again.
        const a = answers.get(ctx.http!.req!);
        if (a?.kind === "record") a.none = true;
        throw new SealFailed(err);
      }
      throw err;
    }
    return sealed.requestState;
  };
  return {
    mint,
    async inputRequired(spec: InputRequiredSpec<T>, ctx: ServerContext, mo?: Omit<MintOptions, "asked">): Promise<InputRequiredResult> {
      const requestState = await mint(spec.payload, ctx, { ...mo, asked: spec.inputRequests });
      return { resultType: "input_required", inputRequests: spec.inputRequests, requestState };
    },
    async verify(state: string, ctx: ServerContext): Promise<T> {
      const request = requestOf(ctx);
      const responded = inputKeys(Object.hasOwn(request.params, "inputResponses") ? request.params.inputResponses : undefined);
      const principal = await who(ctx);
      const req = ctx.http!.req!;
      const method = ctx.mcpReq.method;
      // Only the state the client sent is recorded, or answered otherwise
      // than the SDK does: the SDK's legacy shim also verifies states it
      // minted within one request, whose answers never reach a client.
      const sent = request.params.requestState === state;
      const record = recordOutcomes && sent;
      let o: Opened;
      try {
        // The answers the handler acts on: the inputResponses its values
        // are parsed from, as received. None the digest refuses is opened.
        const answers = record ? answersDigest(Object.hasOwn(request.params, "inputResponses") ? request.params.inputResponses : undefined) : undefined;
        o = await retrying((call) =>
          opts.sealer.open(
            {
              requestState: state,
              principal,
              request,
              ...(responded !== undefined && { responded }),
              ...(record && { recordOutcome: true, answers }),
            },
            call,
          ),
        );
      } catch (err) {
        // The SDK answers any throw here -32602 "Invalid or expired
        // requestState", its message frozen: the reason goes to onError.
        // states.fetch answers instead a -32603 that says the sealer
        // failed (starting over would not help), for a retry that came
        // too early IN_PROGRESS_ERROR (it would not undo the first run), or
        // for one with other inputResponses OUTCOME_CONFLICT_ERROR.
        report(err, "open", method);
        const error = sent ? openFailure(err, record) : undefined;
        if (error !== undefined) answers.set(req, { kind: "error", error });
        throw err;
      }
      if (record && o.outcome !== undefined) {
        answers.set(req, { kind: "replay", data: o.outcome.data, method });
        throw new Replayed();
      }
      // From here on, whatever the answer is (a payload that does not
      // parse is a -32602), it is the one recorded.
      if (record && o.recording) answers.set(req, { kind: "record", requestState: state, method });
      let payload: T;
      try {
        payload = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(o.payload)) as T;
      } catch {
        throw new SealerError(Reason.UNSPECIFIED, "sealer: the payload is not JSON (sealed by something else than this codec)");
      }
      opened.set(ctx.http!.req!, o);
      return payload;
    },
    flowOf(ctx: ServerContext): Flow | undefined {
      const req = ctx.http?.req;
      return req === undefined ? undefined : opened.get(req)?.flow;
    },
    fetch(handler) {
      // Records the answer sent for a state a recording open consumed; a
      // failure goes to onError and never holds up the answer.
      // An answer over MAX_OUTCOME, which no sealer keeps and which may not
      // even reach one, is recorded as none: its retries are refused at
      // once instead of waiting out the sealer's --outcome-wait.
      const keep = (a: { requestState: string; method: string }, outcome: Uint8Array): void => {
        const tooLarge = outcome.length > MAX_OUTCOME;
        retrying((call) => opts.sealer.record({ requestState: a.requestState, outcome: tooLarge ? new Uint8Array() : outcome }, call)).then(
          () => {
            if (tooLarge) report(new SealerError(Reason.INVALID_ARGUMENT, `sealer: an answer of ${outcome.length} bytes, over the ${MAX_OUTCOME} any sealer keeps: recorded as none`), "record", a.method);
          },
          (err: unknown) => {
            report(err instanceof SealerError ? err : new SealerError(Reason.UNSPECIFIED, "sealer: record failed", undefined, { cause: err }), "record", a.method);
          },
        );
      };
      // What goes out in place of the answer to the message of request
      // (undefined: the answer as the SDK wrote it), from what verify set.
      const instead = (request: Request, id: string | number, outcome: Uint8Array): string | undefined => {
        const a = answers.get(request);
        if (a === undefined) return undefined;
        answers.delete(request);
        switch (a.kind) {
          case "record":
            keep(a, a.none ? new Uint8Array() : outcome);
            return undefined;
          case "error":
            return outcome === NO_ANSWER ? undefined : JSON.stringify({ jsonrpc: "2.0", id, error: a.error });
          case "replay": {
            if (outcome === NO_ANSWER) return undefined;
            const text = answerOf(a.data, id);
            // Recorded by something else than an adapter: keep the SDK's
            // -32602, the state refused.
            if (text === undefined) report(new SealerError(Reason.UNSPECIFIED, "sealer: the recorded outcome is not a JSON-RPC answer"), "open", a.method);
            return text;
          }
        }
      };
      const answered = (request: Request, body: unknown, response: Response): Response | Promise<Response> => {
        const message = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as { id?: unknown; params?: { requestState?: unknown } }) : undefined;
        // An event stream may go out before verify has run (the SDK's
        // responseMode "sse"): its answer is looked at as it passes.
        const pending = typeof message?.params?.requestState === "string" && (response.headers.get("content-type") ?? "").startsWith("text/event-stream");
        if (message === undefined || !(answers.has(request) || pending)) return response;
        const id = message.id as string | number;
        return answerThrough(response, id, (outcome) => instead(request, id, outcome));
      };
      return async (request, options) => {
        if (request.method !== "POST") return handler(request, options);
        const text = await readBody(request);
        if (text === undefined) {
          return new Response(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "request body too large" } }), {
            status: 413,
            headers: { "content-type": "application/json" },
          });
        }
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON: the SDK answers it, from the same bytes.
          return handler(new Request(request.url, { method: "POST", headers: request.headers, body: text, signal: request.signal }), options);
        }
        bodies.set(request, Array.isArray(body) ? BATCH : body);
        let response: Response;
        try {
          response = await handler(request, { ...options, parsedBody: body } as NonNullable<typeof options>);
        } catch (err) {
          const a = answers.get(request);
          answers.delete(request);
          if (a?.kind === "record") keep(a, NO_ANSWER);
          throw err;
        }
        return answered(request, body, response);
      };
    },
  };
}

/**
 * The binding of the request ctx belongs to: its method and its params
 * exactly as received, from the body states.fetch read for the very HTTP
 * request the SDK says ctx came in. A batch is never bound: its messages
 * may share an id, so which one the handler got cannot be told.
 */
function requestOf(ctx: ServerContext): { method: string; params: Record<string, unknown> } {
  const { id, method } = ctx.mcpReq;
  if (salientParams(method) === undefined) {
    throw new SealerError(Reason.INVALID_ARGUMENT, `sealer: a ${method.slice(0, 64)} request cannot carry a requestState`);
  }
  const req = ctx.http?.req;
  const m = req === undefined ? undefined : bodies.get(req);
  if (m === BATCH) {
    throw new SealerError(Reason.INVALID_ARGUMENT, "sealer: a request in a JSON-RPC batch cannot carry a requestState: send it alone");
  }
  if (typeof m === "object" && m !== null && (m as { id?: unknown }).id === id && (m as { method?: unknown }).method === method) {
    const params = (m as { params?: unknown }).params;
    if (typeof params === "object" && params !== null && !Array.isArray(params)) return { method, params: params as Record<string, unknown> };
  }
  throw new SealerError(
    Reason.INVALID_ARGUMENT,
    "sealer: the request being handled is unknown to the codec: serve the MCP handler through states.fetch(handler)",
  );
}

/** The body as text, or undefined when it is larger than MAX_REQUEST_BODY. */
async function readBody(request: Request): Promise<string | undefined> {
  if (Number(request.headers.get("content-length") ?? "0") > MAX_REQUEST_BODY) return undefined;
  if (!request.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > MAX_REQUEST_BODY) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

