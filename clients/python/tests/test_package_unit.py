"""The package's surface: a client is built one way and has one type, every
public name is imported from ``mcp_sealer`` (the SDK seam from
``mcp_sealer.mcp``), and the rest is private modules that may change."""

from __future__ import annotations

import pkgutil
from collections.abc import Callable

import pytest

import mcp_sealer
from mcp_sealer import SealerClient, grpc_client, rest_client


def test_every_name_of_all_is_there() -> None:
    missing = [name for name in mcp_sealer.__all__ if not hasattr(mcp_sealer, name)]
    assert not missing, f"mcp_sealer.__all__ names what the package does not define: {missing}"
    assert len(set(mcp_sealer.__all__)) == len(mcp_sealer.__all__)


def test_only_the_sdk_seam_and_the_generated_code_are_public_modules() -> None:
    public = {m.name for m in pkgutil.iter_modules(mcp_sealer.__path__) if not m.name.startswith("_")}
    assert public == {"mcp", "gen"}, f"modules outside the public surface must start with _: {sorted(public - {'mcp', 'gen'})}"


@pytest.mark.parametrize("make", [grpc_client, rest_client])
async def test_both_factories_build_a_sealer_client(make: Callable[..., SealerClient]) -> None:
    async with make("http://127.0.0.1:1") as client:
        assert isinstance(client, SealerClient)
    assert not {"GrpcClient", "RestClient"} & set(mcp_sealer.__all__)
