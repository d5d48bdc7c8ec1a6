"""``kbroker groups``: like kafka-consumer-groups.sh, list, describe (offsets, lag, owners) and delete.

A KIP-848 consumer group (which the classic DescribeGroups does not describe) is read with
ConsumerGroupDescribe: its epochs, and each member's epoch with its current and target assignment. A share
group with ShareGroupDescribe and DescribeShareGroupOffsets: each share partition's start offset and lag. A
streams group (KIP-1071) with StreamsGroupDescribe: each member's process, epoch and tasks, and who owns each
input partition.
"""

from __future__ import annotations

import struct
import sys

from kbroker.protocol.errors import ErrorCode

LIST_OFFSETS, OFFSET_FETCH, FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 2, 9, 10, 15, 16, 42
CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 69, 77, 90
STREAMS_GROUP_DESCRIBE = 89


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


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


def _pairs(assignment) -> list[tuple[str, int]]:
    return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)


async def _owners(conn, group: str) -> tuple[str, dict, list[str]]:
    """(headline, (topic, partition) -> owning member, extra lines) of a classic or a consumer group."""
    described = (await conn.request(DESCRIBE_GROUPS, 5, {"groups": [group],
                                                          "include_authorized_operations": False})).groups[0]
    if described.group_state != "Dead" or described.error_code:
        owners = {tp: m for m in described.members for tp in consumer_assignment(m.member_assignment)}
        return (f"Group {group} is {described.group_state} ({described.protocol_data or 'no protocol'}, "
                f"{len(described.members)} members)"), owners, []
    modern = (await conn.request(CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                               "include_authorized_operations": False})).groups[0]
    if modern.error_code:
        return await _share_group(conn, group)
    owners = {tp: m for m in modern.members for tp in _pairs(m.assignment)}
    lines = ["MEMBER-ID\tINSTANCE-ID\tPROTOCOL\tMEMBER-EPOCH\tASSIGNED\tTARGET"]
    for m in modern.members:
        show = lambda pairs: ",".join(f"{t}-{p}" for t, p in pairs) or "-"   # noqa: E731
        protocol = "classic" if m.member_type == 0 else "consumer"   # (a classic member of a migrating group)
        lines.append(f"{m.member_id}\t{m.instance_id or '-'}\t{protocol}\t{m.member_epoch}\t"
                     f"{show(_pairs(m.assignment))}\t{show(_pairs(m.target_assignment))}")
    return (f"Group {group} is {modern.group_state} (consumer protocol, assignor {modern.assignor_name}, group epoch "
            f"{modern.group_epoch}, assignment epoch {modern.assignment_epoch}, {len(modern.members)} members)",
            owners, lines)


async def _share_group(conn, group: str) -> tuple[str, dict, list[str]]:
    """A share group: its members' assignments, and each share partition's start offset and lag."""
    shared = (await conn.request(SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                            "include_authorized_operations": False})).groups[0]
    if shared.error_code:
        return await _streams_group(conn, group)
    offsets = (await conn.request(DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group,
                                                                               "topics": None}]})).groups[0]
    lines = ["TOPIC\tPARTITION\tSTART-OFFSET\tLAG"]
    for t in offsets.topics:
        for p in t.partitions:
            lines.append(f"{t.topic_name}\t{p.partition_index}\t{p.start_offset}\t{p.lag if p.lag >= 0 else '-'}")
    lines.append("MEMBER-ID\tMEMBER-EPOCH\tASSIGNED")
    for m in shared.members:
        lines.append(f"{m.member_id}\t{m.member_epoch}\t" + (",".join(f"{t}-{p}" for t, p in _pairs(m.assignment))
                                                               or "-"))
    return (f"Group {group} is {shared.group_state} (share group, group epoch {shared.group_epoch}, "
            f"{len(shared.members)} members)", {}, lines)


async def _streams_group(conn, group: str) -> tuple[str, dict, list[str]]:
    """A streams group: its members' processes, epochs and tasks; an input partition is owned by the member
    running its active task."""
    streams = (await conn.request(STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                               "include_authorized_operations": False})).groups[0]
    if streams.error_code:
        return f"Group {group} is Dead (no members)", {}, []
    inputs = {s.subtopology_id: list(s.source_topics) + [t.name for t in s.repartition_source_topics]
              for s in (streams.topology.subtopologies or []) if streams.topology is not None}

    def show(tasks) -> str:
        return " ".join(f"{t.subtopology_id}:{','.join(map(str, t.partitions))}" for t in tasks) or "-"
    owners, lines = {}, ["MEMBER-ID	PROCESS	MEMBER-EPOCH	ACTIVE	STANDBY"]
    for m in streams.members:
        for t in m.assignment.active_tasks:
            owners.update({(topic, p): m for topic in inputs.get(t.subtopology_id, ()) for p in t.partitions})
        lines.append(f"{m.member_id}\t{m.process_id}\t{m.member_epoch}\t{show(m.assignment.active_tasks)}\t"
                     f"{show(m.assignment.standby_tasks)}")
    return (f"Group {group} is {streams.group_state} (streams group, group epoch {streams.group_epoch}, "
            f"assignment epoch {streams.assignment_epoch}, {len(streams.members)} members)", owners, lines)


async def groups_tool(conn, args) -> int:
    if args.action == "list":
        resp = await conn.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        for g in sorted(resp.groups, key=lambda g: g.group_id):
            print(f"{g.group_id}\t{g.group_state}\t{g.protocol_type}\t{g.group_type}")
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
    headline, owners, member_lines = await _owners(conn, args.group)
    fetched = await conn.request(OFFSET_FETCH, 7, {"group_id": args.group, "topics": None, "require_stable": False})
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
    print(headline)
    print("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
    for tp in partitions:
        current = committed.get(tp, -1)
        end = ends.get(tp, -1)
        lag = end - current if current >= 0 and end >= 0 else "-"
        m = owners.get(tp)
        who = f"{m.member_id}\t{m.client_host}\t{m.client_id}" if m else "-\t-\t-"
        print(f"{args.group}\t{tp[0]}\t{tp[1]}\t{current if current >= 0 else '-'}\t{end}\t{lag}\t{who}")
    for line in member_lines:
        print(line)
    return 0
