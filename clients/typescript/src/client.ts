// What both transports share: the calls, the bindings, the options.
import { create } from "@bufbuild/protobuf";
import type { JsonObject as PbJsonObject } from "@bufbuild/protobuf";
import { DurationSchema, timestampDate } from "@bufbuild/protobuf/wkt";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { BindingSchema, FlowRequestSchema, InputKeysSchema, OpenRequestSchema, Reason, RecordRequestSchema, SealRequestSchema } from "./gen/sealer/v1/sealer_pb.js";
import type {
  Binding as PbBinding,
  Flow as PbFlow,
  FlowRequest as PbFlowRequest,
  InputKeys as PbInputKeys,
  OpenRequest as PbOpenRequest,
  OpenResponse,
  RecordRequest as PbRecordRequest,
  RecordResponse,
  SealRequest as PbSealRequest,
  SealResponse,
} from "./gen/sealer/v1/sealer_pb.js";
import { BlockList } from "node:net";
import { requestDigest } from "./digest.js";
import { SealerError } from "./errors.js";

/**
 * The request a state belongs to: its method and params as the MCP server
 * received them (only name, arguments and uri count), whose digest is
 * computed in process (`requestDigest`) and sent as 32 bytes; or a digest
 * of the caller's own. `digestOn: "server"` sends the params instead and
 * lets the sealer digest them (the same digest; more bytes on the wire).
 */
export type Binding =
  | { method: string; params: Record<string, unknown>; digestOn?: "client" | "server" }
  | { digest: Uint8Array };

/** Binds to a tools/call request: its tool name and its arguments as received (undefined when absent). */
export function toolCall(name: string, args?: unknown): Binding {
  return { method: "tools/call", params: args === undefined ? { name } : { name, arguments: args } };
}

/** Binds to a prompts/get request: its prompt name and arguments (undefined when absent). */
export function promptGet(name: string, args?: Record<string, string>): Binding {
  return { method: "prompts/get", params: args === undefined ? { name } : { name, arguments: args } };
}

/** Binds to a resources/read request: its uri. */
export function resourceRead(uri: string): Binding {
  return { method: "resources/read", params: { uri } };
}

/** What Seal binds and carries. */
export interface SealRequest {
  /** The authenticated user of the MCP request (at most 1 KiB). */
  principal: string;
  request: Binding;
  /** What the MCP server needs to continue (at most 64 KiB). */
  payload?: Uint8Array;
  /** The state's life in milliseconds (whole milliseconds); unset means the sealer's default. */
  ttlMs?: number;
  /** The state opens at most once. */
  oneTime?: boolean;
  /**
   * Makes the state one round of a flow (FlowRequest): round 1 of a new
   * one, or the round after the state just opened. When set and the sealer
   * answers without a flow (a release without flows), seal throws and
   * returns no state.
   */
  flow?: FlowRequest;
}

/**
 * One round of a flow, a request that takes several rounds of input
 * (FORMAT.md, "Flows"): its rounds share one deadline, the retry must
 * answer exactly the input keys its round asked, and, latest-only, a round
 * once answered never opens again.
 */
export interface FlowRequest {
  /**
   * The state of the round before, exactly as the retry carried it and
   * open accepted it (Opened.requestState; flowAfter sets it); unset or ""
   * starts a new flow, whose deadline is now plus the tenant's flow TTL.
   * The sealer refuses a state of another principal or request, of a flow
   * past its deadline (FLOW_EXPIRED) or out of rounds (FLOW_EXHAUSTED).
   */
  continues?: string;
  /**
   * Only the flow's latest round opens: once a state of round n opened, no
   * state of round n or earlier opens again (ALREADY_CONSUMED), so the
   * client can neither rewind nor fork the flow. It costs one ledger call
   * per open, as oneTime does. Once a round has it, every later round has it.
   */
  latestOnly?: boolean;
  /**
   * The keys of the inputRequests this round asks (inputKeys): the retry
   * must answer exactly those, compared as strings, case included
   * (INPUT_MISMATCH). Unset leaves them unbound; [] asks for none.
   */
  asked?: readonly string[];
}

/** What the sealer says of a state's flow. */
export interface Flow {
  /** The flow's id: 16 bytes, the same in every round. */
  id: Uint8Array;
  /** The state's round, from 1. */
  round: number;
  /** The end of the flow: no state of it opens after it. */
  deadline: Date;
  /** Whether only the flow's latest round opens. */
  latestOnly: boolean;
}

/** A new requestState. */
export interface Sealed {
  requestState: string;
  expiresAt: Date;
  /** The state's flow, when the seal asked for one. */
  flow?: Flow;
}

/** A state presented by a retry. */
export interface OpenRequest {
  /** The state exactly as the client sent it. */
  requestState: string;
  /** The authenticated user of the retry. */
  principal: string;
  request: Binding;
  /**
   * The keys of the retry's inputResponses (inputKeys; [] when it carries
   * none). Unset means not known: a state whose round asked input keys then
   * does not open (INPUT_MISMATCH), unless the binding is params digested
   * by the sealer (digestOn: "server"), which reads them from
   * params.inputResponses. The client never reads them from the params.
   */
  responded?: readonly string[];
  /**
   * Claim a one-time or latest-only state for a recorded outcome (README,
   * "Recorded outcomes"): an open that consumes it answers `recording`,
   * and the caller then records the answer it sent (`record`); a later
   * retry of it that passes every other check gets that answer as
   * `outcome`, without its handler running again. Ignored for other
   * states. Default false (the codec sets it).
   */
  recordOutcome?: boolean;
  /**
   * With recordOutcome: the answers digest of the retry's inputResponses
   * (answersDigest, 32 bytes; unset sends none). The open that consumes the
   * state keeps it, and a later open with other answers, or with none where
   * it had some and the reverse, is OUTCOME_CONFLICT (rejected), never given
   * the outcome. The codec sets it.
   */
  answers?: Uint8Array;
}

/** An answer recorded for a consumed state: the bytes given to record, and when. */
export interface Outcome {
  data: Uint8Array;
  recordedAt: Date;
}

/** What an open returns. */
export interface Opened {
  payload: Uint8Array;
  issuedAt: Date;
  expiresAt: Date;
  /** The state's flow; undefined when it has none (a state sealed without one). */
  flow?: Flow;
  /** The state that opened, as given to open: what the next round continues (flowAfter). */
  requestState: string;
  /**
   * Set for a retry of a state consumed before whose answer was recorded:
   * answer it as it is, without running the handler (the payload is then
   * empty). Only with recordOutcome.
   */
  outcome?: Outcome;
  /** This open consumed the state with recordOutcome: record the answer sent for it (record). */
  recording: boolean;
}

/** What record keeps: the state a recording open consumed, and the answer sent for it. */
export interface RecordRequest {
  /** The state exactly as the open that consumed it got it. */
  requestState: string;
  /**
   * The answer sent (the codec's: the JSON-RPC response without jsonrpc and
   * id). Over the sealer's --outcome-limit (64 KiB by default) it is
   * refused (INVALID_ARGUMENT) and retries are refused at once; empty
   * records that no answer will come, the same way.
   */
  outcome: Uint8Array;
}

/** What record returns. */
export interface Recorded {
  /** When the ledger entry, and with it the outcome, goes away. */
  keptUntil: Date;
}

/** Per call: a signal that cancels it and a deadline (the client's default when unset). */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** A sealer client over gRPC or REST. Safe for concurrent use. */
export interface SealerClient {
  /** Returns a new requestState bound to the principal and the request. */
  seal(req: SealRequest, opts?: CallOptions): Promise<Sealed>;
  /** Checks a state against the retry presenting it and returns what was sealed; a refused state throws a SealerError whose `rejected` is true. */
  open(req: OpenRequest, opts?: CallOptions): Promise<Opened>;
  /**
   * Records the answer sent for a state an open with recordOutcome
   * consumed (Opened.recording). The first record of a state wins; a later
   * one is ALREADY_CONSUMED.
   */
  record(req: RecordRequest, opts?: CallOptions): Promise<Recorded>;
  /** Closes the connections. */
  close(): Promise<void>;
}

/** How to reach a sealer. */
export interface ClientOptions {
  /**
   * The sealer's gRPC or REST base URL: https://host:port for TLS, or
   * http://host:port without it (h2c for gRPC). With a token, http:// is
   * only for loopback (checkTokenTransport).
   */
  url: string;
  /**
   * A bearer token (or a function returning one for each call), sent as
   * Authorization: Bearer. It goes over TLS (https://) to any host, and
   * without TLS (http://) only to loopback: 127.0.0.0/8, ::1 or localhost;
   * any other http:// url with a token is refused when the client is made.
   */
  token?: string | (() => string | Promise<string>);
  /** TLS: the CA that signed the sealer's certificate (PEM), and a client certificate and key (PEM) for mutual TLS. */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer; servername?: string };
  /** The deadline of each call unless the call gives its own: 10 s by default. */
  timeoutMs?: number;
}

export const defaultTimeoutMs = 10_000;

/**
 * The keys of an inputRequests or inputResponses object, for
 * FlowRequest.asked and OpenRequest.responded: [] for undefined (no
 * inputResponses at all). Anything but a plain object (null, an array) has
 * no keys to tell, and gives undefined: not known, which opens no state
 * whose round asked keys.
 */
export function inputKeys(m: unknown): string[] | undefined {
  if (m === undefined) return [];
  if (typeof m !== "object" || m === null || Array.isArray(m)) return undefined;
  return Object.keys(m);
}

/**
 * The flow of the round after the state that open returned as opened: f
 * with continues set to that state. With opened undefined (the request's
 * first round: no state was opened) or without a flow (a state sealed
 * before its server used flows), f as it is, which starts a new flow.
 */
export function flowAfter(opened: Opened | undefined, f: FlowRequest = {}): FlowRequest {
  return opened?.flow ? { ...f, continues: opened.requestState } : { ...f, continues: "" };
}

/** The binding as the proto's Binding: the digest computed here unless the server is to compute it. */
export function bindingProto(b: Binding): PbBinding {
  if ("digest" in b) return create(BindingSchema, { digest: b.digest });
  if (b.digestOn === "server") {
    return create(BindingSchema, { method: b.method, params: b.params as PbJsonObject });
  }
  return create(BindingSchema, { digest: requestDigest(b.method, b.params) });
}

/** The proto SealRequest of a seal, the same over gRPC and REST. */
export function sealRequestProto(r: SealRequest): PbSealRequest {
  return create(SealRequestSchema, {
    principal: r.principal,
    request: bindingProto(r.request),
    payload: r.payload ?? new Uint8Array(0),
    ttl: durationOf(r.ttlMs),
    oneTime: r.oneTime ?? false,
    flow: flowRequestProto(r.flow),
  });
}

function flowRequestProto(f: FlowRequest | undefined): PbFlowRequest | undefined {
  if (f === undefined) return undefined;
  return create(FlowRequestSchema, {
    continues: f.continues ?? "",
    latestOnly: f.latestOnly ?? false,
    asked: inputKeysProto(f.asked, "asked"),
  });
}

/**
 * Keys as the proto's InputKeys. A key that is not valid Unicode (a lone
 * surrogate) is refused: on the wire it would become U+FFFD, another key.
 * The sealer checks the rest (count, length, none twice).
 */
function inputKeysProto(keys: readonly string[] | undefined, what: string): PbInputKeys | undefined {
  if (keys === undefined) return undefined;
  if (!Array.isArray(keys) || keys.some((k) => typeof k !== "string" || !k.isWellFormed())) {
    throw new SealerError(Reason.INVALID_ARGUMENT, `sealer: invalid argument: ${what} must be strings of valid Unicode`);
  }
  return create(InputKeysSchema, { keys: [...keys] });
}

/** The proto OpenRequest of an open, the same over gRPC and REST. */
export function openRequestProto(r: OpenRequest): PbOpenRequest {
  return create(OpenRequestSchema, {
    requestState: r.requestState,
    principal: r.principal,
    request: bindingProto(r.request),
    responded: inputKeysProto(r.responded, "responded"),
    recordOutcome: r.recordOutcome ?? false,
    answers: answersProto(r.answers),
  });
}

/** The answers digest as sent: 32 bytes, or none. */
function answersProto(answers: Uint8Array | undefined): Uint8Array {
  if (answers === undefined) return new Uint8Array(0);
  if (!(answers instanceof Uint8Array) || answers.length !== 32) {
    throw new SealerError(Reason.INVALID_ARGUMENT, "sealer: invalid argument: answers is a 32-byte answers digest");
  }
  return answers;
}

/** The proto RecordRequest of a record, the same over gRPC and REST. */
export function recordRequestProto(r: RecordRequest): PbRecordRequest {
  return create(RecordRequestSchema, { requestState: r.requestState, outcome: r.outcome });
}

/** What a record returns, from the proto's answer. */
export function recordedOf(res: RecordResponse): Recorded {
  return { keptUntil: dateOf(res.keptUntil) };
}

/** What a seal returns, from the proto's answer; r is what was asked. */
export function sealedOf(res: SealResponse, r: SealRequest): Sealed {
  const sealed: Sealed = { requestState: res.requestState, expiresAt: dateOf(res.expiresAt) };
  if (r.flow !== undefined) {
    // A release without flows ignores the request and seals a plain state:
    // never hand that out as a round of a flow.
    if (res.flow === undefined) {
      throw new SealerError(Reason.UNSPECIFIED, "sealer: the sealer sealed no flow (a release without flows?)");
    }
    sealed.flow = flowOf(res.flow);
  }
  return sealed;
}

/** What an open returns, from the proto's answer; r is what was asked. */
export function openedOf(res: OpenResponse, r: OpenRequest): Opened {
  const opened: Opened = {
    payload: res.payload,
    issuedAt: dateOf(res.issuedAt),
    expiresAt: dateOf(res.expiresAt),
    requestState: r.requestState,
    recording: res.recording,
  };
  if (res.flow !== undefined) opened.flow = flowOf(res.flow);
  if (res.outcome !== undefined) opened.outcome = { data: res.outcome.data, recordedAt: dateOf(res.outcome.recordedAt) };
  return opened;
}

function flowOf(f: PbFlow): Flow {
  if (f.id.length !== 16 || f.round < 1 || f.deadline === undefined) {
    throw new SealerError(Reason.UNSPECIFIED, "sealer: malformed flow in the sealer's reply");
  }
  // To the millisecond, as states carry it (truncated): round 1's seal
  // answers it to the nanosecond, every later answer as the state holds it.
  const deadline = new Date(Number(f.deadline.seconds) * 1000 + Math.floor(f.deadline.nanos / 1_000_000));
  return { id: f.id, round: f.round, deadline, latestOnly: f.latestOnly };
}

function dateOf(t: Timestamp | undefined): Date {
  return t ? timestampDate(t) : new Date(0);
}

export function durationOf(ms: number | undefined): Duration | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isInteger(ms) || ms <= 0) {
    throw new SealerError(Reason.INVALID_ARGUMENT, "sealer: invalid argument: ttlMs must be a positive integer");
  }
  return create(DurationSchema, { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });
}

// The loopback addresses, as the sealer's own rule (internal/netaddr) has
// them: 127.0.0.0/8 and ::1, IPv4-mapped forms included.
const loopback = new BlockList();
loopback.addSubnet("127.0.0.0", 8, "ipv4");
loopback.addAddress("::1", "ipv6");

/** Whether a URL's hostname is loopback: localhost, 127.0.0.0/8 or ::1 (in brackets, as URL writes it). */
export function isLoopbackHost(hostname: string): boolean {
  if (hostname === "localhost") return true;
  if (hostname.startsWith("[") && hostname.endsWith("]")) return loopback.check(hostname.slice(1, -1), "ipv6");
  return /^[0-9.]+$/.test(hostname) && loopback.check(hostname, "ipv4");
}

/**
 * Refuses a client that would send a bearer token without TLS to anything
 * but loopback: a token with a url that is not https://, unless it is
 * http:// to 127.0.0.0/8, ::1 or localhost. The sealer refuses plaintext
 * off loopback too; this keeps the token from leaving the machine at all.
 */
export function checkTokenTransport(url: URL, token: ClientOptions["token"]): void {
  if (token === undefined || token === "" || url.protocol === "https:") return;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return;
  throw new SealerError(
    Reason.INVALID_ARGUMENT,
    `sealer: refusing to send a bearer token without TLS (${url.protocol}//) to ${url.host.slice(0, 256)}, which is not loopback (127.0.0.0/8, ::1, localhost): use https://`,
  );
}

export async function tokenOf(token: ClientOptions["token"]): Promise<string | undefined> {
  return typeof token === "function" ? await token() : token;
}

/** A signal that fires at the deadline or with the caller's. */
export function deadline(opts: CallOptions | undefined, fallback: number): AbortSignal {
  const t = AbortSignal.timeout(opts?.timeoutMs ?? fallback);
  return opts?.signal ? AbortSignal.any([opts.signal, t]) : t;
}
