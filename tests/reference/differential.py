"""Run one scenario against Apache Kafka and against kbroker, and compare what a client can observe.

A scenario is a function of a ``Target`` returning plain data (dicts, lists, numbers, strings);
``same`` runs it on every target and asserts the answers are equal once volatile fields (ids,
timestamps, throttle times, host:port, free-text messages) are normalised away. A divergence shows
as pytest's diff of the two answers, Kafka's on the left.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import pprint
import struct
from dataclasses import dataclass

from kbroker.client.connection import KafkaConnection

# Fields whose values differ between any two brokers, or two runs of one: compared by presence only.
VOLATILE = frozenset({
    "throttle_time_ms", "cluster_id", "host", "port", "node_id", "leader_id", "coordinator_key", "topic_id",
    "producer_id", "member_id", "leader", "timestamp", "log_append_time_ms", "generation_id", "controller_id",
    "error_message", "current_leader", "node_endpoints", "rack", "leader_epoch", "cluster_authorized_operations",
    "topic_authorized_operations", "session_id", "broker_id", "replica_nodes", "isr_nodes", "supported_features",
    "finalized_features", "finalized_features_epoch", "zk_migration_ready", "unknown_tagged_fields",
    "preferred_read_replica", "diverging_epoch", "snapshot_id", "transactional_id_authorized",
})


@dataclass(frozen=True)
class Target:
    name: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def plain(value, volatile=VOLATILE):
    """Messages as dicts, volatile fields as ``"<set>"`` / ``None`` (present or not), bytes as lengths."""
    if isinstance(value, dict):
        return {k: (_presence(v) if k in volatile else plain(v, volatile)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, volatile) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    return value


def _presence(value):
    if value is None or value == -1 or value == "":   # ("" and None: Kafka sends either for no message)
        return None if value == "" else value
    return "<set>"


class Divergence(AssertionError):
    """kbroker answered otherwise than Kafka, or failed where Kafka passed. Scenarios of work not yet
    built are ``xfail(strict=True, raises=Divergence)``: a scenario that fails against Kafka itself is a
    broken scenario, and fails the suite."""


def documented(why: str):
    """A divergence kept on purpose and listed in docs/COMPATIBILITY.md: the test passes while kbroker still
    differs (and fails, so the list is corrected, once it does not)."""
    import pytest
    return pytest.mark.xfail(strict=True, raises=Divergence, reason=f"docs/COMPATIBILITY.md: {why}")


async def same(targets: list[Target], scenario, *args):
    """``scenario(target, *args)`` on every target (awaited if it is a coroutine function; a plain
    one runs on a thread so that blocking clients do not stall the loop); asserts the answers are equal
    and returns Kafka's."""
    seen = {}
    kafka, *others = targets
    for target in targets:
        try:
            if inspect.iscoroutinefunction(scenario):
                seen[target.name] = await scenario(target, *args)
            else:
                seen[target.name] = await asyncio.to_thread(scenario, target, *args)
        except Exception as exc:
            if target is kafka:
                raise
            raise Divergence(f"{target.name} failed where {kafka.name} passed: {exc!r}") from exc
    for other in others:
        if seen[other.name] != seen[kafka.name]:
            raise Divergence(diff(kafka.name, seen[kafka.name], other.name, seen[other.name]))
    return seen[kafka.name]


def configs(entries) -> dict[str, dict]:
    """A config list (CreateTopics, DescribeConfigs) as name -> its fields, so order does not count."""
    return {c["name"]: plain({k: v for k, v in c.items() if k not in ("name", "synonyms", "documentation")})
            for c in entries}


def diff(name_a: str, a, name_b: str, b) -> str:
    """The two answers' differing lines, pretty-printed, as a unified diff."""
    lines = difflib.unified_diff(pprint.pformat(a, width=100).splitlines(),
                                 pprint.pformat(b, width=100).splitlines(), name_a, name_b, lineterm="", n=2)
    return f"{name_b} differs from {name_a}:\n" + "\n".join(lines)


async def call(target: Target, api_key: int, version: int, body: dict, client_id: str = "differential"):
    """One request on a connection of its own, through kbroker's protocol package."""
    conn = await KafkaConnection.open("127.0.0.1", target.port, client_id=client_id)
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


async def raw(target: Target, frame: bytes, timeout: float = 10.0) -> bytes | None:
    """Bytes as they are; the answer's body after its correlation id, or None if the broker hung up."""
    reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
    try:
        writer.write(frame)
        await writer.drain()
        try:
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout))[0]
            return (await asyncio.wait_for(reader.readexactly(size), timeout))[4:]
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
    finally:
        writer.close()


def request_frame(api_key: int, version: int, body: bytes = b"", correlation_id: int = 7,
                  client_id: bytes = b"differential", flexible: bool = False) -> bytes:
    """A request with a v1 header, or a v2 one (tagged fields after the client id) if ``flexible``."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    header += b"\0" if flexible else b""
    return struct.pack(">i", len(header) + len(body)) + header + body
