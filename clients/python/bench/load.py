"""The Python client's share of BENCHMARKS.md: closed-loop Seal+Open pairs per
second through mcp_sealer, over gRPC and over REST, with the same request and
payload as bench/sealer-load's seal-open (the digest computed in process),
beside Python's floor: the same pairs with the same libraries and settings
and none of the client's work. Over gRPC, the floor calls the client's own
grpc.aio stubs (mcp_sealer.gen.sealer.v1.sealer_pb2_grpc) on a channel with
the client's options, with prebuilt messages (the digest computed once);
over REST, a bare httpx.AsyncClient with the client's limits POSTs the very
JSON bodies the client sends, prebuilt. Both keep the client's 10 s deadline
and use no more of a reply than the next call needs. What the client costs
beyond this is its own: the digest, the messages, the JSON mapping,
validation, error mapping and the objects it returns.

With --echo-grpc and --echo-rest, the client and the floor run against
bench/sealer-echo too, where the sealer's cost is out of the figures. The rows
take turns, --repeat times each, each run dialing anew within its warmup, and
the run with the median throughput is reported, as in sealer-load and
examples/typescript/load.ts; a second table gives the client's share of the
floor, and of the Go client's pairs/s when --go-grpc and --go-rest give them.
scripts/bench.sh (ONLY=python) runs it beside bench/sealer-load.

With --profile, each row runs under cProfile (the event loop's thread; not
gRPC's C threads) and a third table gives its own time by library, per
pair. cProfile times every Python function call, so it inflates code made
of many small calls (the digest) against C code (grpc's Cython core);
--own gives those costs without a profiler: the pairs one at a time
against stubs answering the replies at once (no I/O, no server), the
client beside the floor, so that the difference is the client's own work
(with --profile too, its rows run under cProfile, their CPU/pair inflated).

    PYTHONPATH=clients/python/src python clients/python/bench/load.py --grpc 127.0.0.1:7443 --rest 127.0.0.1:7080 \\
        --echo-grpc 127.0.0.1:7543 --echo-rest 127.0.0.1:7580 -c 16 --duration 8 --warmup 2 --repeat 3
    ... --only '^REST Seal\\+Open \\(1024 B\\)$'   one row
    ... --only 'on the echo' --profile                where the time goes
    PYTHONPATH=clients/python/src python clients/python/bench/load.py --own --repeat 3 [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import json
import math
import platform
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import grpc
import grpc.aio
import httpx
from google.protobuf import json_format, timestamp_pb2

from mcp_sealer import DEFAULT_TIMEOUT, SealerClient, grpc_client, request_digest, rest_client, tool_call
from mcp_sealer.gen.sealer.v1 import sealer_pb2 as pb
from mcp_sealer.gen.sealer.v1 import sealer_pb2_grpc

Transport = Literal["gRPC", "REST"]
Server = Literal["sealer", "echo"]
TRANSPORTS: tuple[Transport, ...] = ("gRPC", "REST")

PRINCIPAL = "alice"
# The request of bench/sealer-load's seal-open and of examples/typescript/load.ts.
TOOL, ARGUMENTS = "get_weather", {"location": "New York"}
# The client's channel options (mcp_sealer._grpc) and connection limits (mcp_sealer._rest).
GRPC_OPTIONS: list[tuple[str, int | str]] = [("grpc.max_receive_message_length", 1 << 20)]
REST_LIMITS = httpx.Limits(max_keepalive_connections=64, max_connections=256)


class Driver(Protocol):
    """Runs Seal+Open pairs against one server."""

    async def pair(self) -> None: ...

    async def close(self) -> None: ...


class Through:
    """The pairs through an mcp_sealer client: what an MCP server calls."""

    def __init__(self, client: SealerClient, payload: bytes) -> None:
        self._c = client
        self._payload = payload
        self._request = tool_call(TOOL, ARGUMENTS)

    async def pair(self) -> None:
        s = await self._c.seal(principal=PRINCIPAL, request=self._request, payload=self._payload)
        await self._c.open(s.request_state, principal=PRINCIPAL, request=self._request)

    async def close(self) -> None:
        await self._c.close()


class GrpcFloor:
    """Python's gRPC floor: the client's stubs on a channel with its options, prebuilt messages."""

    def __init__(self, target: str, digest: bytes, payload: bytes, stub: Any = None) -> None:
        self._channel = grpc.aio.insecure_channel(target, options=GRPC_OPTIONS)
        self._stub = stub or sealer_pb2_grpc.SealerStub(self._channel)
        self._binding = pb.Binding(digest=digest)
        self._seal = pb.SealRequest(principal=PRINCIPAL, request=self._binding, payload=payload)

    async def pair(self) -> None:
        sealed = await self._stub.Seal(self._seal, timeout=DEFAULT_TIMEOUT, metadata=())
        # grpc.aio serializes a request after the call starts: one OpenRequest per call.
        await self._stub.Open(
            pb.OpenRequest(request_state=sealed.request_state, principal=PRINCIPAL, request=self._binding),
            timeout=DEFAULT_TIMEOUT,
            metadata=(),
        )

    async def close(self) -> None:
        await self._channel.close(grace=None)


class RestFloor:
    """Python's REST floor: a bare httpx.AsyncClient with the client's limits POSTing the client's JSON bodies, prebuilt."""

    def __init__(self, host: str, digest: bytes, payload: bytes, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._http = httpx.AsyncClient(base_url=f"http://{host}", timeout=DEFAULT_TIMEOUT, limits=REST_LIMITS, transport=transport)
        self._headers = {"content-type": "application/json"}

        def body(msg: pb.SealRequest | pb.OpenRequest) -> str:  # as mcp_sealer._rest writes it
            return json.dumps(json_format.MessageToDict(msg), separators=(",", ":"))

        binding = pb.Binding(digest=digest)
        self._seal_body = body(pb.SealRequest(principal=PRINCIPAL, request=binding, payload=payload)).encode()
        # The client's open body has the state first: the rest of it, prebuilt.
        open_body = body(pb.OpenRequest(request_state="x", principal=PRINCIPAL, request=binding))
        prefix = '{"requestState":"x",'
        assert open_body.startswith(prefix), open_body
        self._open_tail = open_body[len(prefix) :]

    async def pair(self) -> None:
        res = await self._http.post("/v1/seal", content=self._seal_body, headers=self._headers)
        if res.status_code != 200:
            raise RuntimeError(f"seal: HTTP {res.status_code}")
        state = json.loads(res.content)["requestState"]
        body = f'{{"requestState":"{state}",{self._open_tail}'.encode()
        res = await self._http.post("/v1/open", content=body, headers=self._headers)
        if res.status_code != 200:
            raise RuntimeError(f"open: HTTP {res.status_code}")

    async def close(self) -> None:
        await self._http.aclose()


@dataclass(frozen=True)
class Target:
    label: str
    transport: Transport
    server: Server
    floor: bool
    make: Callable[[], Driver]


@dataclass(frozen=True)
class Run:
    pairs: int  # ended within the measured duration
    completed: int  # ended at all, warmup included
    per_second: float
    p50: float  # ms
    p99: float  # ms
    errors: int
    cpu_per_pair: float  # µs


def seconds(s: str) -> float:
    """8, 8s, 500ms."""
    if s.endswith("ms"):
        return float(s[:-2]) / 1000
    return float(s.removesuffix("s"))


async def run(d: Driver, callers: int, warmup: float, duration: float) -> Run:
    """Keeps callers pairs in flight for warmup + duration and counts those that end
    within the measured duration, with the CPU time this process spent in it (all its
    threads: the event loop and gRPC's own)."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    warmup_end, end = start + warmup, start + warmup + duration
    cpu = [0.0, 0.0]
    done: asyncio.Future[None] = loop.create_future()

    def mark(i: int) -> None:
        cpu[i] = time.process_time()
        if i == 1:
            done.set_result(None)

    loop.call_later(warmup, mark, 0)
    loop.call_later(warmup + duration, mark, 1)
    latencies: list[float] = []
    errors = completed = 0

    async def caller() -> None:
        nonlocal errors, completed
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            try:
                await d.pair()
            except Exception:
                if t0 >= warmup_end:
                    errors += 1
                continue
            completed += 1
            t1 = time.perf_counter()
            if t0 >= warmup_end and t1 <= end:
                latencies.append(t1 - t0)

    await asyncio.gather(*(caller() for _ in range(callers)))
    await done
    latencies.sort()

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, math.floor(p * len(latencies)))] * 1000 if latencies else 0.0

    return Run(
        pairs=len(latencies),
        completed=completed,
        per_second=len(latencies) / duration,
        p50=q(0.5),
        p99=q(0.99),
        errors=errors,
        cpu_per_pair=(cpu[1] - cpu[0]) * 1e6 / max(1, len(latencies)),
    )


def targets_of(a: argparse.Namespace, payload: bytes) -> list[Target]:
    digest = request_digest("tools/call", {"name": TOOL, "arguments": ARGUMENTS})
    servers: list[tuple[Server, str, str]] = [("sealer", a.grpc, a.rest)]
    if a.echo_grpc and a.echo_rest:
        servers.append(("echo", a.echo_grpc, a.echo_rest))
    out: list[Target] = []
    for transport in TRANSPORTS:
        for server, g, r in servers:
            host = g if transport == "gRPC" else r
            label = f"{transport} Seal+Open ({len(payload)} B){' on the echo' if server == 'echo' else ''}"

            def client(transport: Transport = transport, host: str = host) -> Driver:
                url = f"http://{host}"
                return Through(grpc_client(url) if transport == "gRPC" else rest_client(url), payload)

            def floor(transport: Transport = transport, host: str = host) -> Driver:
                return GrpcFloor(host, digest, payload) if transport == "gRPC" else RestFloor(host, digest, payload)

            out.append(Target(label, transport, server, False, client))
            out.append(Target(f"Python floor: {label}", transport, server, True, floor))
    if a.only:
        only = re.compile(a.only)
        out = [t for t in out if only.search(t.label)]
    return out


def library(filename: str, function: str) -> str:
    """The library a profiled function belongs to."""
    m = re.search(r"site-packages/([^/]+)/", filename)
    if m:
        return "protobuf" if "/google/protobuf/" in filename else m.group(1)
    if "mcp_sealer" in filename:
        return "mcp_sealer (ours)"
    if filename.endswith("bench/load.py"):
        return "load.py (this tool)"
    if "importlib" in filename or function == "<built-in method posix.stat>":
        return "importlib (imports)"
    if filename == "~":  # a built-in: its name, as "<method 'send' of '_socket.socket' objects>"
        m = re.match(r"<(?:built-in )?method '?([\w.]+)", function)
        return f"built-in {m.group(1) if m else function}"
    m = re.search(r"/python3\.\d+/([^/]+?)(?:\.py)?(?:/|$)", filename)
    if m:  # the standard library: its top-level module or package
        return m.group(1).lstrip("_")
    return filename.rsplit("/", 1)[-1]


def print_profile(rows: list[tuple[str, cProfile.Profile, int]], top: int = 8) -> None:
    """Each row's own time by library, per pair: rows of (label, profile, pairs run under it)."""
    import pstats

    print("\n| row (cProfile, the event loop's thread) | library | own time a pair | share |\n|---|---|---|---|")
    for label, prof, n in rows:
        by: collections.defaultdict[str, float] = collections.defaultdict(float)
        stats = cast(dict[tuple[str, int, str], tuple[int, int, float, float, Any]], pstats.Stats(prof).stats)  # type: ignore[attr-defined]
        for (filename, _line, function), (_cc, _nc, spent, _cum, _callers) in stats.items():
            by[library(filename, function)] += spent
        total, pairs = sum(by.values()), max(1, n)
        for lib, spent in sorted(by.items(), key=lambda kv: -kv[1])[:top]:
            print(f"| {label} | {lib} | {spent * 1e6 / pairs:.1f} µs | {100 * spent / total:.0f}% |")


class StubSealer:
    """A sealer.v1.Sealer stub that answers prebuilt replies at once."""

    def __init__(self, seal: pb.SealResponse, open_: pb.OpenResponse) -> None:
        self._seal, self._open = seal, open_

    async def Seal(self, request: pb.SealRequest, timeout: float | None = None, metadata: object = None) -> pb.SealResponse:
        return self._seal

    async def Open(self, request: pb.OpenRequest, timeout: float | None = None, metadata: object = None) -> pb.OpenResponse:
        return self._open


async def own(payload: bytes, repeat: int, profile: bool, n: int = 20000) -> None:
    """CPU time a pair, the pairs one at a time against stubs answering the replies at once:
    over gRPC the client's stub and the floor's replaced, over REST both httpx clients on one
    httpx.MockTransport; the client's own work is its difference from the floor."""
    digest = request_digest("tools/call", {"name": TOOL, "arguments": ARGUMENTS})
    now = int(time.time())
    expires = timestamp_pb2.Timestamp(seconds=now + 300, nanos=321_000_000)
    # A state as long as the sealer's for this payload (FORMAT.md: version 1, a blob of 110 + len(payload) bytes in base64url).
    state = "A" * math.ceil((110 + len(payload)) * 4 / 3)
    seal = pb.SealResponse(request_state=state, expires_at=expires)
    opened = pb.OpenResponse(payload=payload, issued_at=timestamp_pb2.Timestamp(seconds=now, nanos=321_000_000), expires_at=expires)
    stub = StubSealer(seal, opened)
    bodies = {"/v1/seal": json_format.MessageToJson(seal).encode(), "/v1/open": json_format.MessageToJson(opened).encode()}
    mock = httpx.MockTransport(lambda r: httpx.Response(200, content=bodies[r.url.path], headers={"content-type": "application/json"}))

    def grpc_through() -> Driver:
        c = grpc_client("http://127.0.0.1:1")
        cast(Any, c)._stub = stub
        return Through(c, payload)

    def rest_through() -> Driver:
        c = rest_client("http://127.0.0.1:1")
        cast(Any, c)._http = httpx.AsyncClient(base_url="http://127.0.0.1:1", transport=mock)
        return Through(c, payload)

    rows: list[tuple[str, Callable[[], Driver]]] = [
        ("gRPC client", grpc_through),
        ("gRPC floor", lambda: GrpcFloor("127.0.0.1:1", digest, payload, stub=stub)),
        ("REST client", rest_through),
        ("REST floor", lambda: RestFloor("127.0.0.1:1", digest, payload, transport=mock)),
    ]
    cpu: dict[str, list[float]] = {label: [] for label, _ in rows}
    profiles = {label: cProfile.Profile() for label, _ in rows}
    for _ in range(repeat):
        for label, make in rows:
            d = make()
            for _ in range(n // 10):
                await d.pair()
            if profile:
                profiles[label].enable()
            t0 = time.process_time()
            for _ in range(n):
                await d.pair()
            cpu[label].append((time.process_time() - t0) * 1e6 / n)
            profiles[label].disable()
            await d.close()
    med = {label: statistics.median(v) for label, v in cpu.items()}
    print(f"| pairs one at a time, replies answered at once (python {platform.python_version()}) | CPU/pair | client's own work |\n|---|---|---|")
    for label, _ in rows:
        extra = med[label] - med[label.replace("client", "floor")] if "client" in label else math.nan
        print(f"| {label} | {med[label]:.1f} µs | {f'{extra:.1f} µs' if math.isfinite(extra) else ''} |")
    if profile:
        print_profile([(label, profiles[label], n * repeat) for label, _ in rows], top=12)


def rate_arg(s: str) -> float:
    """A pairs/s figure; empty when the Go client gave none."""
    return float(s) if s.strip() else math.nan


def share(a: float, b: float) -> str:
    return f"{round(100 * a / b)}%" if b > 0 and math.isfinite(a / b) else ""


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grpc", default="127.0.0.1:7443", help="the sealer's gRPC address")
    p.add_argument("--rest", default="127.0.0.1:7080", help="the sealer's HTTP address")
    p.add_argument("--echo-grpc", help="bench/sealer-echo's gRPC address")
    p.add_argument("--echo-rest", "--echo-http", dest="echo_rest", help="bench/sealer-echo's HTTP address")
    p.add_argument("--go-grpc", type=rate_arg, default=math.nan, help="the Go client's gRPC Seal+Open pairs/s, for its share")
    p.add_argument("--go-rest", type=rate_arg, default=math.nan, help="the Go client's REST Seal+Open pairs/s, for its share")
    p.add_argument("-c", type=int, default=16, help="concurrent tasks")
    p.add_argument("-d", "--duration", default="8", help="measured seconds per run")
    p.add_argument("--warmup", default="2", help="unmeasured seconds per run")
    p.add_argument("--payload", type=int, default=1024, help="payload bytes")
    p.add_argument("--repeat", type=int, default=1, help="runs per row, rows taking turns; the median run is reported")
    p.add_argument("--only", help="only the rows whose label matches this regular expression")
    p.add_argument("--profile", action="store_true", help="run each row under cProfile and print its own time by library")
    p.add_argument("--own", action="store_true", help="measure the client's own work against stubs (no servers) and exit")
    a = p.parse_args()
    payload = b"a" * a.payload
    if a.own:
        await own(payload, a.repeat, a.profile)
        return
    warmup, duration = seconds(a.warmup), seconds(a.duration)
    targets = targets_of(a, payload)

    # The rows take turns, so that a slow stretch of a shared machine moves no ratio.
    runs: list[list[Run]] = [[] for _ in targets]
    profiles = [cProfile.Profile() for _ in targets]
    for _ in range(a.repeat):
        for k, t in enumerate(targets):
            d = t.make()
            if a.profile:
                profiles[k].enable()
            try:
                runs[k].append(await run(d, a.c, warmup, duration))
            finally:
                profiles[k].disable()
                await d.close()
    median = [sorted(rs, key=lambda r: r.per_second)[len(rs) // 2] for rs in runs]

    print(
        f"| call (Python client, python {platform.python_version()}, grpcio {grpc.__version__}, httpx {httpx.__version__}) "
        "| concurrency | pairs/s | p50 | p99 | errors | python CPU/pair |\n|---|---|---|---|---|---|---|"
    )
    for t, m in zip(targets, median, strict=True):
        print(f"| {t.label} | {a.c} | {round(m.per_second)} | {m.p50:.2f} ms | {m.p99:.2f} ms | {m.errors} | {round(m.cpu_per_pair)} µs |")

    def rate(transport: Transport, server: Server, floor: bool) -> float:
        for t, m in zip(targets, median, strict=True):
            if (t.transport, t.server, t.floor) == (transport, server, floor):
                return m.per_second
        return math.nan

    print("\n| Python client | concurrency | share of Python floor, sealer | share of Python floor, echo | share of Go client |\n|---|---|---|---|---|")
    for transport in TRANSPORTS:
        client = rate(transport, "sealer", False)
        go = a.go_grpc if transport == "gRPC" else a.go_rest
        print(
            f"| {transport} Seal+Open ({len(payload)} B) | {a.c} | {share(client, rate(transport, 'sealer', True))} | "
            f"{share(rate(transport, 'echo', False), rate(transport, 'echo', True))} | {share(client, go)} |"
        )
    if a.profile:
        print_profile([(t.label, prof, sum(r.completed for r in rs)) for t, prof, rs in zip(targets, profiles, runs, strict=True)])


if __name__ == "__main__":
    asyncio.run(main())
