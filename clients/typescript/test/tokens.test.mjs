// Issue 40, finding 8: tokens only over TLS. A client given a bearer token
// refuses a plaintext (http://, h2c) sealer that is not on loopback
// (127.0.0.0/8, ::1, localhost), with an error that says so, before
// anything is sent; over TLS, on loopback, or without a token it goes. Real
// sockets: the off-loopback sealer is this machine's own non-loopback
// address (skipped when it has none).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createServer as createHttp2Server } from "node:http2";
import { networkInterfaces } from "node:os";
import { grpcClient, restClient, resourceRead, SealerError } from "../dist/index.js";

// A non-loopback IPv4 address of this machine, or undefined.
const farAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === "IPv4" && !a.internal)?.address;

// servers records the authorization header of every request that reaches
// a REST or a gRPC (h2c) sealer listening on every address; both answer
// with an error, which is all the clients need to have sent.
// With redirect set, the REST sealer answers 307 to the same path on the
// far address.
async function servers(t, redirect = false) {
  const seen = [];
  const rest = createServer((req, res) => {
    seen.push({ url: req.url, host: req.headers.host, authorization: req.headers.authorization });
    if (redirect && req.headers.host.startsWith("127.0.0.1:")) {
      res.writeHead(307, { location: `http://${farAddress}:${rest.address().port}${req.url}` });
      return void res.end();
    }
    res.writeHead(503, { "content-type": "application/json" });
    res.end(JSON.stringify({ code: 14, message: "test" }));
  });
  const grpc = createHttp2Server((req, res) => {
    seen.push({ url: req.url, authorization: req.headers.authorization });
    res.writeHead(200, { "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "test" });
    res.end();
  });
  await Promise.all([rest, grpc].map((s) => new Promise((r) => s.listen(0, "::", r))));
  t.after(() => {
    rest.close();
    grpc.close();
  });
  return { seen, ports: { REST: rest.address().port, gRPC: grpc.address().port } };
}

const kinds = { REST: restClient, gRPC: grpcClient };
const call = (c) => c.seal({ principal: "p", request: resourceRead("file:///x") }, { timeoutMs: 3000 });

test("a token goes over plaintext only to loopback", { skip: farAddress === undefined && "no non-loopback address" }, async (t) => {
  const { seen, ports } = await servers(t);
  const failures = [];
  for (const [kind, make] of Object.entries(kinds)) {
    for (const [host, token, sent] of [
      ["127.0.0.1", "team-token", true],
      ["localhost", "team-token", true],
      ["[::1]", "team-token", true],
      [farAddress, undefined, true],
      [farAddress, "team-token", false],
      [farAddress, () => "team-token", false],
    ]) {
      const name = `${kind} http://${host} ${typeof token === "function" ? "token function" : token ? "token" : "no token"}`;
      seen.length = 0;
      let c;
      try {
        c = make({ url: `http://${host}:${ports[kind]}`, ...(token && { token }) });
        await call(c).catch((err) => assert.ok(err instanceof SealerError, `${name}: ${err}`)); // the servers answer errors
        if (!sent) failures.push(`${name}: got the call made, want it refused`);
      } catch (err) {
        if (sent) failures.push(`${name}: got ${err}, want the call made`);
        else if (!(err instanceof SealerError && /TLS/.test(err.message) && /loopback/.test(err.message))) failures.push(`${name}: got ${err}, want an error that says why`);
      } finally {
        await c?.close();
      }
      const got = seen.map((s) => s.authorization);
      const want = sent ? [token ? "Bearer team-token" : undefined] : [];
      if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`${name}: the sealer got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
  }
  assert.deepEqual(failures, []);
});

test("over TLS a token goes to any host", () => {
  for (const make of Object.values(kinds)) {
    for (const url of ["https://sealer.example:7443", "https://192.0.2.10"]) {
      const c = make({ url, token: "team-token" });
      void c.close();
    }
  }
});

test("the REST client follows no redirect, so a loopback sealer cannot send the request elsewhere", { skip: farAddress === undefined && "no non-loopback address" }, async (t) => {
  const { seen, ports } = await servers(t, true);
  const c = restClient({ url: `http://127.0.0.1:${ports.REST}`, token: "team-token" });
  t.after(() => c.close());
  await assert.rejects(call(c), SealerError);
  assert.deepEqual(seen.map((s) => s.host), [`127.0.0.1:${ports.REST}`], "the hosts the requests reached");
});

test("loopback is 127.0.0.0/8, ::1 and localhost, as URL spells them", async () => {
  const { isLoopbackHost } = await import("../dist/client.js");
  for (const [url, want] of [
    ["http://127.0.0.1", true],
    ["http://127.255.255.254", true],
    ["http://127.1", true],
    ["http://0x7f000001", true],
    ["http://localhost", true],
    ["http://LOCALHOST", true],
    ["http://[::1]", true],
    ["http://[0:0:0:0:0:0:0:1]", true],
    ["http://[::ffff:127.0.0.1]", true],
    ["http://0.0.0.0", false],
    ["http://128.0.0.1", false],
    ["http://[::]", false],
    ["http://[::ffff:192.0.2.1]", false],
    ["http://localhost.", false],
    ["http://localhost.example", false],
    ["http://127.0.0.1.example", false],
    ["http://sealer.example", false],
  ]) {
    assert.equal(isLoopbackHost(new URL(url).hostname), want, `${url} (${new URL(url).hostname})`);
  }
});
