// Node's floor for load.ts: Seal+Open pairs with the libraries and transport
// settings of @mcp-sealer/client and none of its own work. Over gRPC,
// connect-node's gRPC transport on an Http2SessionManager set as the client
// sets it, and the client's generated stubs; over REST, Node's fetch (its
// bundled undici), which the client calls when it has no TLS options. Both
// keep the client's 10 s deadline per call and send the bytes the client
// sends for the same pair, its digest computed once instead of per call,
// and use no more of a reply than the next call needs. What the client
// costs beyond this is its own: the digest, validation, error mapping and
// the objects it builds and returns.
//
// The stubs and libraries come by path from the client's own install: the
// package exports neither, and these are the very modules the client runs
// (Node resolves the examples' link to it to the same files), so no second
// copy of another version differs.
import { create, toJson } from "../../clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/index.js";
import { createClient } from "../../clients/typescript/node_modules/@connectrpc/connect/dist/esm/index.js";
import { createGrpcTransport, Http2SessionManager } from "../../clients/typescript/node_modules/@connectrpc/connect-node/dist/esm/index.js";
import { OpenRequestSchema, SealRequestSchema, Sealer } from "../../clients/typescript/dist/gen/sealer/v1/sealer_pb.js";
import { defaultTimeoutMs } from "@mcp-sealer/client";

/** What every pair sends: the client's fields for one Seal+Open, the digest already computed. */
export interface Pair {
  principal: string;
  digest: Uint8Array;
  payload: Uint8Array;
}

/** Runs Seal+Open pairs against one server. */
export interface Driver {
  pair(): Promise<void>;
  close(): Promise<void>;
}

/** The gRPC floor at url (http://host:port). */
export function grpcFloor(url: string, p: Pair): Driver {
  const u = new URL(url);
  const sessions = new Http2SessionManager(u, { idleConnectionTimeoutMs: 60_000 }, {});
  const rpc = createClient(Sealer, createGrpcTransport({ baseUrl: u.origin, sessionManager: sessions }));
  const seal = create(SealRequestSchema, { principal: p.principal, request: { digest: p.digest }, payload: p.payload });
  const call = { timeoutMs: defaultTimeoutMs };
  return {
    async pair() {
      const { requestState } = await rpc.seal(seal, call);
      await rpc.open(create(OpenRequestSchema, { requestState, principal: p.principal, request: seal.request }), call);
    },
    async close() {
      sessions.abort();
    },
  };
}

/** The REST floor at url (http://host:port). */
export function restFloor(url: string, p: Pair): Driver {
  const base = new URL(url);
  const sealURL = new URL("/v1/seal", base);
  const openURL = new URL("/v1/open", base);
  const headers = { "content-type": "application/json" };
  const sealBody = JSON.stringify(toJson(SealRequestSchema, create(SealRequestSchema, {
    principal: p.principal, request: { digest: p.digest }, payload: p.payload,
  })));
  // toJson leaves out the empty requestState; each open puts the state
  // first, where the client's body has it.
  const open = toJson(OpenRequestSchema, create(OpenRequestSchema, { principal: p.principal, request: { digest: p.digest } })) as object;
  const post = async (u: URL, body: string) => {
    const res = await fetch(u, { method: "POST", headers, body, signal: AbortSignal.timeout(defaultTimeoutMs) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return (await res.json()) as { requestState: string };
  };
  return {
    async pair() {
      const { requestState } = await post(sealURL, sealBody);
      await post(openURL, JSON.stringify({ requestState, ...open }));
    },
    async close() {},
  };
}
