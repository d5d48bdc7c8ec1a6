"""StreamsGroupDescribe (KIP-1071): a streams group's epochs, topology and each member's current and target
tasks."""

from kbroker.broker.configuration import features
from kbroker.broker.handlers.common import describe_groups_of_a_type
from kbroker.coordinators.group.streams.describe import streams_group_description
from kbroker.coordinators.group.streams.model import StreamsGroup
from kbroker.coordinators.group.streams.topology import InvalidTopology
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.streams_group_describe import STREAMS_GROUP_DESCRIBE as API  # noqa: F401


def _refused(group_id: str, error: ErrorCode, message: str | None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
            "authorized_operations": -2147483648}


def _configured(coordinator, group: StreamsGroup):
    if group.topology is None:
        return None
    try:
        return coordinator.configure_topology(group.topology)[0]
    except InvalidTopology:
        return None


def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    if features.level(ctx.broker, "streams.version") < 1:
        return {"throttle_time_ms": 0, "groups": [_refused(g, ErrorCode.UNSUPPORTED_VERSION, None)
                                                  for g in request.group_ids]}

    return describe_groups_of_a_type(ctx, request, _refused, StreamsGroup, lambda group: streams_group_description(
        group, _configured(coordinator, group)))
