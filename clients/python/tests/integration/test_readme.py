"""Issue 42: the READMEs' Python servers work as written, their sealer
client built at module level before ``server.run(...)`` starts its loop
(before the fix the gRPC client failed every call "attached to a different
loop"), on MCPServer, the low-level Server and FastMCP, with either client."""

from __future__ import annotations

import pytest

from .. import readme_lines
from .harness import Sealer

SNIPPETS = [(str(p.relative_to(readme_lines.ROOT)), i, code) for p in readme_lines.READMES for i, code in enumerate(readme_lines.snippets(p))]


def test_every_server_kind_and_client_is_shown() -> None:
    text = "\n".join(code for _, _, code in SNIPPETS)
    for needed in ("MCPServer(", "Server(", "FastMCP(", "grpc_client(", "rest_client("):
        assert needed in text, f"no README snippet that runs as written uses {needed}"


@pytest.mark.parametrize(("readme", "index", "code"), SNIPPETS, ids=[f"{r}#{i}" for r, i, _ in SNIPPETS])
def test_snippet_runs_as_written(real_sealer: Sealer, readme: str, index: int, code: str) -> None:
    readme_lines.run_snippet(code, real_sealer.grpc, real_sealer.http, env={"PYTHONPATH": str(readme_lines.ROOT / "clients" / "python" / "src")})
