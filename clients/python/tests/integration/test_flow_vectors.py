"""The input keys of sealer/testdata/flows.json ("inputs") through the
client to a real sealer: the keys of every "ok" vector are sealed and open
in any order; every "refused" one is refused, by the sealer
(INVALID_ARGUMENT) or, for keys no str can carry, by the client."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_sealer import FlowRequest, Reason, SealerError, grpc_client, tool_call

from .harness import ROOT, Sealer

pytestmark = pytest.mark.integration

VECTORS: list[dict[str, Any]] = json.loads((ROOT / "sealer" / "testdata" / "flows.json").read_text())["inputs"]
REQUEST = tool_call("t", {})


def keys_of(v: dict[str, Any]) -> list[str]:
    if "keys" in v:
        return list(v["keys"])
    # Bytes no UTF-8 str holds: the closest a caller can come is a str with
    # lone surrogates, which no key may hold.
    return [bytes.fromhex(k).decode("utf-8", "surrogateescape") for k in v["keysHex"]]


def test_both_verdicts() -> None:
    assert sum(v["want"] == "ok" for v in VECTORS) >= 10
    assert sum(v["want"] == "refused" for v in VECTORS) >= 5


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
async def test_input_keys_vector(real_sealer: Sealer, v: dict[str, Any]) -> None:
    keys = keys_of(v)
    async with grpc_client(real_sealer.grpc_url) as c:
        if v["want"] == "refused":
            with pytest.raises(SealerError) as e:
                await c.seal(principal="alice", request=REQUEST, flow=FlowRequest(asked=keys))
            assert e.value.reason is Reason.INVALID_ARGUMENT, e.value
            return
        sealed = await c.seal(principal="alice", request=REQUEST, flow=FlowRequest(asked=keys))
        opened = await c.open(sealed.request_state, principal="alice", request=REQUEST, responded=list(reversed(keys)))
        assert opened.flow is not None and opened.flow.round == 1
