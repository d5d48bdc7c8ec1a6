"""StreamsGroupHeartbeat's checks of a request, before the group is looked at, in Kafka 4.2's order and words:
what Kafka does not support yet first (static members, task offsets, warm-up tasks, regular expressions),
then what is invalid; and the tasks a member reports, read and checked against the topology."""

from __future__ import annotations

from kbroker.coordinators.group.streams.model import STATIC_LEAVE_EPOCH, StreamsMember, tasks
from kbroker.protocol.errors import ErrorCode


class StreamsError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def streams_error_response(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": "",
            "member_epoch": 0, "heartbeat_interval_ms": 0, "acceptable_recovery_lag": 0,
            "task_offset_interval_ms": 0, "status": None, "active_tasks": None, "standby_tasks": None,
            "warmup_tasks": None, "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None}


def owned_tasks(request) -> tuple | None:
    if request.active_tasks is None:
        return None
    return tuple(tasks((t.subtopology_id, t.partitions) for t in (getattr(request, f) or ()))
                 for f in ("active_tasks", "standby_tasks", "warmup_tasks"))


def validate(request) -> None:
    def invalid(message: str) -> StreamsError:
        return StreamsError(ErrorCode.INVALID_REQUEST, message)
    # Kafka 4.2 refuses what it does not support yet first, then what is invalid.
    if request.instance_id is not None:
        raise invalid("Static membership is not yet supported.")
    if request.task_offsets is not None:
        raise invalid("TaskOffsets are not supported yet.")
    if request.task_end_offsets is not None:
        raise invalid("TaskEndOffsets are not supported yet.")
    if request.warmup_tasks:
        raise invalid("WarmupTasks are not supported yet.")
    if request.topology is not None and any(s.source_topic_regex for s in request.topology.subtopologies):
        raise invalid("Regular expressions for source topics are not supported yet.")
    if request.member_id == "":
        raise invalid("MemberId can't be empty.")
    if request.group_id == "":
        raise invalid("GroupId can't be empty.")
    if request.rack_id == "":
        raise invalid("RackId can't be empty.")
    epoch = request.member_epoch
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        for name, label in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"),
                            ("warmup_tasks", "WarmupTasks")):
            if getattr(request, name) is None or getattr(request, name):   # (null is not empty, for Kafka)
                raise invalid(f"{label} must be empty when (re-)joining.")
        if request.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
        for s in request.topology.subtopologies:
            for info in s.state_changelog_topics:
                if info.partitions != 0:
                    raise StreamsError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                       f"Changelog topic {info.name} must have an undefined partition count, but it "
                                       f"is set to {info.partitions}.")
    elif epoch == STATIC_LEAVE_EPOCH:
        raise invalid("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    given = [getattr(request, f) is not None for f in ("active_tasks", "standby_tasks", "warmup_tasks")]
    if any(given) and not all(given):
        raise invalid("If one task-type is non-null, all must be non-null.")
    if epoch != 0 and request.topology is not None:
        raise invalid("Topology can only be provided when (re-)joining.")


def check_tasks(configured: dict[str, int], owned) -> None:
    for kind in owned or ():
        for s, ps in sorted(kind.items()):
            if s not in configured:
                raise StreamsError(ErrorCode.INVALID_REQUEST, f"Subtopology {s} does not exist in the topology.")
            for p in sorted(ps):
                if not 0 <= p < configured[s]:
                    raise StreamsError(ErrorCode.INVALID_REQUEST,
                                       f"Task {p} for subtopology {s} is invalid. Number of tasks for this "
                                       f"subtopology: {configured[s]}")


def contained(owned, member: StreamsMember) -> bool:
    """Whether every task the member reports is one it holds (a heartbeat at its previous epoch); one that
    reports nothing proves nothing, as Kafka reads it."""
    if owned is None:
        return False
    return all(ps <= held.get(s, frozenset()) for mine, held in zip(owned, member.holds()) for s, ps in mine.items())
