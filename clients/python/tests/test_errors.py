"""The client's reasons are the proto's, and what each means is its rule there."""

from __future__ import annotations

from mcp_sealer import Reason, SealerError
from mcp_sealer.gen.sealer.v1 import sealer_pb2 as pb


def test_reasons_are_the_protos() -> None:
    proto = {v.name.removeprefix("REASON_"): v.number for v in pb.Reason.DESCRIPTOR.values}
    assert {r.name: r.value for r in Reason} == proto
    assert proto["IN_PROGRESS"] == 15


def test_rejected_and_retryable_follow_each_reasons_rule() -> None:
    for v in pb.Reason.DESCRIPTOR.values:
        rule = v.GetOptions().Extensions[pb.rule]
        e = SealerError(Reason(v.number), "x")
        assert e.rejected is rule.rejects, v.name
        if v.number != 0:
            assert e.retryable is rule.retryable, v.name
    assert SealerError(Reason.EXPIRED, "x").rejected
    assert SealerError(Reason.LEDGER_UNAVAILABLE, "x").retryable
    assert not SealerError(Reason.INVALID_ARGUMENT, "x").retryable
