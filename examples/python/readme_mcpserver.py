"""The conformance tools (mrtr_tools.py) on ``MCPServer``, served exactly as the
README's server is: the sealer client built at module level, before
``server.run(...)`` starts the event loop it then works in, the one line of
``sealed_request_state`` and ``server.run("streamable-http", ...)``.

    SEALER_CLIENT=grpc|rest SEALER_URL=http://127.0.0.1:7443 SEALER_REST_URL=http://127.0.0.1:7080 \\
      PORT=8000 python readme_mcpserver.py

``SEALER_CLIENT`` picks ``grpc_client(SEALER_URL)`` (the default) or
``rest_client(SEALER_REST_URL)``; the addresses and ``PORT`` are the README's
(port 0: a free one, which uvicorn's "Uvicorn running on" line names).
``e2e/python_test.go`` runs the conformance suite against it, with either
client; ``server.py`` is the example with flags, auth and the other tools.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp_sealer import SealerClient, grpc_client, rest_client
from mcp_sealer.mcp import sealed_request_state

import mrtr_tools
from mrtr_tools import Reply, Round

server = MCPServer("sealer-readme-mcpserver")


def _handler(fn: Callable[[Round], Reply]) -> Callable[[Context], Awaitable[Reply]]:
    async def handler(ctx: Context) -> Reply:
        params = ctx.request_context.params or {}
        return fn(Round(ctx.input_responses or {}, ctx.request_state, mrtr_tools.capabilities_of(params.get("_meta"))))

    return handler


for name, (description, fn) in mrtr_tools.TOOLS.items():
    server.add_tool(_handler(fn), name=name, description=description, structured_output=False)
server.add_prompt(Prompt.from_function(_handler(mrtr_tools.prompt), name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION))

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

server.run("streamable-http", port=int(os.environ.get("PORT", "8000")))
