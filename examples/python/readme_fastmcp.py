"""The conformance tools (mrtr_tools.py) on FastMCP 4.2, served exactly as the
package README's FastMCP server is: the sealer client built at module level,
before ``server.run(...)`` starts the event loop it then works in, the one
line of ``sealed_request_state`` and ``server.run("http", ...)``.

    SEALER_CLIENT=grpc|rest SEALER_URL=http://127.0.0.1:7443 SEALER_REST_URL=http://127.0.0.1:7080 \\
      PORT=8000 python readme_fastmcp.py

``SEALER_CLIENT`` picks ``grpc_client(SEALER_URL)`` (the default) or
``rest_client(SEALER_REST_URL)``; the addresses and ``PORT`` are the README's
(port 0: a free one, which uvicorn's "Uvicorn running on" line names).
``e2e/python_test.go`` runs the conformance suite against it, with either
client; ``fastmcp_server.py`` is the example with flags, auth and the other
tools.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from fastmcp import Context, FastMCP
from mcp_sealer import SealerClient, grpc_client, rest_client
from mcp_sealer.mcp import sealed_request_state

import mrtr_tools
from mrtr_tools import Reply, Round

server = FastMCP("sealer-readme-fastmcp")


def _handler(fn: Callable[[Round], Reply]) -> Callable[[Context], Awaitable[Reply]]:
    async def handler(ctx: Context) -> Reply:
        rc = ctx.request_context
        return fn(Round(ctx.input_responses or {}, ctx.request_state, mrtr_tools.capabilities_of(rc.meta if rc is not None else None)))

    return handler


for name, (description, fn) in mrtr_tools.TOOLS.items():
    server.tool(_handler(fn), name=name, description=description, output_schema=None)
server.prompt(_handler(mrtr_tools.prompt), name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION)

# The three lines, the client at module level. This server has no
# authentication, so every caller is one principal.
client = os.environ.get("SEALER_CLIENT", "grpc")
sealer: SealerClient
if client == "grpc":
    sealer = grpc_client(os.environ.get("SEALER_URL", "http://127.0.0.1:7443"))
elif client == "rest":
    sealer = rest_client(os.environ.get("SEALER_REST_URL", "http://127.0.0.1:7080"))
else:
    raise SystemExit(f"SEALER_CLIENT={client!r}: want grpc or rest")
sealed_request_state(server, sealer, allow_anonymous=True)

server.run("http", port=int(os.environ.get("PORT", "8000")), show_banner=False)
