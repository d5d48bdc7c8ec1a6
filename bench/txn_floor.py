"""The floor under the transactional row: a Python server on uvloop that answers what librdkafka's
transactional producer sends (ApiVersions, Metadata, FindCoordinator, InitProducerId, AddPartitionsToTxn,
Produce, EndTxn) with success, decoding each request and encoding each answer with kbroker's codecs, but
keeping nothing: no log, no state, no coordinator. What a transaction costs a Python broker before it does
any of a broker's work; measured by the same driver as the brokers (``transactions.measure``).

Run as ``python bench/txn_floor.py PORT``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import struct
import sys

PARTITIONS = 6   # every topic asked for has as many partitions as the bench's topics
_SIZE = struct.Struct(">i")


def _answer(api_key: int, request, port: int, offsets) -> dict:
    """The success answer to one request; raises KeyError for an API the producer should not send."""
    here = {"node_id": 0, "host": "127.0.0.1", "port": port}
    if api_key == 18:
        from kbroker.broker.network.registry import api_versions_list

        return {"error_code": 0, "api_keys": api_versions_list(), "throttle_time_ms": 0}
    if api_key == 3:
        return {"brokers": [here], "cluster_id": "floor", "controller_id": 0, "topics": [
            {"error_code": 0, "name": t.name, "topic_id": bytes(16), "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": i, "leader_id": 0, "leader_epoch": 0, "replica_nodes": [0],
                 "isr_nodes": [0], "offline_replicas": []} for i in range(PARTITIONS)]}
            for t in request.topics or []]}
    if api_key == 10:
        keys = request.coordinator_keys or [request.key]
        return {"throttle_time_ms": 0, "error_code": 0, **here,
                "coordinators": [{"key": k, **here, "error_code": 0} for k in keys]}
    if api_key == 22:
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0}
    if api_key == 24:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": t.name, "results_by_partition": [{"partition_index": p, "partition_error_code": 0}
                                                      for p in t.partitions]} for t in request.v3_and_below_topics]}
    if api_key == 0:
        return {"throttle_time_ms": 0, "responses": [
            {"name": t.name, "partition_responses": [{"index": p.index, "error_code": 0, "base_offset": next(offsets)}
                                                     for p in t.partition_data]} for t in request.topic_data]}
    if api_key == 26:
        return {"throttle_time_ms": 0, "error_code": 0}
    raise KeyError(api_key)


class _Answering(asyncio.BufferedProtocol):
    """Frames are cut and answered inside ``buffer_updated``: no task, no future, one write per read."""

    def __init__(self, port: int, offsets) -> None:
        self.port, self.offsets = port, offsets
        self.pending = bytearray()
        self.buffer = bytearray(1 << 20)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> bytearray:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        from kbroker.protocol import schema
        from kbroker.protocol.headers import decode_request_header, response_header
        from kbroker.protocol.types import BufferReader

        self.pending += self.buffer[:nbytes]
        out = []
        while len(self.pending) >= 4:
            (size,) = _SIZE.unpack_from(self.pending)
            if len(self.pending) < 4 + size:
                break
            frame = bytes(self.pending[4:4 + size])
            del self.pending[:4 + size]
            api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
            flexible = schema.REGISTRY[api_key].is_flexible(version)
            reader = BufferReader(frame)
            decode_request_header(reader, flexible)
            if api_key == 18:   # ApiVersions: answered at v0..3 whatever was asked (as a broker does, KIP-511)
                request, version = None, min(version, 3)
            else:
                request = schema.decode(schema.struct_for(api_key, version, True), reader)
            body, _ = schema.encode(schema.struct_for(api_key, version, False),
                                    _answer(api_key, request, self.port, self.offsets))
            data = response_header(correlation_id, api_key, flexible) + body.getvalue()
            out += [_SIZE.pack(len(data)), data]
        if out:
            self.transport.writelines(out)


async def _serve(port: int) -> None:
    offsets = itertools.count(0, 100)
    await asyncio.get_running_loop().create_server(lambda: _Answering(port, offsets), "127.0.0.1", port)
    await asyncio.Future()


NAME = "(floor) canned answers"


def floor(workdir: str):
    """The floor started as the peers are (``bench.brokers.Peer``)."""
    from bench.brokers import Peer

    return Peer(NAME, lambda port, _: [sys.executable, os.path.abspath(__file__), str(port)], workdir,
                "a Python uvloop server that decodes each request and answers success with kbroker's codecs, "
                "keeping nothing (`bench/txn_floor.py`): the cost of a transaction to any Python broker")


if __name__ == "__main__":
    import uvloop

    uvloop.run(_serve(int(sys.argv[1])))
