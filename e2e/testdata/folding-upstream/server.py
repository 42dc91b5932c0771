"""An MCP upstream that reads member names as "forgiving" decoders do.

Every member name of the JSON-RPC envelope and of params is folded before
the server looks it up: with --fold casefold, by str.casefold(); with
--fold nfkc, by unicodedata.normalize("NFKC", ...) and then casefold. A
later member wins over an earlier one that folds alike, as dict() keeps it.
Its tool pay asks a confirmation in round 1, with a plain requestState that
approves the amount of its arguments, and in round 2 acts on the state it is
given, printing what it acted on. It counts the POSTs it got at GET /calls.
It stands for an upstream that sealer-proxy protects without changing it.
"""

import argparse
import json
import sys
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def folder(mode):
    if mode == "casefold":
        return str.casefold
    return lambda name: unicodedata.normalize("NFKC", name).casefold()


class Handler(BaseHTTPRequestHandler):
    calls = 0
    fold = staticmethod(str.casefold)

    def log_message(self, *args):
        pass

    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply({"calls": Handler.calls})

    def do_POST(self):
        Handler.calls += 1
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        fold = Handler.fold
        msg = json.loads(raw, object_pairs_hook=lambda pairs: {fold(k): v for k, v in pairs})
        params = msg.get("params") or {}
        rid = msg.get("id")
        if msg.get("method") != "tools/call" or params.get("name") != "pay":
            self.reply({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such tool"}})
            return
        state = params.get("requeststate")
        if state is None:
            approved = json.dumps({"approved": params.get("arguments")}, sort_keys=True)
            self.reply({"jsonrpc": "2.0", "id": rid, "result": {
                "resultType": "input_required",
                "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
                    "message": "pay?", "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}},
                "requestState": approved}})
            return
        text = "ACTED name=pay state=%s arguments=%s" % (state, json.dumps(params.get("arguments"), sort_keys=True))
        self.reply({"jsonrpc": "2.0", "id": rid, "result": {
            "resultType": "complete", "content": [{"type": "text", "text": text}]}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fold", choices=["casefold", "nfkc"], required=True)
    args = ap.parse_args()
    Handler.fold = staticmethod(folder(args.fold))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("listening on http://127.0.0.1:%d/mcp" % srv.server_address[1], file=sys.stderr, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
