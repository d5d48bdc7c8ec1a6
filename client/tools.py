"""The console tools behind ``kbroker topics | produce | consume``."""

from __future__ import annotations

import asyncio
import struct
import sys

from kbroker.client.acls import acls_tool
from kbroker.client.configs import configs_tool
from kbroker.client.connection import KafkaConnection
from kbroker.client.properties import read_properties
from kbroker.client.security import SecurityConfigError, connect_options
from kbroker.client.users import users
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch, iter_records, split_batches

METADATA, PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 3, 0, 1, 2, 19, 20, 32
OFFSET_FETCH, FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 9, 10, 15, 16, 42


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


def consumer_assignment(data: bytes) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a ConsumerProtocolAssignment (every version starts the same way)."""
    data = bytes(data)
    if len(data) < 6:
        return []
    pos, out = 2, []
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2:pos + 2 + length].decode()
        pos += 2 + length
        (n,) = struct.unpack_from(">i", data, pos)
        out += [(topic, p) for p in struct.unpack_from(f">{max(n, 0)}i", data, pos + 4)]
        pos += 4 + 4 * max(n, 0)
    return out


async def groups(args) -> int:
    """Like kafka-consumer-groups.sh: list, describe (offsets, lag, owners) and delete."""
    conn = await _connect(args)
    try:
        if args.action == "list":
            resp = await conn.request(LIST_GROUPS, 4, {"states_filter": []})
            for g in sorted(resp.groups, key=lambda g: g.group_id):
                print(f"{g.group_id}\t{g.group_state}\t{g.protocol_type}")
            return 0
        if not args.group:
            return _fail("--group is required")
        found = await conn.request(FIND_COORDINATOR, 3, {"key": args.group, "key_type": 0})
        if found.error_code:
            return _fail(f"{ErrorCode(found.error_code).name}: no coordinator for {args.group}")
        if args.action == "delete":
            resp = await conn.request(DELETE_GROUPS, 2, {"groups_names": [args.group]})
            if resp.results[0].error_code:
                return _fail(ErrorCode(resp.results[0].error_code).name)
            print(f"Deleted group {args.group}.")
            return 0
        described = (await conn.request(DESCRIBE_GROUPS, 5, {"groups": [args.group],
                                                              "include_authorized_operations": False})).groups[0]
        owners = {tp: m for m in described.members for tp in consumer_assignment(m.member_assignment)}
        fetched = await conn.request(OFFSET_FETCH, 7, {"group_id": args.group, "topics": None,
                                                       "require_stable": False})
        committed = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
        partitions = sorted(set(committed) | set(owners))
        ends = {}
        if partitions:
            by_topic: dict[str, list[int]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            resp = await conn.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                           for p in ps]} for t, ps in by_topic.items()]})
            ends = {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions}
        print(f"Group {args.group} is {described.group_state} ({described.protocol_data or 'no protocol'}, "
              f"{len(described.members)} members)")
        print("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
        for tp in partitions:
            current = committed.get(tp, -1)
            end = ends.get(tp, -1)
            lag = end - current if current >= 0 and end >= 0 else "-"
            m = owners.get(tp)
            who = f"{m.member_id}\t{m.client_host}\t{m.client_id}" if m else "-\t-\t-"
            print(f"{args.group}\t{tp[0]}\t{tp[1]}\t{current if current >= 0 else '-'}\t{end}\t{lag}\t{who}")
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
    action = {"topics": topics, "produce": produce, "consume": consume, "groups": groups,
              "users": _with_connection(users), "acls": _with_connection(acls_tool),
              "configs": _with_connection(configs_tool)}[args.command]
    try:
        return asyncio.run(action(args))
    except SecurityConfigError as exc:   # a bad --command-config: say which setting, no traceback
        return _fail(f"--command-config: {exc}")
    except (ConnectionError, OSError) as exc:
        return _fail(f"cannot reach {args.bootstrap_server}: {exc}")


__all__ = ["run"]
