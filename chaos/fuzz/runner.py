"""Drive fuzz cases against live nodes: many connections at once, idle connections held open
for the whole run, and a health probe of every node every ``probe_every`` cases.

Every case is reproducible from ``(seed, index)``: its node, API, version, body and mutation
all come from ``random.Random(f"{seed}:{index}")``.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.index import load_request_schema

from chaos.fuzz.mutate import Case, frame, mutate
from chaos.fuzz.requests import header, random_request, sweep

CASE_WAIT_S = 0.3  # how long a case waits for an answer or a close before hanging up itself
PROBE_TIMEOUT_S = 10.0


@dataclass
class FuzzReport:
    seed: int
    swept: int = 0  # the huge-count trick at every offset of every served API and version
    cases: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)  # answered / closed / no_answer
    probes: int = 0
    failures: list[str] = field(default_factory=list)  # probe failures and dead nodes
    idle_held: int = 0
    elapsed_s: float = 0.0

    def summary(self) -> str:
        return (f"seed={self.seed} swept={self.swept} cases={self.cases} in {self.elapsed_s:.1f}s kinds={dict(self.kinds)} "
                f"outcomes={dict(self.outcomes)} probes={self.probes} idle_connections={self.idle_held} "
                f"failures={len(self.failures)}")


def _addr(node: str) -> tuple[str, int]:
    host, port = node.rsplit(":", 1)
    return host, int(port)


async def _exchange(node: str, payload: bytes, timeout: float) -> bytes | None:
    """Send one frame and read one response frame (None if closed)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(*_addr(node)), timeout)
    try:
        writer.write(payload)
        head = await asyncio.wait_for(reader.readexactly(4), timeout)
        (size,) = struct.unpack(">i", head)
        return await asyncio.wait_for(reader.readexactly(size), timeout)
    except asyncio.IncompleteReadError:
        return None
    finally:
        writer.close()


async def served_apis(node: str) -> list[tuple[int, int, int]]:
    """``(api_key, min, max)`` from ApiVersions v0, kept to what kio has schemas for."""
    resp = await _exchange(node, frame(header(18, 0, 1, flexible=False)), PROBE_TIMEOUT_S)
    assert resp is not None and len(resp) >= 10, "ApiVersions was not answered"
    error, count = struct.unpack_from(">hi", resp, 4)
    assert error == 0, f"ApiVersions error {error}"
    out = []
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", resp, 10 + 6 * i)
        versions = []
        for v in range(lo, hi + 1):
            try:
                load_request_schema(key, v)
                versions.append(v)
            except Exception:  # noqa: BLE001 - advertised without a schema (Produce v0-2)
                continue
        if versions:
            out.append((key, versions[0], versions[-1]))
    return out


async def probe(node: str) -> str | None:
    """A health probe: ApiVersions and Metadata (all topics) answered. ``None`` if healthy."""
    try:
        if await _exchange(node, frame(header(18, 0, 7, flexible=False)), PROBE_TIMEOUT_S) is None:
            return f"{node}: ApiVersions closed"
        if await _exchange(node, frame(header(3, 1, 8, flexible=False) + struct.pack(">i", -1)),
                           PROBE_TIMEOUT_S) is None:
            return f"{node}: Metadata closed"
    except (OSError, TimeoutError) as e:
        return f"{node}: {type(e).__name__}: {e}"
    return None


async def _run_case(node: str, case: Case) -> str:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*_addr(node)), 5)
    except (OSError, TimeoutError) as e:
        return f"connect_failed:{type(e).__name__}"
    try:
        if case.drip:
            for i in range(len(case.data)):
                writer.write(case.data[i:i + 1])
                await asyncio.sleep(0.002)
        else:
            writer.write(case.data)
        if case.half_close and writer.can_write_eof():
            writer.write_eof()
        try:
            got = await asyncio.wait_for(reader.read(65536), CASE_WAIT_S)
        except TimeoutError:
            return "no_answer"
        return "answered" if got else "closed"
    except (ConnectionError, OSError):
        return "closed"
    finally:
        writer.transport.abort()


def make_case(seed: int, index: int, nodes: list[str], apis: list[tuple[int, int, int]]) -> tuple[str, Case]:
    rng = random.Random(f"{seed}:{index}")
    node = rng.choice(nodes)
    key, lo, hi = rng.choice(apis)
    version = rng.randint(lo, hi)
    request = random_request(rng, key, version, index & 0x7FFFFFFF)
    body_offset = len(header(key, version, 0, flexible=load_request_schema(key, version).__flexible__))
    return node, mutate(rng, request, body_offset)


async def _sweep(nodes: list[str], apis: list[tuple[int, int, int]], concurrency: int, report: FuzzReport) -> None:
    payloads = [frame(p) for key, lo, hi in apis for v in range(lo, hi + 1) for p in sweep(key, v)]
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int, data: bytes) -> None:
        async with sem:
            report.outcomes[(await _run_case(nodes[i % len(nodes)], Case("sweep", data))).split(":")[0]] += 1
            report.swept += 1

    await asyncio.gather(*(one(i, d) for i, d in enumerate(payloads)))


async def _check(nodes: list[str], report: FuzzReport, when: str,
                 dead_nodes: Callable[[], list[str]] | None) -> None:
    """Probe every node and ask which are dead; record what is wrong."""
    for node in nodes:
        failure = await probe(node)
        report.probes += 1
        if failure is not None:
            report.failures.append(f"{when}: {failure}")
    for dead in dead_nodes() if dead_nodes is not None else []:
        report.failures.append(f"{when}: {dead}")


async def fuzz(nodes: list[str], *, cases: int, seed: int, concurrency: int = 16, idle_connections: int = 300,
               probe_every: int = 250, dead_nodes: Callable[[], list[str]] | None = None,
               sweep_first: bool = True) -> FuzzReport:
    report = FuzzReport(seed)
    started = time.monotonic()
    apis = await served_apis(nodes[0])
    if sweep_first:
        await _sweep(nodes, apis, concurrency, report)
        await _check(nodes, report, "after the sweep", dead_nodes)
    idle: list[asyncio.StreamWriter] = []
    for i in range(idle_connections):  # held open, silent (some with half a frame), the whole run
        try:
            _, w = await asyncio.open_connection(*_addr(nodes[i % len(nodes)]))
        except OSError:
            break
        if i % 3 == 0:
            w.write(struct.pack(">i", 1000) + b"\x00\x03")
        idle.append(w)
    report.idle_held = len(idle)
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < cases:
            index = next_index
            next_index += 1
            node, case = make_case(seed, index, nodes, apis)
            report.kinds[case.kind] += 1
            report.outcomes[(await _run_case(node, case)).split(":")[0]] += 1
            report.cases += 1

    async def prober() -> None:
        done = 0
        while True:
            await asyncio.sleep(0.2)
            if report.cases - done < probe_every and report.cases < cases:
                continue
            done = report.cases
            await _check(nodes, report, f"after {report.cases} cases", dead_nodes)
            if report.cases >= cases:
                return

    try:
        await asyncio.gather(prober(), *(worker() for _ in range(concurrency)))
    finally:
        for w in idle:
            w.transport.abort()
    report.elapsed_s = time.monotonic() - started
    return report
