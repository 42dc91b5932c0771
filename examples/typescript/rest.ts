// Seal and open a requestState over REST with fetch.
// Usage: node --experimental-strip-types rest.ts http://HOST:PORT
const base = process.argv[2] ?? "http://127.0.0.1:7080";

async function post(path: string, body: object): Promise<{ status: number; json: any }> {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const reasonOf = (json: any): string =>
  json.details?.find((d: any) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo")?.reason ?? "";

const request = { method: "tools/call", params: { name: "get_weather", arguments: { location: "New York" } } };
const sealed = await post("/v1/seal", {
  principal: "alice", request, payload: Buffer.from('{"step":1}').toString("base64"), ttl: "300s", oneTime: true,
});
if (sealed.status !== 200) throw new Error(`seal: ${JSON.stringify(sealed.json)}`);
const state: string = sealed.json.requestState;

const retry = { ...request, params: { ...request.params, requestState: state, inputResponses: {} } };
const opened = await post("/v1/open", { requestState: state, principal: "alice", request: retry });
if (opened.status !== 200 || Buffer.from(opened.json.payload, "base64").toString() !== '{"step":1}') {
  throw new Error(`open: ${JSON.stringify(opened.json)}`);
}
const again = await post("/v1/open", { requestState: state, principal: "alice", request: retry });
if (again.status !== 409 || reasonOf(again.json) !== "ALREADY_CONSUMED") throw new Error(`second open: ${JSON.stringify(again.json)}`);
const tampered = await post("/v1/open", { requestState: state + "-TAMPERED", principal: "alice", request: retry });
if (tampered.status !== 400 || reasonOf(tampered.json) !== "INVALID_STATE") throw new Error(`tampered: ${JSON.stringify(tampered.json)}`);
console.log("rest: sealed a one-time state, opened it once, refused the replay and a tampered state");
