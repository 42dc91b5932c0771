// The sealer over REST (the grpc-gateway mapping, POST /v1/seal, /v1/open
// and /v1/record with the proto's JSON), with fetch. With TLS options it uses
// undici's fetch and an Agent carrying the CA and the client certificate.
import { fromJson, toJson } from "@bufbuild/protobuf";
import type { JsonValue } from "@bufbuild/protobuf";
import { Agent, fetch as undiciFetch } from "undici";
import {
  OpenRequestSchema,
  OpenResponseSchema,
  Reason,
  RecordRequestSchema,
  RecordResponseSchema,
  SealRequestSchema,
  SealResponseSchema,
} from "./gen/sealer/v1/sealer_pb.js";
import {
  checkTokenTransport,
  deadline,
  defaultTimeoutMs,
  openedOf,
  openRequestProto,
  recordedOf,
  recordRequestProto,
  sealedOf,
  sealRequestProto,
  tokenOf,
} from "./client.js";
import type { CallOptions, ClientOptions, OpenRequest, Opened, Recorded, RecordRequest, SealRequest, Sealed, SealerClient } from "./client.js";
import { parseReason, SealerError } from "./errors.js";

/**
 * The largest reply read from the sealer: a recorded outcome of 1 MiB (the
 * most --outcome-limit allows) in base64 and its JSON around it fit.
 */
const maxReply = 2 << 20;

/**
 * A client of the sealer's REST API at opts.url (https:// for TLS, or
 * http://host:port). Throws a SealerError when given a token and an
 * http:// url that is not loopback (checkTokenTransport). It follows no
 * redirect (the sealer sends none), so a request never leaves for another
 * host.
 */
export function restClient(opts: ClientOptions): SealerClient {
  const base = new URL(opts.url);
  checkTokenTransport(base, opts.token);
  const agent = opts.tls ? new Agent({ connect: { ...opts.tls } }) : undefined;
  const post = async (path: string, body: JsonValue, o?: CallOptions): Promise<unknown> => {
    const timeoutMs = o?.timeoutMs ?? opts.timeoutMs ?? defaultTimeoutMs;
    // The call's deadline, as a gRPC client sends it (the gateway reads
    // it): a retry waiting for an outcome gets IN_PROGRESS within it.
    const headers: Record<string, string> = { "content-type": "application/json", "grpc-timeout": grpcTimeout(timeoutMs) };
    const token = await tokenOf(opts.token);
    if (token) headers.authorization = `Bearer ${token}`;
    const init = { method: "POST", headers, body: JSON.stringify(body), redirect: "error" as const, signal: deadline(o, timeoutMs) };
    let res: Response;
    try {
      res = agent
        ? ((await undiciFetch(new URL(path, base), { ...init, dispatcher: agent })) as unknown as Response)
        : await fetch(new URL(path, base), init);
    } catch (err) {
      const what = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError") ? "deadline exceeded or cancelled" : "unreachable";
      throw new SealerError(Reason.UNSPECIFIED, `sealer: ${what}`, undefined, { cause: err });
    }
    const json = await readJson(res);
    if (res.ok) return json;
    throw fromRest(res.status, json);
  };
  return {
    async seal(r: SealRequest, o?: CallOptions): Promise<Sealed> {
      const json = await post("/v1/seal", toJson(SealRequestSchema, sealRequestProto(r)), o);
      return sealedOf(parse(() => fromJson(SealResponseSchema, json as JsonValue, { ignoreUnknownFields: true })), r);
    },
    async open(r: OpenRequest, o?: CallOptions): Promise<Opened> {
      const json = await post("/v1/open", toJson(OpenRequestSchema, openRequestProto(r)), o);
      return openedOf(parse(() => fromJson(OpenResponseSchema, json as JsonValue, { ignoreUnknownFields: true })), r);
    },
    async record(r: RecordRequest, o?: CallOptions): Promise<Recorded> {
      const json = await post("/v1/record", toJson(RecordRequestSchema, recordRequestProto(r)), o);
      return recordedOf(parse(() => fromJson(RecordResponseSchema, json as JsonValue, { ignoreUnknownFields: true })));
    },
    async close() {
      await agent?.close();
    },
  };
}

/** A deadline as gRPC's Grpc-Timeout header writes it: whole milliseconds, at most 8 digits. */
function grpcTimeout(ms: number): string {
  return `${Math.min(Math.max(Math.ceil(ms), 1), 99_999_999)}m`;
}

function parse<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw new SealerError(Reason.UNSPECIFIED, "sealer: the reply is not the sealer's", undefined, { cause: err });
  }
}

/** Reads a JSON body of at most maxReply bytes; anything else is not the sealer's reply. */
async function readJson(res: Response): Promise<unknown> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > maxReply) {
    await res.body?.cancel();
    throw new SealerError(Reason.UNSPECIFIED, "sealer: the reply is too large", res.status);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.length;
      if (size > maxReply) throw new SealerError(Reason.UNSPECIFIED, "sealer: the reply is too large", res.status);
      chunks.push(chunk);
    }
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new SealerError(Reason.UNSPECIFIED, `sealer: HTTP ${res.status} without a JSON body`, res.status);
  }
}

/** Maps a gateway error body ({code, message, details: [ErrorInfo...]}) to a SealerError. */
export function fromRest(status: number, body: unknown): SealerError {
  let reason = Reason.UNSPECIFIED;
  let message = `HTTP ${status}`;
  if (typeof body === "object" && body !== null) {
    const b = body as { message?: unknown; details?: unknown };
    if (typeof b.message === "string" && b.message !== "") message = b.message.slice(0, 512);
    if (Array.isArray(b.details)) {
      for (const d of b.details) {
        if (typeof d === "object" && d !== null && (d as Record<string, unknown>)["@type"] === "type.googleapis.com/google.rpc.ErrorInfo") {
          reason = parseReason((d as Record<string, unknown>).reason);
          break;
        }
      }
    }
  }
  return new SealerError(reason, message.startsWith("sealer") ? message : `sealer: ${message}`, status);
}
