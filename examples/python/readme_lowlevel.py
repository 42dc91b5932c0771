"""The conformance tools (mrtr_tools.py) on the SDK's low-level ``Server``,
served exactly as the package README's low-level server is: the sealer client
built at module level, before ``uvicorn.run(...)`` starts the event loop it
then works in, the one line of ``sealed_request_state`` and
``uvicorn.run(server.streamable_http_app(), ...)``. The low-level ``Server``
has no ``RequestStateBoundary`` of its own: the sealer is its only protection.

    SEALER_CLIENT=grpc|rest SEALER_URL=http://127.0.0.1:7443 SEALER_REST_URL=http://127.0.0.1:7080 \\
      PORT=8000 python readme_lowlevel.py

``SEALER_CLIENT`` picks ``grpc_client(SEALER_URL)`` (the default) or
``rest_client(SEALER_REST_URL)``; the addresses and ``PORT`` are the README's
(port 0: a free one, which uvicorn's "Uvicorn running on" line names).
``e2e/python_test.go`` runs the conformance suite against it, with either
client.
"""

from __future__ import annotations

import os
from typing import Any

import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_sealer import SealerClient, grpc_client, rest_client
from mcp_sealer.mcp import sealed_request_state
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptMessage,
    TextContent,
    Tool,
)

import mrtr_tools
from mrtr_tools import Round


def _round(ctx: ServerRequestContext[Any], params: CallToolRequestParams | GetPromptRequestParams) -> Round:
    """This round as the tools see it; the client capabilities come from the request's own _meta."""
    return Round(params.input_responses or {}, params.request_state, mrtr_tools.capabilities_of((ctx.params or {}).get("_meta")))


async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
    tools = [Tool(name=name, description=description, input_schema={"type": "object"}) for name, (description, _) in mrtr_tools.TOOLS.items()]
    return ListToolsResult(tools=tools)


async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult | InputRequiredResult:
    if params.name not in mrtr_tools.TOOLS:
        raise MCPError(INVALID_PARAMS, f"unknown tool {params.name!r}")
    reply = mrtr_tools.TOOLS[params.name][1](_round(ctx, params))
    if isinstance(reply, InputRequiredResult):
        return reply
    return CallToolResult(content=[TextContent(type="text", text=reply)])


async def list_prompts(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListPromptsResult:
    return ListPromptsResult(prompts=[Prompt(name=mrtr_tools.PROMPT, description=mrtr_tools.PROMPT_DESCRIPTION)])


async def get_prompt(ctx: ServerRequestContext[Any], params: GetPromptRequestParams) -> GetPromptResult | InputRequiredResult:
    if params.name != mrtr_tools.PROMPT:
        raise MCPError(INVALID_PARAMS, f"unknown prompt {params.name!r}")
    reply = mrtr_tools.prompt(_round(ctx, params))
    if isinstance(reply, InputRequiredResult):
        return reply
    return GetPromptResult(messages=[PromptMessage(role="user", content=TextContent(type="text", text=reply))])


server = Server("sealer-readme-lowlevel", on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts, on_get_prompt=get_prompt)

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

uvicorn.run(server.streamable_http_app(), port=int(os.environ.get("PORT", "8000")))
