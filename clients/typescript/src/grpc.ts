// The sealer over gRPC: @connectrpc/connect-node's gRPC transport (HTTP/2,
// the protocol grpc-go serves) and the stubs buf generates from
// proto/sealer/v1 into gen/es.
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { Reason, Sealer } from "./gen/sealer/v1/sealer_pb.js";
import { checkTokenTransport, defaultTimeoutMs, openedOf, openRequestProto, recordedOf, recordRequestProto, sealedOf, sealRequestProto, tokenOf } from "./client.js";
import type { CallOptions, ClientOptions, OpenRequest, Opened, Recorded, RecordRequest, SealRequest, Sealed, SealerClient } from "./client.js";
import { parseReason, SealerError } from "./errors.js";

/**
 * A client of the sealer's gRPC API at opts.url (https:// for TLS, or
 * http://host:port for h2c). Throws a SealerError when given a token and an
 * http:// url that is not loopback (checkTokenTransport).
 */
export function grpcClient(opts: ClientOptions): SealerClient {
  const url = new URL(opts.url);
  checkTokenTransport(url, opts.token);
  const sessions = new Http2SessionManager(url, { idleConnectionTimeoutMs: 60_000 }, {
    ...(opts.tls?.ca !== undefined && { ca: opts.tls.ca }),
    ...(opts.tls?.cert !== undefined && { cert: opts.tls.cert }),
    ...(opts.tls?.key !== undefined && { key: opts.tls.key }),
    ...(opts.tls?.servername !== undefined && { servername: opts.tls.servername }),
  });
  const auth: Interceptor = (next) => async (req) => {
    const token = await tokenOf(opts.token);
    if (token) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const rpc = createClient(
    Sealer,
    createGrpcTransport({ baseUrl: url.origin, sessionManager: sessions, interceptors: [auth] }),
  );
  const call = (o?: CallOptions) => ({ timeoutMs: o?.timeoutMs ?? opts.timeoutMs ?? defaultTimeoutMs, signal: o?.signal });
  return {
    async seal(r: SealRequest, o?: CallOptions): Promise<Sealed> {
      const req = sealRequestProto(r);
      let res;
      try {
        res = await rpc.seal(req, call(o));
      } catch (err) {
        throw fromConnect(err);
      }
      return sealedOf(res, r);
    },
    async open(r: OpenRequest, o?: CallOptions): Promise<Opened> {
      const req = openRequestProto(r);
      let res;
      try {
        res = await rpc.open(req, call(o));
      } catch (err) {
        throw fromConnect(err);
      }
      return openedOf(res, r);
    },
    async record(r: RecordRequest, o?: CallOptions): Promise<Recorded> {
      const req = recordRequestProto(r);
      let res;
      try {
        res = await rpc.record(req, call(o));
      } catch (err) {
        throw fromConnect(err);
      }
      return recordedOf(res);
    },
    async close() {
      sessions.abort();
    },
  };
}

/** Maps a gRPC error to a SealerError with the reason of its ErrorInfo (UNSPECIFIED when it has none). */
export function fromConnect(err: unknown): SealerError {
  if (err instanceof SealerError) return err;
  const ce = ConnectError.from(err);
  let reason = Reason.UNSPECIFIED;
  for (const d of ce.details) {
    if ("type" in d && typeof d.type === "string" && d.value instanceof Uint8Array &&
        (d.type === "google.rpc.ErrorInfo" || d.type.endsWith("/google.rpc.ErrorInfo"))) {
      reason = parseReason(errorInfoReason(d.value));
      break;
    }
  }
  const message = ce.rawMessage || Code[ce.code] || "unknown";
  return new SealerError(reason, message.startsWith("sealer") ? message : `sealer: ${message}`, ce.code, { cause: err });
}

/** The reason (field 1) of a google.rpc.ErrorInfo; "" when unreadable. */
function errorInfoReason(bytes: Uint8Array): string {
  try {
    const r = new BinaryReader(bytes);
    while (r.pos < r.len) {
      const [field, wire] = r.tag();
      if (field === 1 && wire === WireType.LengthDelimited) return r.string();
      r.skip(wire);
    }
  } catch {
    // not an ErrorInfo
  }
  return "";
}
