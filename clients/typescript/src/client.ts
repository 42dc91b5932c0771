// What both transports share: the calls, the bindings, the options.
import { create } from "@bufbuild/protobuf";
import type { JsonObject as PbJsonObject } from "@bufbuild/protobuf";
import { DurationSchema, timestampDate } from "@bufbuild/protobuf/wkt";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { BindingSchema, OpenRequestSchema, Reason, SealRequestSchema } from "./gen/sealer/v1/sealer_pb.js";
import type {
  Binding as PbBinding,
  OpenRequest as PbOpenRequest,
  OpenResponse,
  SealRequest as PbSealRequest,
  SealResponse,
} from "./gen/sealer/v1/sealer_pb.js";
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
}

/** A new requestState. */
export interface Sealed {
  requestState: string;
  expiresAt: Date;
}

/** A state presented by a retry. */
export interface OpenRequest {
  /** The state exactly as the client sent it. */
  requestState: string;
  /** The authenticated user of the retry. */
  principal: string;
  request: Binding;
}

/** What an open returns. */
export interface Opened {
  payload: Uint8Array;
  issuedAt: Date;
  expiresAt: Date;
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
  /** Closes the connections. */
  close(): Promise<void>;
}

/** How to reach a sealer. */
export interface ClientOptions {
  /** The sealer's gRPC or REST base URL: http://host:port, or https://host:port for TLS. */
  url: string;
  /** A bearer token (or a function returning one for each call), sent as Authorization: Bearer. */
  token?: string | (() => string | Promise<string>);
  /** TLS: the CA that signed the sealer's certificate (PEM), and a client certificate and key (PEM) for mutual TLS. */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer; servername?: string };
  /** The deadline of each call unless the call gives its own: 10 s by default. */
  timeoutMs?: number;
}

export const defaultTimeoutMs = 10_000;

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
  });
}

/** The proto OpenRequest of an open, the same over gRPC and REST. */
export function openRequestProto(r: OpenRequest): PbOpenRequest {
  return create(OpenRequestSchema, { requestState: r.requestState, principal: r.principal, request: bindingProto(r.request) });
}

/** What a seal returns, from the proto's answer. */
export function sealedOf(res: SealResponse): Sealed {
  return { requestState: res.requestState, expiresAt: dateOf(res.expiresAt) };
}

/** What an open returns, from the proto's answer. */
export function openedOf(res: OpenResponse): Opened {
  return { payload: res.payload, issuedAt: dateOf(res.issuedAt), expiresAt: dateOf(res.expiresAt) };
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

export async function tokenOf(token: ClientOptions["token"]): Promise<string | undefined> {
  return typeof token === "function" ? await token() : token;
}

/** A signal that fires at the deadline or with the caller's. */
export function deadline(opts: CallOptions | undefined, fallback: number): AbortSignal {
  const t = AbortSignal.timeout(opts?.timeoutMs ?? fallback);
  return opts?.signal ? AbortSignal.any([opts.signal, t]) : t;
}
