"""The console tools behind ``kbroker topics | produce | consume``."""

from __future__ import annotations

import asyncio
import sys

from kbroker.client.acls import acls_tool
from kbroker.client.configs import configs_tool
from kbroker.client.groups import groups_tool
from kbroker.client.connection import KafkaConnection
from kbroker.client.properties import read_properties
from kbroker.client.security import SecurityConfigError, connect_options
from kbroker.client.users import users
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch, iter_records, split_batches

METADATA, PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 3, 0, 1, 2, 19, 20, 32


def _split_server(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


async def _connect(args) -> KafkaConnection:
    host, port = _split_server(args.bootstrap_server)
    try:
        properties = read_properties(args.command_config) if args.command_config else None
    except OSError as exc:
        raise SecurityConfigError(f"cannot read {args.command_config}: {exc.strerror or exc}") from None
    security = connect_options(properties) if properties is not None else {}
    return await KafkaConnection.open(host, port, client_id="kbroker-cli", **security)


def _fail(message: str) -> int:
    print(f"kbroker: {message}", file=sys.stderr)
    return 1


async def topics(args) -> int:
    conn = await _connect(args)
    try:
        if args.action == "list":
            md = await conn.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
            for t in sorted(md.topics, key=lambda t: t.name):
                print(t.name)
            return 0
        if not args.topic:
            return _fail("--topic is required")
        if args.action == "create":
            configs = [dict(zip(("name", "value"), c.split("=", 1))) for c in args.config]
            resp = await conn.request(CREATE_TOPICS, 7, {"topics": [{
                "name": args.topic, "num_partitions": args.partitions,
                "replication_factor": args.replication_factor, "configs": configs}], "timeout_ms": 30000})
            result = resp.topics[0]
            if result.error_code:
                return _fail(f"{ErrorCode(result.error_code).name}: {result.error_message}")
            print(f"Created topic {args.topic}.")
            return 0
        if args.action == "delete":
            resp = await conn.request(DELETE_TOPICS, 6, {"topics": [{"name": args.topic}], "timeout_ms": 30000})
            if resp.responses[0].error_code:
                return _fail(ErrorCode(resp.responses[0].error_code).name)
            print(f"Deleted topic {args.topic}.")
            return 0
        md = await conn.request(METADATA, 12, {"topics": [{"name": args.topic}], "allow_auto_topic_creation": False})
        t = md.topics[0]
        if t.error_code:
            return _fail(ErrorCode(t.error_code).name)
        cfg = await conn.request(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": args.topic, "configuration_keys": None}]})
        overrides = ",".join(f"{c.name}={c.value}" for c in cfg.results[0].configs if c.config_source == 1)
        print(f"Topic: {t.name}\tTopicId: {t.topic_id.hex()}\tPartitionCount: {len(t.partitions)}\t"
              f"Configs: {overrides}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            print(f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                  f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}")
        return 0
    finally:
        await conn.close()


async def produce(args) -> int:
    conn = await _connect(args)
    try:
        records = []
        for line in sys.stdin.read().splitlines():
            if args.keys and "\t" in line:
                key, value = line.split("\t", 1)
                records.append((key.encode(), value.encode(), []))
            else:
                records.append((None, line.encode(), []))
        for start in range(0, len(records), 500):
            batch = build_batch(records[start:start + 500])
            resp = await conn.request(PRODUCE, 9, {"transactional_id": None, "acks": args.acks, "timeout_ms": 30000,
                                                   "topic_data": [{"name": args.topic, "partition_data": [
                                                       {"index": args.partition, "records": batch}]}]},
                                      expect_response=args.acks != 0)
            if resp is not None:
                p = resp.responses[0].partition_responses[0]
                if p.error_code:
                    return _fail(f"{ErrorCode(p.error_code).name}: {p.error_message}")
        return 0
    finally:
        await conn.close()


async def consume(args) -> int:
    conn = await _connect(args)
    try:
        md = await conn.request(METADATA, 12, {"topics": [{"name": args.topic}], "allow_auto_topic_creation": False})
        if md.topics[0].error_code:
            return _fail(ErrorCode(md.topics[0].error_code).name)
        partitions = [p.partition_index for p in md.topics[0].partitions]
        if args.partition is not None:
            partitions = [args.partition]
        which = -2 if args.from_beginning else -1
        lo = await conn.request(LIST_OFFSETS, 7, {"replica_id": -1, "topics": [{"name": args.topic, "partitions": [
            {"partition_index": p, "timestamp": which} for p in partitions]}]})
        positions = {p.partition_index: p.offset for p in lo.topics[0].partitions}
        printed = 0
        loop = asyncio.get_running_loop()
        deadline = None if args.timeout_ms is None else loop.time() + args.timeout_ms / 1000
        while args.max_messages is None or printed < args.max_messages:
            if deadline is not None and loop.time() > deadline:
                break
            resp = await conn.request(FETCH, 12, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
                                                  "max_bytes": 1 << 24, "isolation_level": 0, "session_epoch": -1,
                                                  "topics": [{"topic": args.topic, "partitions": [
                                                      {"partition": p, "fetch_offset": o,
                                                       "partition_max_bytes": 1 << 20}
                                                      for p, o in positions.items()]}]})
            for topic in resp.responses:
                for part in topic.partitions:
                    data = bytes(part.records or b"")
                    for pos, header in split_batches(data):
                        if header.is_control:
                            positions[part.partition_index] = header.next_offset
                            continue
                        for record in iter_records(data, pos):
                            if record.offset < positions[part.partition_index]:
                                continue
                            print((record.value or b"").decode(errors="replace"), flush=True)
                            positions[part.partition_index] = record.offset + 1
                            printed += 1
                            if args.max_messages is not None and printed >= args.max_messages:
                                return 0
        return 0
    finally:
        await conn.close()


def _with_connection(tool):
    async def run(args) -> int:
        conn = await _connect(args)
        try:
            return await tool(conn, args)
        finally:
            await conn.close()
    return run


def run(args) -> int:
    action = {"topics": topics, "produce": produce, "consume": consume, "groups": _with_connection(groups_tool),
              "users": _with_connection(users), "acls": _with_connection(acls_tool),
              "configs": _with_connection(configs_tool)}[args.command]
    try:
        return asyncio.run(action(args))
    except SecurityConfigError as exc:   # a bad --command-config: say which setting, no traceback
        return _fail(f"--command-config: {exc}")
    except (ConnectionError, OSError) as exc:
        return _fail(f"cannot reach {args.bootstrap_server}: {exc}")


__all__ = ["run"]
