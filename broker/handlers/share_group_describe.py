"""ShareGroupDescribe (KIP-932): a share group's epoch and each member's assignment."""

from kbroker.broker.handlers.common import describe_groups_of_a_type
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_describe import SHARE_GROUP_DESCRIBE as API  # noqa: F401


def _refused(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}


def handle(ctx, request):
    """A coordinator's refusal in its words, as Kafka's share group describe gives it."""
    coordinator = ctx.broker.group_coordinator
    return describe_groups_of_a_type(ctx, request, _refused, ShareGroup, coordinator.describe_share_group,
                                     kafka_message)
