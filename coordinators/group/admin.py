"""Group administration: DeleteGroups, DescribeGroups and ListGroups, and how a group dies, for classic and
KIP-848 consumer, share and streams groups alike.

Mixed into ``GroupCoordinator``.
"""

from __future__ import annotations

import structlog

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer.records import group_tombstones
from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.coordinators.group.share.records import group_tombstones as share_group_tombstones
from kbroker.coordinators.group.streams.model import StreamsGroup
from kbroker.coordinators.group.streams.records import group_tombstones as streams_group_tombstones
from kbroker.coordinators.group.group import GroupMetadata
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.group")

S = GroupState


class GroupAdmin:
    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.is_(S.DEAD):   # (an empty id too, as Kafka answers it)
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                entries = [(records.offset_commit_key(group_id, *tp), None) for tp in group.offsets]
                if isinstance(group, ConsumerGroup):
                    entries += group_tombstones(group)
                elif isinstance(group, ShareGroup):
                    entries += share_group_tombstones(group_id)
                elif isinstance(group, StreamsGroup):
                    entries += streams_group_tombstones(group)
                else:
                    entries.append((records.group_metadata_key(group_id), None))
                error = self._store(group_id, entries)
                if not error:
                    self._mark_dead(group)
                results[group_id] = error
        return results

    def _mark_dead(self, group) -> None:
        if isinstance(group, GroupMetadata):
            group.transition_to(S.DEAD, self.now_ms())
        group.offsets.clear()
        self.scheduler.cancel(("join", group.group_id))
        self.scheduler.cancel(("sync", group.group_id))
        self.scheduler.cancel(("streams-initial-delay", group.group_id))
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        log.info("group_deleted", group=group.group_id)

    def describe_group(self, group_id: str) -> dict:
        group = self.groups.get(group_id)
        if group is None or isinstance(group, (ConsumerGroup, ShareGroup, StreamsGroup)):
            # A consumer, share or streams group is not described by the classic API: Kafka 4.2 answers as for no group.
            return {"error_code": 0, "group_id": group_id, "group_state": S.DEAD.value, "protocol_type": "",
                    "protocol_data": "", "members": []}
        stable = group.is_(S.STABLE)
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment} for m in group.members.values()]   # (the last one synced)
        return {"error_code": 0, "group_id": group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "", "members": members}

    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None) -> list[dict]:
        """Groups in one of ``states`` and of one of ``types`` (classic, consumer), whatever their case."""
        wanted = {s.lower() for s in states} if states else None
        kinds = {t.lower() for t in types} if types else None
        listed = []
        for g in self.groups.values():
            kind = g.group_type
            state = g.state if kind != "classic" else g.state.value
            if (g.is_(S.DEAD) or (wanted is not None and state.lower() not in wanted)
                    or (kinds is not None and kind not in kinds)):
                continue
            listed.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": state,
                           "group_type": kind})
        return listed
