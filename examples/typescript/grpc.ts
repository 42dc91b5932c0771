// Seal and open a requestState over gRPC with @grpc/grpc-js and the
// repository's proto. Usage: node --experimental-strip-types grpc.ts HOST:PORT
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";
import { fileURLToPath } from "node:url";
import path from "node:path";

type JSONValue = null | boolean | number | string | JSONValue[] | { [k: string]: JSONValue };

// toStruct turns a JSON object into a google.protobuf.Struct message.
function toValue(v: JSONValue): object {
  if (v === null) return { nullValue: "NULL_VALUE" };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v) };
}
function toStruct(o: { [k: string]: JSONValue }): object {
  return { fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toValue(v)])) };
}

const here = path.dirname(fileURLToPath(import.meta.url));
const def = protoLoader.loadSync(path.join(here, "../../proto/sealer/v1/sealer.proto"), {
  includeDirs: [path.join(here, "../../proto")],
  longs: String,
  defaults: true,
});
const pkg = grpc.loadPackageDefinition(def) as any;
const sealer = new pkg.sealer.v1.Sealer(process.argv[2] ?? "127.0.0.1:7443", grpc.credentials.createInsecure());

function call(method: string, req: object): Promise<any> {
  return new Promise((resolve, reject) =>
    sealer[method](req, (err: grpc.ServiceError | null, res: any) => (err ? reject(err) : resolve(res))),
  );
}

// google.rpc.Status and ErrorInfo, to read the reason of an error from its
// grpc-status-details-bin trailer.
const rpc = protobuf.Root.fromJSON({ nested: { google: { nested: {
  rpc: { nested: {
    Status: { fields: { code: { type: "int32", id: 1 }, message: { type: "string", id: 2 },
      details: { rule: "repeated", type: "google.protobuf.Any", id: 3 } } },
    ErrorInfo: { fields: { reason: { type: "string", id: 1 }, domain: { type: "string", id: 2 } } },
  } },
  protobuf: { nested: { Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } } } },
} } } });
const Status = rpc.lookupType("google.rpc.Status");
const ErrorInfo = rpc.lookupType("google.rpc.ErrorInfo");

function reasonOf(err: grpc.ServiceError): string {
  const bin = err.metadata?.get("grpc-status-details-bin")?.[0];
  if (!bin) return "";
  const status = Status.decode(bin as Buffer) as any;
  for (const d of status.details) {
    if (d.type_url === "type.googleapis.com/google.rpc.ErrorInfo") return (ErrorInfo.decode(d.value) as any).reason;
  }
  return "";
}

const request = (params: { [k: string]: JSONValue }) => ({ method: "tools/call", params: toStruct(params) });
const first = { name: "get_weather", arguments: { location: "New York" } };
const retry = { ...first, _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28" }, inputResponses: {} };

const sealed = await call("Seal", {
  principal: "alice", request: request(first), payload: Buffer.from('{"step":1}'), ttl: { seconds: 300 },
});
const opened = await call("Open", { requestState: sealed.requestState, principal: "alice", request: request(retry) });
if (Buffer.from(opened.payload).toString() !== '{"step":1}') throw new Error("payload differs");
try {
  await call("Open", { requestState: sealed.requestState, principal: "mallory", request: request(retry) });
  throw new Error("another principal opened the state");
} catch (err: any) {
  if (err.code !== grpc.status.PERMISSION_DENIED || reasonOf(err) !== "PRINCIPAL_MISMATCH") throw err;
}
console.log("grpc: sealed, opened, and refused another principal");
sealer.close();
